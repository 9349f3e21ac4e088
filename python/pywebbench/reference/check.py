"""A user's run held against the published table: how many of its ratios fall inside the
table's 95% prediction intervals, which fall outside and by how much (``./pwb run`` ends
with these lines; docs/reference-table.md). The table is pooled from the records in
``reference/runs/`` other than the run's own, as the page shows it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pywebbench import formatting as fmt
from pywebbench.analysis.pooling import CellKey, RunCheck, RunEstimate, check_run, pool, rebased
from pywebbench.reference.estimates import study_estimates
from pywebbench.reference.record import Record, RecordError, read_folder
from pywebbench.reference.table import RECORDS, Table, build
from pywebbench.store.model import Study

#: How many ratios outside their interval the lines name (the farthest first).
SHOWN = 5
PAGE_NAME = "docs/reference-table.md"


def comparable(records: Sequence[Record], run: Sequence[RunEstimate]) -> list[Record]:
    """The records (not of ``run``'s own run) that measured at least one of its cells
    (stack, workload and load point)."""
    places = {_place(e.key) for e in run}
    own = {e.run for e in run}
    return [
        r
        for r in records
        if r.run_id not in own and any(_place(e.key) in places for e in r.estimates())
    ]


def _place(key: CellKey) -> tuple[str, str, str]:
    return key.workload, key.load_point, key.stack


def lines(
    run: Sequence[RunEstimate],
    records: Sequence[Record],
    label: Callable[[str], str] = str,
) -> list[str]:
    """What ``./pwb run`` says at its end about ``run`` (its ratios to the reference)
    against the table of ``records``: a few lines; one when there is no table to compare
    with; none when the run has no group ratios.

    A group of the run that lacks a stack the table's runs had has its geometric mean over
    fewer stacks; the table's runs are re-expressed over the same stacks
    (:func:`~pywebbench.analysis.pooling.rebased`) and pooled, so its ratios are compared
    too (the lines say how many)."""
    if not run:
        return []
    others = comparable(records, run)
    if len(others) < 2:
        return [
            f"No published table yet to compare with: reference/runs holds {len(others)} "
            f"comparable run(s) ({PAGE_NAME})."
        ]
    table = build(others)
    rows = list(table.rows)
    have = {p.key for p in rows}
    bases = {e.key.basis for e in run if e.key.basis and e.key not in have}
    if bases:
        estimates = [e for r in others for e in r.estimates()]
        for basis in sorted(bases):
            rows += [p for p in pool(rebased(estimates, basis)) if p.key not in have]
    check = check_run(rows, run)
    said = describe(check, table, label)
    cpus = {e.host for e in run}
    if not any(r.host in cpus for r in others):
        theirs = ", ".join(sorted({r.host for r in others}))
        said.insert(
            1,
            f"  The table's runs are all from another CPU ({theirs}) than this run's "
            f"({', '.join(sorted(cpus))}): stacks' ratios move between CPU kinds, so a ratio "
            "outside may be the machine's and not this run's.",
        )
    moved = sum(1 for e in run if e.key.basis in bases and any(p.key == e.key for p in rows))
    if moved:
        line = (
            f"  {moved} ratios are to the geometric mean of the stacks this run has (it "
            "lacks some of the table's): held against the table's runs re-expressed over "
            "the same stacks."
        )
        said.insert(len(said) - bool(check.lacking), line)
    return said


def describe(check: RunCheck, table: Table, label: Callable[[str], str] = str) -> list[str]:
    """:func:`lines` of a comparison already made."""
    status = (
        "provisional"
        if table.provisional
        else "some cells from one machine"
        if table.one_machine and table.machines > 1
        else "one machine so far"
        if table.one_machine
        else "bar met"
    )
    head = (
        f"Against the published table ({PAGE_NAME}: {table.runs} runs, "
        f"{table.machines} machine(s), {status}): "
    )
    if check.checked:
        head += (
            f"{check.inside} of {check.checked} ratios fall inside its 95% prediction intervals."
        )
    else:
        head += "none of this run's ratios has a prediction interval there to fall in."
    out = [head]
    if check.misses:
        worst = sorted(check.misses, key=lambda m: -abs(m.off))
        named = "; ".join(
            f"{label(m.key.stack)} @ {m.key.workload} {m.key.load_point} "
            f"{fmt.ratio(m.ratio)} against {fmt.ratio_interval(m.pred_low, m.pred_high)} "
            f"({fmt.change(m.off)})"
            for m in worst[:SHOWN]
        )
        more = f" and {len(worst) - SHOWN} more" if len(worst) > SHOWN else ""
        out.append(f"  outside: {named}{more}.")
    apart = []
    if check.other_reference:
        apart.append(
            f"{check.other_reference} to another reference (this run's group lacks or adds "
            "a stack, so its geometric mean is over other stacks)"
        )
    if check.without_interval:
        apart.append(
            f"{check.without_interval} ratio(s) of cells the table has from fewer than 3 runs"
        )
    if check.not_in_table:
        apart.append(f"{check.not_in_table} ratio(s) of cells the table does not have")
    if apart:
        out.append("  not compared: " + "; ".join(apart) + ".")
    if check.lacking:
        out.append(f"  {len(check.lacking)} of the table's cells are not in this run.")
    return out


def against_published(
    run: Sequence[RunEstimate], folder: Path | None = None, label: Callable[[str], str] = str
) -> list[str]:
    """:func:`lines` against the records in ``folder`` (default: the repository's
    ``reference/runs``); none for a run without group ratios; RecordError for a bad
    record."""
    if not run:
        return []
    return lines(run, read_folder(folder if folder is not None else RECORDS), label)


def latest_run_lines(study: Study, label: Callable[[str], str] = str) -> list[str]:
    """:func:`against_published` of the latest run of ``study`` (``pywebbench run`` ends
    with these lines; the report shows them). A record that cannot be read is said, not
    raised: the run is stored and its report written."""
    runs = sorted(study.runs, key=lambda r: (r.created_at, r.id))
    if not runs:
        return []
    mine = [e for e in study_estimates(study).reference if e.run == runs[-1].id]
    try:
        return against_published(mine, label=label)
    except RecordError as exc:
        return [f"The published table cannot be read: {exc}"]
