"""The report's history figure: each stack's requests/s run after run.

When a report covers more than two runs (a weekly series, say), each workload gets a figure
with one line per stack and load point, one point per run in time order: the median
requests/s of that run's replicates with its 95% CI
(:func:`pywebbench.analysis.stats.summarize_replicates`). The rest of the report pools the runs;
this figure keeps them apart, so a drift or a step is visible.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pywebbench.analysis import stats
from pywebbench.report.figures import (
    Colours,
    Figure,
    axis_layout,
    base_layout,
    ci_bars,
    sig_round,
    text,
)
from pywebbench.report.view import Estimate, ReportView, WorkloadView
from pywebbench.store.model import Study

MIN_RUNS = 3  # a figure only when the report covers more than two runs


@dataclass(frozen=True)
class HistoryPoint:
    """One stack's figure on one workload and load point in one run."""

    run_id: str
    created_at: str
    stack_key: str
    load_point: str
    rps: Estimate


def run_history(study: Study) -> dict[str, list[HistoryPoint]]:
    """Workload -> points, one per (run, stack, load point) with measured iterations;
    empty when the study has fewer than :data:`MIN_RUNS` runs."""
    if len(study.runs) < MIN_RUNS:
        return {}
    created = {r.id: r.created_at for r in study.runs}
    stack_key = {s.id: s.key for s in study.stacks}
    cells = {c.id: c for c in study.cells}
    values: dict[tuple[str, str, str, str], dict[tuple[int, int], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for it in study.iterations:
        cell = cells.get(it.cell_id)
        if cell is None or it.kind != "measured" or it.interrupted:
            continue
        key = (cell.workload, cell.run_id, stack_key[cell.stack_id], cell.load_point)
        values[key][(it.cell_id, it.replicate)].append(it.rps)
    out: dict[str, list[HistoryPoint]] = defaultdict(list)
    for (workload, run_id, skey, load_point), by_rep in values.items():
        s = stats.summarize_replicates(list(by_rep.values()))
        est = Estimate(s.median, s.ci_low, s.ci_high, s.n)
        out[workload].append(HistoryPoint(run_id, created[run_id], skey, load_point, est))
    for points in out.values():
        points.sort(key=lambda p: (p.created_at, p.run_id))
    return dict(out)


def history_figure(
    view: ReportView, workload: WorkloadView, points: list[HistoryPoint], colours: Colours
) -> Figure | None:
    """Requests/s per run, one line per stack (and load point when there are several)."""
    if not points:
        return None
    runs = list(dict.fromkeys(p.run_id for p in points))
    several_loads = len(workload.load_points) > 1
    lines: dict[str, list[HistoryPoint]] = defaultdict(list)
    for p in points:
        label = view.stacks[p.stack_key].label if p.stack_key in view.stacks else p.stack_key
        lines[f"{label} @ {p.load_point}" if several_loads else label].append(p)
    data = []
    for name in sorted(lines):
        pts = lines[name]
        est = [p.rps for p in pts]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": text(name),
                "x": [p.run_id for p in pts],
                "y": [sig_round(e.median, 6) for e in est],
                "error_y": ci_bars(est, thickness=1, width=3),
                "line": {"color": colours.colour(name.split(" @ ")[0]), "width": 2},
                "customdata": [[text(p.created_at[:16].replace("T", " "))] for p in pts],
                "hovertemplate": f"<b>{text(name)}</b><br>%{{x}} (%{{customdata[0]}} UTC): "
                "%{y:,.0f} req/s<extra></extra>",
                "meta": {"stack": name.split(" @ ")[0]},
            }
        )
    layout = base_layout(
        height=360,
        xaxis=axis_layout("run", type="category", categoryorder="array", categoryarray=runs),
        yaxis=axis_layout("requests/s", rangemode="tozero", tickformat="~s"),
    )
    return {"data": data, "layout": layout}
