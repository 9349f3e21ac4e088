"""The published reference table: the records in ``reference/runs/`` pooled cell by cell
(:mod:`pywebbench.analysis.pooling`), rendered as docs/reference-table.md.

The page is generated, never edited: ``python -m pywebbench.reference.table`` writes it from
the records, with the README's headline table (between :data:`BEGIN` and :data:`END`),
``--check`` says whether both are what they give (the suite checks that too). It says which
machines the runs came from, how many runs and how many hours apart, and whether issue 65's
bar is met (at least :data:`MIN_RUNS` runs, from :data:`MIN_MACHINES` machines,
:data:`MIN_HOURS` hours apart, in every cell). Runs from one machine that meet the rest of
the bar are published as such (issue 65: "if all the work happens on one machine, pool runs
at least 8 hours apart, say so"); short of that, the page opens by saying the table is
provisional.
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
#: The README, whose headline table the records make too, between these two lines.
README = ROOT / "README.md"
BEGIN = "<!-- reference table: python -m pywebbench.reference.table writes it; do not edit -->"
END = "<!-- end of the reference table -->"
#: Issue 65's bar for a table that is not provisional.
MIN_RUNS = 6
MIN_MACHINES = 2
MIN_HOURS = 8.0
#: A cell measured in fewer than this share of the runs is shown but not held to the bar:
#: a stack the study seldom measures there (granian's PyPy hello stacks, stopped at their
#: memory budget in every run on the developers' VM, once kept by one process of three).
SELDOM = 0.5


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

    def shortfalls(self, machines: int = MIN_MACHINES) -> list[str]:
        """What the table lacks against the bar (with ``machines`` machines at least), in
        words; empty when it is met."""
        out = []
        if self.runs < MIN_RUNS:
            out.append(f"{self.runs} run(s), {MIN_RUNS} needed")
        if self.machines < machines:
            out.append(f"{self.machines} machine(s), {machines} needed")
        hours = self.hours_apart
        if hours is None or hours < MIN_HOURS:
            apart = f"{hours:.1f} hours apart" if hours is not None else "no span of hours"
            out.append(f"{apart}, {MIN_HOURS:g} needed")
        thin = self.thin(machines)
        if self.rows and thin and not out:
            several = " or from one machine" if machines > 1 else ""
            out.append(
                f"{len(thin)} of {len(self.rows)} cells pooled from fewer than {MIN_RUNS} "
                f"runs{several}"
            )
        return out

    def thin(self, machines: int = MIN_MACHINES) -> list[Pooled]:
        """The cells held to the bar (not :attr:`seldom`) pooled from fewer than
        :data:`MIN_RUNS` runs or from fewer than ``machines`` machines."""
        held = [p for p in self.rows if p not in self.seldom]
        return [p for p in held if p.runs < MIN_RUNS or len(_machines(self, p)) < machines]

    @property
    def seldom(self) -> list[Pooled]:
        """The cells measured in fewer than :data:`SELDOM` of the runs."""
        return [p for p in self.rows if p.runs < SELDOM * self.runs]

    @property
    def provisional(self) -> bool:
        """Short of the bar, even from one machine (:attr:`one_machine`)."""
        return bool(self.shortfalls(machines=1))

    @property
    def one_machine(self) -> bool:
        """The bar met but for the second machine: published, saying so."""
        return not self.provisional and bool(self.shortfalls())


def _place(p: Pooled) -> str:
    """A cell as the page names it: ``stack @ workload load point``."""
    return f"{p.key.stack} @ {p.key.workload} {p.key.load_point}"


def _machines_of(table: Table, p: Pooled) -> str:
    """The CPUs of the machines ``p`` was pooled from, as the page names them."""
    by_run = {r.run_id: str(r.doc["host"].get("cpu_model") or r.machine) for r in table.records}
    return ", ".join(sorted({by_run.get(run, run) for run in p.run_ids}))


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
    if table.provisional:
        out.append(
            f"**Provisional**: {facts}; issue 65's bar is at least {MIN_RUNS} runs from at "
            f"least {MIN_MACHINES} machines, {MIN_HOURS:g} hours apart, in every cell, and "
            f"this table has {'; '.join(short)}. Its prediction intervals are not yet a "
            "figure that travels."
        )
    elif table.one_machine and table.machines >= MIN_MACHINES:
        names = ", ".join(f"{_place(p)} ({_machines_of(table, p)})" for p in table.thin())
        out.append(
            f"**Published, some cells from one machine**: {facts}. Issue 65's bar asks for "
            f"every cell from {MIN_MACHINES} machines; these have one: {names}. Their "
            "prediction intervals say where a run on that machine lands hours later; the "
            "others', where a run lands on any of these machines."
        )
    elif table.one_machine:
        out.append(
            f"**Published from one machine**: {facts}. Issue 65's bar asks for "
            f"{MIN_MACHINES} machines; all the work so far ran on one, so its runs are at "
            f"least {MIN_HOURS:g} hours apart instead, and the next machine's runs join them "
            "when the project lands there. Its prediction intervals say where a run on this "
            "machine lands hours later, not yet on another machine."
        )
    else:
        out.append(
            f"**Bar met**: {facts}; every cell pooled from at least {MIN_RUNS} runs and "
            f"{MIN_MACHINES} machines."
        )
    if table.seldom:
        names = ", ".join(_place(p) for p in table.seldom)
        out[-1] += (
            f" Measured in fewer than half the runs, and so shown but not held to the bar: {names}."
        )
    out += ["", INTRO, "", ADD, "", "## Runs pooled", ""]
    out.append(
        "Machines are told apart by a hash of their hostname, CPU model and caches (VMs "
        "share hostnames); the caches are those the CPU reports (PyPy sizes its nursery "
        "from them)."
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


def _stack_name(key: str) -> str:
    """``cpython3.11/granian-wsgi/raw-wsgi@w1t4`` as the README writes stacks."""
    return key.split("@")[0].replace("/", " · ")


def readme_block(table: Table) -> str:
    """The README's headline table, with its markers: each stack's pooled ratio at each
    workload and load point, and the prediction interval for one more run."""
    out = [BEGIN]
    if not table.rows:
        out += ["", "No runs are recorded yet ([reference table](docs/reference-table.md)).", ""]
        return "\n".join([*out, END])
    points = sorted({(p.key.workload, p.key.load_point) for p in table.rows})
    by: dict[tuple[str, tuple[str, str]], Pooled] = {
        (p.key.stack, (p.key.workload, p.key.load_point)): p for p in table.rows
    }
    stacks = sorted(
        {p.key.stack for p in table.rows},
        key=lambda k: (
            table.interpreters.get(k, ""),
            -next((by[k, pt].ratio for pt in points if (k, pt) in by), 0.0),
        ),
    )
    hours = table.hours_apart
    span = f", {hours:.0f} hours apart" if hours is not None else ""
    machines = f"{table.machines} machine" + ("s" if table.machines != 1 else "")
    status = "provisional, " if table.provisional else ""
    check = table.coverage
    held = (
        f" Leaving one run out, {fmt.percent(check.share)} of the runs' ratios fell inside "
        "the others' prediction intervals."
        if check is not None and check.checked
        else ""
    )
    out += [
        "",
        f"The quick study pooled over {table.runs} runs ({status}{machines}{span}): each "
        "stack's req/s over the geometric mean of its interpreter's stacks in the same "
        f"rounds, and where one more run's ratio lands (95% prediction interval).{held} "
        "[Every cell, tau and the runs](docs/reference-table.md).",
        "",
        "| stack | " + " | ".join(f"{w} @ {lp}" for w, lp in points) + " |",
        "|---|" + "---:|" * len(points),
    ]
    for k in stacks:
        cells = []
        for pt in points:
            p = by.get((k, pt))
            if p is None:
                cells.append("not measured")
            elif p.pred_low is None or p.pred_high is None:
                runs = "once" if p.runs == 1 else f"{p.runs} runs"
                cells.append(f"{p.ratio:.2f}{fmt.TIMES} ({runs}: no interval)")
            else:
                cells.append(f"{p.ratio:.2f}{fmt.TIMES} ({p.pred_low:.2f}-{p.pred_high:.2f})")
        out.append(f"| {_stack_name(k)} | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join([*out, END])


def with_readme_block(readme: str, block: str) -> str:
    """``readme`` with its headline table replaced by ``block``; ValueError when it has no
    :data:`BEGIN` ... :data:`END` lines."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no lines {BEGIN!r} ... {END!r} to write the table between")
    return readme[:start] + block + readme[end + len(END) :]


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
        "--readme", type=Path, default=README,
        help="the README whose headline table to write (between its two marker lines)",
    )  # fmt: skip
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the page is stale"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        table = build(read_folder(args.records))
        readme = args.readme.read_text(encoding="utf-8")
        new_readme = with_readme_block(readme, readme_block(table))
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"error: {args.readme}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 2
    text = render(table)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        pairs = ((args.output, current, text), (args.readme, readme, new_readme))
        stale = [str(f) for f, now, want in pairs if now != want]
        if stale:
            print(f"{' and '.join(stale)}: not what {args.records} gives: regenerate with "
                  "python -m pywebbench.reference.table", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    try:
        write_atomic(args.output, text)
        write_atomic(args.readme, new_readme)
    except OSError as exc:
        print(f"error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.output} and {args.readme}'s table ({table.runs} run(s))", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
