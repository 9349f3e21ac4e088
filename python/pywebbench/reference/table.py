"""The published reference table: the records in ``reference/runs/`` pooled cell by cell
(:mod:`pywebbench.analysis.pooling`), rendered as docs/reference-table.md.

The page is generated, never edited: ``python -m pywebbench.reference.table`` writes it from
the records, ``--check`` says whether it is what they give (the suite checks that too). It
says which machines the runs came from, how many runs and how many hours apart, and whether
issue 65's bar is met (at least :data:`MIN_RUNS` runs, from :data:`MIN_MACHINES` machines,
:data:`MIN_HOURS` hours apart, in every cell); when it is not, the page opens by saying the
table is provisional.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pywebbench
from pywebbench import formatting as fmt
from pywebbench.analysis.pooling import Coverage, Pooled, leave_one_out, most_runs, pool
from pywebbench.files import write_atomic
from pywebbench.reference.record import Record, RecordError, read_folder

#: The repository's checkout (the package runs from it: ``pip install -e``).
ROOT = Path(pywebbench.__file__).resolve().parents[2]
#: Where the records are kept, and the page they make.
RECORDS = ROOT / "reference" / "runs"
PAGE = ROOT / "docs" / "reference-table.md"
#: Issue 65's bar for a table that is not provisional.
MIN_RUNS = 6
MIN_MACHINES = 2
MIN_HOURS = 8.0


@dataclass
class Table:
    """The records pooled: the rows (one per stack, workload and load point), and what the
    page says about the runs behind them."""

    records: list[Record]
    rows: list[Pooled] = field(default_factory=list)
    #: Run figures to another reference than their row's (pool apart, not shown).
    set_apart: int = 0
    coverage: Coverage | None = None
    #: Stack key -> its interpreter, as the records name it.
    interpreters: dict[str, str] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        return len(self.records)

    @property
    def machines(self) -> int:
        return len({r.machine for r in self.records})

    @property
    def hours_apart(self) -> float | None:
        """Hours between the first run's start and the last's; None below 2 runs or with an
        unreadable time."""
        if len(self.records) < 2:
            return None
        try:
            starts = [datetime.fromisoformat(r.created_at) for r in self.records]
        except ValueError:
            return None
        return (max(starts) - min(starts)).total_seconds() / 3600

    def shortfalls(self) -> list[str]:
        """What the table lacks against the bar, in words; empty when it is met."""
        out = []
        if self.runs < MIN_RUNS:
            out.append(f"{self.runs} run(s), {MIN_RUNS} needed")
        if self.machines < MIN_MACHINES:
            out.append(f"{self.machines} machine(s), {MIN_MACHINES} needed")
        hours = self.hours_apart
        if hours is None or hours < MIN_HOURS:
            apart = f"{hours:.1f} hours apart" if hours is not None else "no span of hours"
            out.append(f"{apart}, {MIN_HOURS:g} needed")
        thin = [p for p in self.rows if p.runs < MIN_RUNS or len(_machines(self, p)) < 2]
        if self.rows and thin and not out:
            out.append(
                f"{len(thin)} of {len(self.rows)} cells pooled from fewer than {MIN_RUNS} "
                f"runs or from one machine"
            )
        return out

    @property
    def provisional(self) -> bool:
        return bool(self.shortfalls())


def _machines(table: Table, p: Pooled) -> set[str]:
    by_run = {r.run_id: r.machine for r in table.records}
    return {by_run.get(run, run) for run in p.run_ids}


def build(records: Sequence[Record]) -> Table:
    """The table the ``records`` make."""
    table = Table(list(records))
    estimates = [e for r in records for e in r.estimates()]
    for r in records:
        for group in r.doc["groups"]:
            for stack in group["cells"]:
                table.interpreters.setdefault(stack, str(group.get("interpreter") or ""))
    chosen, table.set_apart = most_runs(pool(estimates))
    table.rows = sorted(
        chosen,
        key=lambda p: (
            p.key.workload,
            p.key.load_point,
            table.interpreters.get(p.key.stack, ""),
            -p.ratio,
        ),
    )
    table.coverage = leave_one_out(estimates)
    return table


def _when(iso: str) -> str:
    return iso[:16].replace("T", " ")


def _pypy_nursery(record: Record) -> str:
    gc = record.doc["host"].get("pypy_gc")
    if not isinstance(gc, dict) or not gc:
        return fmt.MISSING
    sizes = [v.get("nursery_bytes") for v in gc.values() if isinstance(v, dict)]
    return ", ".join(fmt.size(s) for s in sizes if isinstance(s, int | float)) or fmt.MISSING


def _caches(record: Record) -> str:
    """The cache sizes the CPU reports (``run.host.reported_caches``: a list of bytes)."""
    caches = record.doc["host"].get("cpu_cache_bytes")
    if isinstance(caches, list):
        return ", ".join(fmt.size(c) for c in caches if isinstance(c, int)) or fmt.MISSING
    return fmt.MISSING


def _commit(record: Record) -> str:
    commit = record.doc["run"].get("commit")
    if not isinstance(commit, dict) or not commit.get("revision"):
        return fmt.MISSING
    return str(commit["revision"])[:10] + (" (changed)" if commit.get("dirty") else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _half_widths(table: Table, pypy: bool) -> list[float]:
    out = []
    for p in table.rows:
        if p.pred_low is None or p.pred_high is None:
            continue
        if table.interpreters.get(p.key.stack, "").startswith("pypy") == pypy:
            out.append((p.pred_high - p.pred_low) / 2 / p.ratio)
    return out


def _rps_moves(table: Table) -> list[float]:
    """Per (run-matched) cell, how far its req/s ranged between runs (max / min - 1)."""
    seen: dict[tuple[str, str, str], list[float]] = {}
    for r in table.records:
        for group in r.doc["groups"]:
            for stack, cell in group["cells"].items():
                rps = cell.get("rps")
                if isinstance(rps, int | float) and rps > 0:
                    where = (group["workload"], group["load_point"], stack)
                    seen.setdefault(where, []).append(float(rps))
    return [max(v) / min(v) - 1.0 for v in seen.values() if len(v) > 1]


INTRO = (
    "The quick study's ratios pooled over the runs kept in "
    "[reference/runs/](../reference/runs/), one record a run, from every machine the "
    "project has run on: each stack's ratio to its group's reference, a random-effects "
    "estimate with its interval, tau (how far a run's ratio moves from run to run) and the "
    "95% prediction interval for one more run ([pooling.md](pooling.md)). `./pwb run` ends "
    "by holding its own ratios against these prediction intervals. This page is generated "
    "from the records by `python -m pywebbench.reference.table`; do not edit it."
)
ADD = (
    "To add a run: `./pwb run`, then `pywebbench export RUN --format reference -o "
    "reference/runs` and `python -m pywebbench.reference.table`, and commit the record and "
    "this page."
)


def render(table: Table) -> str:
    """The page (Markdown) the table makes."""
    out = ["# Reference table: the quick study across runs and machines", ""]
    if not table.records:
        out += [
            "**No runs recorded yet**: reference/runs/ holds no record, so there is no "
            "published table yet, and `./pwb run` has nothing to compare its ratios with.",
            "",
            INTRO,
            "",
            ADD,
            "",
        ]
        return "\n".join(out)
    hours = table.hours_apart
    span = f", the first and last {hours:.1f} hours apart" if hours is not None else ""
    facts = f"{table.runs} run(s) from {table.machines} machine(s){span}"
    short = table.shortfalls()
    if short:
        out.append(
            f"**Provisional**: {facts}; issue 65's bar is at least {MIN_RUNS} runs from at "
            f"least {MIN_MACHINES} machines, {MIN_HOURS:g} hours apart, in every cell, and "
            f"this table has {'; '.join(short)}. Its prediction intervals are not yet a "
            "figure that travels."
        )
    else:
        out.append(
            f"**Bar met**: {facts}; every cell pooled from at least {MIN_RUNS} runs and "
            f"{MIN_MACHINES} machines."
        )
    out += ["", INTRO, "", ADD, "", "## Runs pooled", ""]
    out.append(
        "Machines are told apart by a hash of their hostname; the caches are those the CPU "
        "reports (PyPy sizes its nursery from them)."
    )
    out.append("")
    out.append("| run | machine | CPU | cores | caches | kernel | PyPy nursery | "
               "started (UTC; [log](measurements.md)) | profile | pywebbench commit |")  # fmt: skip
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in table.records:
        host = r.doc["host"]
        cells = [
            r.run_id,
            r.machine or fmt.MISSING,
            str(host.get("cpu_model") or fmt.MISSING),
            str(host.get("cpu_count") or fmt.MISSING),
            _caches(r),
            str(host.get("kernel") or fmt.MISSING),
            _pypy_nursery(r),
            _when(r.created_at),
            str(r.doc["run"].get("profile") or fmt.MISSING),
            _commit(r),
        ]
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    out += ["", "## The table", ""]
    out.append(
        "One row per stack at each workload and load point, over the runs that measured it; "
        "`runs` says how many (of all the records) and from how many machines."
        + (
            f" {table.set_apart} run figures are to another reference (a run that lacks a "
            "stack has its geometric mean over other stacks) and pool apart: not shown."
            if table.set_apart
            else ""
        )
    )
    out.append("")
    out.append("| workload | load | stack | over | pooled ratio [95% CI, HKSJ] | tau | "
               "next run, 95% PI | runs | machines |")  # fmt: skip
    out.append("|---|---|---|---|---|---|---|---|---|")
    for p in table.rows:
        over = f"geometric mean of {len(p.key.basis)}" if p.key.basis else p.key.versus
        pred = (
            fmt.ratio_interval(p.pred_low, p.pred_high)
            if p.pred_low is not None
            else "n/a: 3 runs needed"
        )
        cells = [
            p.key.workload,
            p.key.load_point,
            p.key.stack,
            over,
            fmt.ratio_ci(p.ratio, p.low, p.high, "1 run"),
            fmt.percent(p.tau_pct),
            pred,
            f"{p.runs} of {table.runs}",
            str(len(_machines(table, p))),
        ]
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    out.append("")
    out += _summary(table)
    return "\n".join(out)


def _summary(table: Table) -> list[str]:
    out = []
    halves = []
    for name, pypy in (("CPython", False), ("PyPy", True)):
        got = _half_widths(table, pypy)
        if got:
            halves.append(
                f"{fmt.half_width(statistics.median(got))} over the {len(got)} {name} cells"
            )
    if halves:
        moves = _rps_moves(table)
        moved = ""
        if moves:
            moved = (
                "; the runs' req/s of a cell ranged by a median of "
                f"{fmt.percent(statistics.median(moves))} (highest over lowest run)"
            )
        out += [
            "Median half-width of the prediction intervals: " + ", ".join(halves) + moved + ".",
            "",
        ]
    check = table.coverage
    if check is not None and check.checked:
        out += [
            f"Leave one run out: {check.inside} of {check.checked} run ratios "
            f"({fmt.percent(check.share)}) fall inside the prediction interval pooled from the "
            "other runs of their cell (cells of at least 4 runs).",
            "",
        ]
    return out


def generate(folder: Path = RECORDS) -> str:
    """The page the records in ``folder`` make; RecordError for a bad record."""
    return render(build(read_folder(folder)))


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m pywebbench.reference.table [--records DIR] [-o PAGE] [--check]``: write
    the page (or, with ``--check``, exit 1 when the page is not what the records give); a
    bad record: one line, exit 2."""
    parser = argparse.ArgumentParser(
        prog="python -m pywebbench.reference.table",
        description="Regenerate docs/reference-table.md from the records in reference/runs.",
    )
    parser.add_argument("--records", type=Path, default=RECORDS, help="the records' folder")
    parser.add_argument("-o", "--output", type=Path, default=PAGE, help="the page to write")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the page is stale"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        table = build(read_folder(args.records))
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = render(table)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is not what {args.records} gives: regenerate it with "
                  "python -m pywebbench.reference.table", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    try:
        write_atomic(args.output, text)
    except OSError as exc:
        print(f"error: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.output} ({table.runs} run(s))", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
