"""Terminal output of ``pywebbench run``: live progress, then ranked summary tables."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from pywebbench import formatting as fmt
from pywebbench.analysis.ratio import spread
from pywebbench.analysis.stats import Summary, summarize_replicates
from pywebbench.analysis.ties import group_estimate, group_id, ranked_gaps
from pywebbench.faults.outcome import CellRobustness
from pywebbench.load.histogram import Histogram
from pywebbench.meter.core_speed import speed_note, study_scaling
from pywebbench.report.flags import flag_notes, legend
from pywebbench.run.events import Events
from pywebbench.store import Study
from pywebbench.store.model import Iteration
from pywebbench.study.matrix import CellPlan


class LiveDisplay:
    """A rich progress bar over the study's iterations, with the current cell and live rps.

    Also logs one line per finished cell, so non-interactive output (CI logs) stays readable.
    """

    def __init__(self, console: Console, total_iterations: int) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("iterations"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.matrix_task = self.progress.add_task("matrix", total=max(1, total_iterations))
        self.cell_task = self.progress.add_task("", total=None, visible=False)
        self._cell: CellPlan | None = None
        self._left: dict[str, int] = {}  # cell key -> iterations still expected

    def __enter__(self) -> LiveDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def events(self) -> Events:
        return Events(
            phase=self._phase,
            cell_start=self._cell_start,
            iteration_start=self._iteration_start,
            iteration_done=self._iteration_done,
            cell_done=self._cell_done,
            live_rps=self._live,
            knee=self._knee,
        )

    def _phase(self, msg: str) -> None:
        self.progress.update(self.cell_task, description=msg, visible=True)
        self._cell = None

    def _cell_start(self, cell: CellPlan, iterations: int) -> None:
        self._left[cell.key] = iterations

    def _iteration_start(self, cell: CellPlan, kind: str) -> None:
        self._cell = cell
        self.progress.update(self.cell_task, description=f"{cell.label}: {kind}")

    def _iteration_done(self, cell: CellPlan, kind: str, rps: float) -> None:
        self._cell = cell
        left = self._left.get(cell.key, 0)
        if left == 0:  # a replicate beyond the plan (the replicate budget): the total grows
            total = self.progress.tasks[self.matrix_task].total or 0
            self.progress.update(self.matrix_task, total=total + 1)
        self._left[cell.key] = max(0, left - 1)
        self.progress.advance(self.matrix_task)
        self.progress.update(
            self.cell_task, description=f"{cell.label}: last {kind} {fmt.rate(rps)} req/s"
        )

    def _cell_done(self, cell: CellPlan, status: str, why: str | None) -> None:
        left = self._left.pop(cell.key, 0)
        if left:
            self.progress.advance(self.matrix_task, left)
        if status == "ok":
            self.console.log(f"[green]ok[/] {cell.label}")
        else:
            self.console.log(f"[red]failed[/] {cell.label}: {why}")

    def _knee(self, cell: CellPlan, step: str) -> None:
        """A step of a knee search (docs/slo.md): logged, so the probes stay on screen."""
        self._cell = cell
        self.console.log(f"{cell.label}: {step}")

    def _live(self, rps: float) -> None:
        if self._cell is not None:
            self.progress.update(
                self.cell_task, description=f"{self._cell.label}: {fmt.rate(rps)} req/s"
            )


def _latency_us(its: list[Iteration]) -> dict[str, float]:
    """p50/p99 over iterations by the report's rule (docs/report.md): quantiles of the merged
    latency histograms; the median of per-iteration figures only when none is stored."""
    hists = [h for h in (i.latency_histogram() for i in its) if h]
    if hists:
        p50, p99 = Histogram.merge_all(hists).quantiles([0.5, 0.99])
        return {"p50_us": p50, "p99_us": p99}
    return {
        "p50_us": sorted(i.latency_p50_us or 0 for i in its)[len(its) // 2],
        "p99_us": sorted(i.latency_p99_us or 0 for i in its)[len(its) // 2],
    }


def summary_rows(study: Study) -> dict[str, list[dict[str, Any]]]:
    """Per workload (and load point), one row per ok cell ranked by median rps.

    Each row after the first carries ``vs_above`` (the row above's rps / this one, with its
    CI: its interleaved group's, or over replicates between cells measured on their own; none
    between rows of different groups, :func:`~pywebbench.analysis.ties.ranked_gaps`) and
    ``tied`` when that CI contains 1 (docs/report.md).
    """
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    speed = study_scaling(study)  # req/s at one core speed
    for cell in study.cells:
        if cell.id is None:
            continue
        its = [i for i in study.iterations_of(cell.id) if not i.interrupted]
        measured = [i for i in its if i.kind == "measured"]
        if cell.status != "ok" or not measured:
            continue
        stack = study.stack(cell.stack_id)
        by_rep: dict[int, list[float]] = defaultdict(list)
        for i, rps in zip(measured, speed.rps(measured), strict=True):
            by_rep[i.replicate].append(rps)
        peak = max((i.rss_peak_bytes or 0) for i in its)
        rob = CellRobustness.from_flag(cell.flags.get("robustness"))  # docs/faults.md
        flags = flag_notes(cell.flags)
        if cell.flags.get("errors"):
            flags.append("errors")
        if rob is not None and rob.malformed_accepted:
            flags.append("accepted malformed: " + ", ".join(rob.malformed_accepted))
        out[f"{cell.workload} @ {cell.load_point}"].append(
            {
                "stack": stack.key,
                "key": f"{stack.key}@{cell.load_point}",
                "workload": cell.workload,
                "rps": _figure(cell.flags, [by_rep[k] for k in sorted(by_rep)]),
                "flags_raw": cell.flags,
                "replicates": [by_rep[k] for k in sorted(by_rep)],
                **_latency_us(measured),
                "peak_rss": peak,
                "errors": sum(i.errors + i.non_2xx for i in measured),
                "flags": flags,
                "robustness": rob.score if rob is not None else None,
            }
        )
    for rows in out.values():
        rows.sort(key=lambda r: -r["rps"].median)
        above = ranked_gaps(  # an interval only within a group, or between lone cells
            [r["rps"].median for r in rows],
            [r["replicates"] for r in rows],
            [r["flags_raw"] for r in rows],
            [r["key"] for r in rows],
            [r["stack"] for r in rows],
            workload=rows[0]["workload"],
        )
        for r, vs in zip(rows, above, strict=True):
            r["vs_above"] = vs
            r["tied"] = vs is not None and vs.tie
    return dict(out)


def _figure(flags: Mapping[str, Any], replicates: list[list[float]]) -> Summary:
    """A cell's req/s with its CI: its interleaved group's fit (req/s at the group's
    average round, the interval over server processes), else over its replicates."""
    grouped = group_estimate(flags)
    if grouped is None:
        return summarize_replicates(replicates)
    rps, low, high, n = grouped
    return Summary(n, rps, low, high, rps, math.nan, math.nan, low, high)


def summary_tables(study: Study) -> list[Table]:
    """Rich tables: per workload, stacks ranked by throughput, then failures."""
    tables = []
    speed = speed_note(study_scaling(study), study.iterations)  # how req/s were judged
    for workload, rows in summary_rows(study).items():
        # An interleaved group's req/s is its fit's level, not a median (docs/steady-state.md).
        how = "group fit" if any(group_estimate(r["flags_raw"]) for r in rows) else "median"
        t = Table(title=f"{workload}: ranked by requests/s ({how}, 95% CI)", title_justify="left")
        for col, just in [
            ("#", "right"),
            ("stack", "left"),
            ("req/s", "right"),
            ("95% CI", "right"),
            ("gap above", "right"),
            ("p50", "right"),
            ("p99", "right"),
            ("peak RSS MiB", "right"),
            ("errors", "right"),
            ("flags", "left"),
        ]:
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        robust = any(r["robustness"] is not None for r in rows)
        if robust:  # the robustness score (0-100) of `run --faults`, before the flags
            t.add_column("robust", justify="right")
            t.columns.insert(-1, t.columns.pop())
        for n, r in enumerate(rows, 1):
            s = r["rps"]
            score = r["robustness"]
            vs = r["vs_above"]
            t.add_row(
                fmt.rank(n, r["tied"]),
                r["stack"],
                fmt.rate(s.median),
                fmt.rate_interval(s.ci_low, s.ci_high, s.median, s.n),
                fmt.estimate(vs, vs.why) if vs else fmt.MISSING,
                fmt.latency_us(r["p50_us"]),
                fmt.latency_us(r["p99_us"]),
                fmt.mib(r["peak_rss"] / 2**20) if r["peak_rss"] else fmt.MISSING,
                fmt.count(r["errors"]),
                *([fmt.whole(score)] if robust else []),
                ", ".join(r["flags"]),
            )
        notes = legend([f for r in rows for f in r["flags"]])
        ties = any(r["tied"] for r in rows)
        grouped: dict[tuple[str, str], dict[str, Any]] = {}
        counts: dict[tuple[str, str], set[int]] = {}  # each group's processes a stack
        for r in rows:
            g = r["flags_raw"].get("group")
            if isinstance(g, dict):
                key = (str(g.get("group")), str(g.get("span")))
                grouped.setdefault(key, g)
                if isinstance(g.get("processes"), int):
                    counts.setdefault(key, set()).add(g["processes"])
        if grouped:  # interleaved groups: say what their req/s are
            spans = []
            for key, g in grouped.items():
                start, end = (str(t)[11:16] for t in g.get("span", ["", ""]))
                k = sorted(counts.get(key) or {0})
                each = str(k[0]) if len(k) == 1 else f"{k[0]}-{k[-1]}"
                spans.append(
                    f"{g.get('group')}: {g.get('stacks')} stacks x {each} server "
                    f"processes, {g.get('rounds')} rounds, {start}-{end} UTC"
                )
            head = (
                "interleaved (req/s at each group's average round; CIs and ties over the "
                "server processes): " + "; ".join(spans)
            )
        else:
            head = speed
        caption = [head, *(f"{k}: {v}" for k, v in notes)]
        if ties:
            caption.insert(1, "=N: tied with the row above (the 95% CI of 'gap above' contains 1)")
        if len(grouped) > 1 or (grouped and any(not group_id(r["flags_raw"]) for r in rows)):
            caption.insert(
                1,
                "different groups: rows of different groups were measured minutes apart, not in "
                "the same rounds; no tie or gap interval is given between them",
            )
        t.caption = "\n".join(caption) or None
        t.caption_justify = "left"
        tables.append(t)
    tables += endpoint_tables(study)
    counted = instructions_table(study)
    if counted is not None:
        tables.append(counted)
    failed = [c for c in study.cells if c.status == "failed"]
    if failed:
        t = Table(title="failed cells", title_justify="left")
        t.add_column("stack")
        t.add_column("workload")
        t.add_column("phase")
        t.add_column("reason")
        for c in failed:
            t.add_row(
                study.stack(c.stack_id).key,
                f"{c.workload} @ {c.load_point}",
                c.failure_phase or "",
                c.failure_reason or "",
            )
        tables.append(t)
    return tables


def endpoint_tables(study: Study) -> list[Table]:
    """Cells loaded with a traffic mix (docs/mix.md): per workload and load point, each
    stack's endpoints with their share of the requests sent, p50, p99 (from the endpoint's
    merged histogram) and errors, as the report's *Endpoints of the mix* has them (its
    :func:`~pywebbench.report.endpoints.mix_points`); none without a mix."""
    from pywebbench.report.endpoints import mix_points

    by_point: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for point in mix_points(study):
        by_point[(point.workload, point.load_point)].append(point)
    tables = []
    for (workload, load_point), points in by_point.items():
        t = Table(
            title=f"{workload} @ {load_point}: endpoints of the mix (measured iterations)",
            title_justify="left",
        )
        for col in ("stack", "endpoint", "share", "p50", "p99", "errors"):
            t.add_column(col, justify="left" if col in ("stack", "endpoint") else "right")
        for n, point in enumerate(points):
            for i, e in enumerate(point.endpoints):
                t.add_row(
                    point.stack_key if i == 0 else "",
                    e.name,
                    fmt.percent(e.share_sent),
                    fmt.latency_us(e.p50_us),
                    fmt.latency_us(e.p99_us),
                    fmt.count(e.errors),
                    end_section=i == len(point.endpoints) - 1 and n < len(points) - 1,
                )
        t.caption = (
            "share: of the requests sent (the report adds each endpoint's weight, req/s and p99.9)"
        )
        t.caption_justify = "left"
        tables.append(t)
    return tables


def instructions_table(study: Study) -> Table | None:
    """``--instructions``: each counted cell's instructions per request (median over its
    counts, and their spread), or None when nothing was counted."""
    docs: dict[int | None, list[dict[str, Any]]] = {}
    for rep in study.replicates:
        if rep.instructions_json:
            docs.setdefault(rep.cell_id, []).append(rep.instructions)
    if not docs:
        return None
    t = Table(
        title="instructions per request (valgrind, a separate server; not timed)",
        title_justify="left",
    )
    for col in ("stack", "workload", "instructions/request", "max/min", "counts"):
        t.add_column(col, justify="left" if col in ("stack", "workload") else "right")
    for cell in study.cells:
        found = docs.get(cell.id)
        if not found:
            continue
        counts = [float(d["per_request"]) for d in found if "error" not in d]
        errors = "; ".join(str(d["error"]) for d in found if "error" in d)
        largest_over_smallest = spread(counts)
        t.add_row(
            study.stack(cell.stack_id).key,
            f"{cell.workload} @ {cell.load_point}",
            fmt.count(statistics.median(counts)) if counts else errors,
            f"{largest_over_smallest:.5f}" if largest_over_smallest is not None else fmt.MISSING,
            str(len(counts)),
        )
    return t
