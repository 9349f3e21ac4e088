"""The pooled section of a report: the runs of one study pooled cell by cell
(:mod:`pywebbench.analysis.pooling`, docs/pooling.md).

Given several runs, every cell of an interleaved group that more than one run measured
(matched by stack, workload and load point) gets its ratio to the group's reference pooled
over those runs, with the HKSJ interval, tau (the spread from run to run) and the 95%
prediction interval for one more run; the ranked gap to the next stack down is pooled the
same way. The section says which hosts the runs came from and over how many hours, and how
many runs' ratios fell inside the prediction interval pooled from the others. With one run
it is one line: that run's intervals are within-run only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from pywebbench import formatting as fmt
from pywebbench.analysis.pooling import CellKey, Pooled, leave_one_out, most_runs, pool
from pywebbench.reference.estimates import run_host, study_estimates
from pywebbench.store.model import Run, Study

WITHIN_ONLY = (
    "One run: its intervals are within-run only. They say how sure this run is, not where "
    "tomorrow's run or another machine's will land; pool several runs (run --runs N, "
    "docs/pooling.md) for that."
)
NOTE = (
    "Each ratio pooled over the runs that measured its cell (random effects: tau by "
    "Paule-Mandel, the interval Hartung-Knapp-Sidik-Jonkman's); tau is how far a run's ratio "
    "moves from run to run; the prediction interval is where one more run's ratio should "
    "fall (95%, from 3 runs). docs/pooling.md."
)


@dataclass(frozen=True)
class PooledRow:
    """One pooled cell as the report shows it (text, formatted)."""

    workload: str
    load_point: str
    stack: str
    versus: str
    ratio: str  # "1.204× [1.182, 1.226]"
    tau: str  # "2.1%"
    prediction: str  # "[1.150, 1.260]"
    runs: str  # "6" or "5 of 6"
    hosts: str  # "2"
    next_gap: str  # the pooled ratio to the next stack down, "1.031× [0.990, 1.074]"


@dataclass
class PooledView:
    """The section: a note, the hosts and runs pooled, the table, the leave-one-out check."""

    runs: int
    lines: list[str] = field(default_factory=list)  # what precedes the table
    rows: list[PooledRow] = field(default_factory=list)
    coverage: str = ""  # the leave-one-out line ("" when no cell has 4 runs)
    #: The latest run against the published table (:func:`published_lines`).
    published: list[str] = field(default_factory=list)


def _hours(runs: list[Run]) -> float | None:
    try:
        starts = [datetime.fromisoformat(r.created_at) for r in runs]
        ends = [datetime.fromisoformat(r.finished_at or r.created_at) for r in runs]
    except ValueError:
        return None
    return (max(ends) - min(starts)).total_seconds() / 3600


def _interval(low: float | None, high: float | None, why: str) -> str:
    return fmt.ratio_interval(low, high, why) if low is not None else f"[n/a: {why}]"


def _row(p: Pooled, runs: int, label: Callable[[str], str], gap: Pooled | None) -> PooledRow:
    versus = f"geometric mean of {len(p.key.basis)}" if p.key.basis else label(p.key.versus)
    return PooledRow(
        workload=p.key.workload,
        load_point=p.key.load_point,
        stack=label(p.key.stack),
        versus=versus,
        ratio=fmt.ratio_ci(p.ratio, p.low, p.high, "1 run"),
        tau=fmt.percent(p.tau_pct),
        prediction=_interval(p.pred_low, p.pred_high, "3 runs needed"),
        runs=str(p.runs) if p.runs == runs else f"{p.runs} of {runs}",
        hosts=str(len(p.hosts)),
        next_gap=(
            f"{fmt.ratio_ci(gap.ratio, gap.low, gap.high, '1 run')} {label(gap.key.versus)}"
            if gap is not None
            else fmt.MISSING
        ),
    )


def pooled_view(study: Study, label: Callable[[str], str] = str) -> PooledView | None:
    """The section for ``study`` (``label``: a stack key as people read it); None without a
    run."""
    runs = sorted(study.runs, key=lambda r: (r.created_at, r.id))
    if not runs:
        return None
    view = PooledView(runs=len(runs))
    if len(runs) == 1:
        view.lines.append(WITHIN_ONLY)
        return view
    found = study_estimates(study)
    reference, pairs, plain = found.reference, found.pairs, found.plain
    chosen, apart = most_runs(pool(reference))
    gaps = {(p.key.workload, p.key.load_point, p.key.stack, p.key.versus): p for p in pool(pairs)}
    shown = [p for p in chosen if p.runs > 1]
    if not shown:
        view.lines.append(
            "No cell was measured by more than one of these runs: every interval is within-run "
            "only (docs/pooling.md)."
        )
        return view
    by_host: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        by_host[run_host(r)].append(r.id)
    hours = _hours(runs)
    span = f" over {hours:.1f} hours" if hours is not None else ""
    hosts = "; ".join(f"{h} (runs {', '.join(ids)})" for h, ids in by_host.items())
    view.lines.append(f"{len(runs)} runs from {len(by_host)} host(s){span}: {hosts}.")
    view.lines.append(NOTE)
    if plain:
        view.lines.append(
            f"{plain} cells measured one after another (design = sequential) have no group "
            "ratios and are not pooled."
        )
    if apart:
        view.lines.append(
            f"{apart} run figures are to another reference (a named stack, or a geometric "
            "mean over other stacks, as when a run lacks a stack) and pool apart: not shown."
        )
    shown.sort(key=lambda p: (p.key.workload, p.key.load_point, -p.ratio))
    for i, p in enumerate(shown):
        below = shown[i + 1] if i + 1 < len(shown) else None
        gap = None
        if below is not None and _point(below.key) == _point(p.key):
            gap = gaps.get((*_point(p.key), p.key.stack, below.key.stack))
        view.rows.append(_row(p, len(runs), label, gap))
    check = leave_one_out(reference)
    if check.checked:
        share = check.share or 0.0
        worst = sorted(check.misses, key=lambda m: -abs(m.off))[:5]
        missed = "; ".join(
            f"{_miss_label(m.key, label)} run {m.run} {fmt.change(m.off)}" for m in worst
        )
        view.coverage = (
            f"Leave one run out: {check.inside} of {check.checked} run ratios "
            f"({fmt.percent(share)}) fall inside the prediction interval pooled from the other "
            "runs" + (f"; the farthest outside: {missed}." if missed else ".")
        )
    return view


def published_lines(study: Study, label: Callable[[str], str] = str) -> list[str]:
    """The latest run of ``study`` against the published table's prediction intervals
    (docs/reference-table.md), as ``pywebbench run`` ends by saying it, one paragraph a
    line; with several runs, the first names the run."""
    from pywebbench.reference.check import latest_run_lines

    said = [line.strip() for line in latest_run_lines(study, label)]
    if len(study.runs) > 1 and said:
        latest = max(study.runs, key=lambda r: (r.created_at, r.id))
        said[0] = f"Run {latest.id}: {said[0][0].lower()}{said[0][1:]}"
    return said


def _point(key: CellKey) -> tuple[str, str]:
    return key.workload, key.load_point


def _miss_label(key: CellKey, label: Callable[[str], str]) -> str:
    return f"{label(key.stack)} @ {key.workload} {key.load_point}"


COLUMNS = [
    ("workload", "workload"),
    ("load_point", "load"),
    ("stack", "stack"),
    ("versus", "over"),
    ("ratio", "pooled ratio [95% CI, HKSJ]"),
    ("tau", "tau"),
    ("prediction", "next run, 95% PI"),
    ("runs", "runs"),
    ("hosts", "hosts"),
    ("next_gap", "over the next stack down"),
]


def markdown_lines(view: PooledView | None, text: Callable[[str], str]) -> list[str]:
    """The Markdown section (``text`` escapes a table cell)."""
    if view is None:
        return []
    out = ["## Across runs", ""]
    for line in view.lines:
        out += [text(line), ""]
    if view.rows:
        out.append("| " + " | ".join(title for _, title in COLUMNS) + " |")
        out.append("|" + "|".join("---" for _ in COLUMNS) + "|")
        for row in view.rows:
            out.append("| " + " | ".join(text(getattr(row, k)) for k, _ in COLUMNS) + " |")
        out.append("")
    if view.coverage:
        out += [text(view.coverage), ""]
    for line in view.published:
        out += [text(line), ""]
    return out
