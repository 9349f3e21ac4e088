"""Issue 21's acceptance, measured: PyPy figures that do not depend on the workload order,
replicates that agree or are marked, classes that reproduce. Needs a quiet machine.

    python benchmarks/warmup_acceptance.py            # the quick study twice (2 x 10+ min)
    python benchmarks/warmup_acceptance.py --stores A.sqlite B.sqlite
    python benchmarks/warmup_acceptance.py --order    # the 4 stacks, cpu,hello vs hello,cpu
    python benchmarks/warmup_acceptance.py --order --stores S1.sqlite S2.sqlite ...

Two quick studies (`pywebbench run`, default profile), per run:
- PyPy replicates below 0.8x their cell's other replicates, and whether the cell is marked
  (flag ``inconsistent`` or ``not_steady``); how many of the PyPy cells are marked (<= 2);
- max/min across replicates of the unmarked PyPy cells (<= 1.25);
- the classification counts (Barrett's classes of every replicate) and, across the runs,
  the share of cells with the same classification (>= 90%): the multiset of their
  replicates' classes, and Barrett's (the one class of all the replicates, else
  "inconsistent"); the wall time of each study.

``--order``: the issue's four PyPy stacks, quick-profile load (c64, 3 s, its caps and its
``server_scope = cell``; ``--scope stack`` for one server per stack replicate), with the
workloads given as ``cpu,hello`` and as ``hello,cpu`` in alternating rounds (3 of each).
Every replicate is attributed to the workload that came first: under ``stack`` the one its
server met first (the replicates sharing a server pid, by start time, so the rotation inside
a run is taken into account), under ``cell`` the one the run listed first. Prints per stack
the steady cpu figure (median over the replicates of a steady class: flat, warm-up,
slowdown) with cpu first and with hello first, and their ratio (within [0.85, 1.15] is the
acceptance).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pywebbench.analysis.modes import modes, replicate_figures
from pywebbench.analysis.warmup_class import STEADY_CLASSES, cell_class
from pywebbench.meter.core_speed import study_scaling
from pywebbench.run.rows import replicate_rps
from pywebbench.store import DEFAULT_FILENAME, Store, Study

# the pywebbench beside this interpreter (the venv's), whatever PATH says
PYWEBBENCH = shutil.which("pywebbench") or str(Path(sys.executable).parent / "pywebbench")

ORDER_STACKS = [
    ("gunicorn-gthread", "flask"),
    ("gunicorn-gthread", "raw-wsgi"),
    ("granian-wsgi", "flask"),
    ("uvicorn-h11", "starlette"),
]
ORDER_LOAD = ["-c", "64", "-d", "3", "--replicates", "3", "--no-report"]


def _run(argv: list[str], results: Path) -> float:
    """Run ``pywebbench run`` into ``results``; its wall time."""
    full = [PYWEBBENCH, "run", "--results-dir", str(results), *argv]
    print("$", " ".join(full), flush=True)
    started = time.monotonic()
    code = subprocess.run(full).returncode
    wall = time.monotonic() - started
    print(f"exit {code}, wall {wall:.0f} s", flush=True)
    return wall


def quick_run_summary(store_path: Path) -> dict[str, tuple[str, ...]]:
    """Prints one quick study's PyPy criteria; returns cell key -> sorted classes."""
    with Store(store_path, create=False) as store:
        study = store.load_study()
    speed = study_scaling(study)
    classes: dict[str, tuple[str, ...]] = {}
    counts: Counter[str] = Counter()
    marked = pypy = low_unmarked = 0
    spreads: list[float] = []
    for cell in study.cells:
        if cell.id is None or cell.status != "ok":
            continue
        stack = study.stack(cell.stack_id)
        reps = study.replicates_of(cell.id)
        key = f"{stack.key} {cell.workload}@{cell.load_point}"
        found = tuple(sorted(r.warmup_class or "-" for r in reps if r.status == "ok"))
        classes[key] = found
        counts.update(found)
        if stack.interpreter_impl != "pypy":
            continue
        pypy += 1
        # at the study's core speed, as the runner judged the cell's flags
        figures = replicate_figures(replicate_rps(reps, study.iterations_of(cell.id), speed))
        is_marked = bool(cell.flags.get("inconsistent") or cell.flags.get("not_steady"))
        marked += is_marked
        for k, y in enumerate(figures):
            others = figures[:k] + figures[k + 1 :]
            if others and y < 0.8 * statistics.median(others) and not is_marked:
                low_unmarked += 1
                print(f"  low and unmarked: {key} replicate {k}: {y:,.0f} vs {others}")
        if not is_marked and len(figures) >= 2:
            spreads.append(max(figures) / min(figures))
            if spreads[-1] > 1.25:
                print(f"  max/min {spreads[-1]:.2f}: {key} {[round(f) for f in figures]}")
        if cell.flags.get("inconsistent"):
            print(f"  {key}: {modes(figures).describe()}")
    worst = max(spreads, default=float("nan"))
    print(f"PyPy cells {pypy}, marked {marked} (<= 2); low unmarked replicates {low_unmarked} "
          f"(0); worst max/min of the others {worst:.2f} (<= 1.25)")  # fmt: skip
    print("classes:", dict(sorted(counts.items())))
    return classes


def _first_workloads(study: Study) -> dict[tuple[int, int], str]:
    """(cell id, replicate) -> the workload that came first: the one its server served
    first (a server shared by the stack's cells), else the one the run listed first."""
    config = study.runs[0].config if study.runs else {}
    listed = config.get("matrix", {}).get("workloads") or ["?"]
    shared = config.get("load", {}).get("server_scope") == "stack"
    by_pid: dict[int, list[tuple[str, str, int, int]]] = {}
    for cell in study.cells:
        assert cell.id is not None
        for r in study.replicates_of(cell.id):
            if r.pid is not None:
                at = (r.started_at, cell.workload, cell.id, r.replicate)
                by_pid.setdefault(r.pid, []).append(at)
    out = {}
    for group in by_pid.values():
        first = min(group)[1] if shared else listed[0]
        for _, _, cell_id, rep in group:
            out[(cell_id, rep)] = first
    return out


def order_summary(stores: list[Path]) -> None:
    """The cpu figure by the workload met first, per stack, over ``stores``."""
    steady: dict[str, dict[str, list[float]]] = {}
    classes: Counter[str] = Counter()
    for path in stores:
        with Store(path, create=False) as store:
            study = store.load_study()
        first = _first_workloads(study)
        for cell in study.cells:
            if cell.id is None or cell.workload != "cpu":
                continue
            stack = study.stack(cell.stack_id).key
            its = study.iterations_of(cell.id)
            for r in study.replicates_of(cell.id):
                classes[r.warmup_class or "-"] += 1
                rps = [i.rps for i in its if i.replicate == r.replicate and not i.interrupted]
                if r.status != "ok" or r.warmup_class not in STEADY_CLASSES or not rps:
                    continue
                met = first.get((cell.id, r.replicate), "?")
                steady.setdefault(stack, {}).setdefault(met, []).append(statistics.median(rps))
    print("| stack (cpu, c64) | cpu first | hello first | ratio |\n|---|---:|---:|---:|")
    for stack, by_first in sorted(steady.items()):
        a, b = by_first.get("cpu", []), by_first.get("hello", [])
        ma = statistics.median(a) if a else float("nan")
        mb = statistics.median(b) if b else float("nan")
        print(f"| {stack} | {ma:,.0f} (n={len(a)}) | {mb:,.0f} (n={len(b)}) | {ma / mb:.2f} |")
    print("classes of the cpu replicates:", dict(sorted(classes.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", nargs="+", type=Path)
    parser.add_argument("--order", action="store_true", help="the order experiment")
    parser.add_argument("--rounds", type=int, default=3, help="--order: rounds of each order")
    parser.add_argument("--scope", choices=["cell", "stack"], default="cell",
                        help="--order: the server scope (the quick study's is cell)")  # fmt: skip
    args = parser.parse_args()
    stores: list[Path] = list(args.stores or [])
    if args.order:
        if not stores:
            for _ in range(args.rounds):
                for order in ("cpu,hello", "hello,cpu"):  # alternating rounds
                    results = Path(tempfile.mkdtemp(prefix="pwb-order-"))
                    stacks = [f"--server={s}" for s, _ in ORDER_STACKS]
                    frameworks = sorted({f for _, f in ORDER_STACKS})
                    argv = ["--python", "pypy3.9", *stacks, "--framework", ",".join(frameworks),
                            "--workload", order, "--server-scope", args.scope,
                            *ORDER_LOAD]  # fmt: skip
                    _run(argv, results)
                    stores.append(results / DEFAULT_FILENAME)
        order_summary(stores)
        return
    if not stores:
        for name in ("A", "B"):
            results = Path(tempfile.mkdtemp(prefix=f"pwb-accept-{name}-"))
            _run([], results)
            stores.append(results / DEFAULT_FILENAME)
    found = []
    for path in stores:
        print(f"== {path}")
        found.append(quick_run_summary(path))
    if len(found) == 2:
        common = set(found[0]) & set(found[1])
        same = sum(found[0][k] == found[1][k] for k in common)
        print(f"same classification in both runs: {same} of {len(common)} cells (>= 90%), "
              "a cell's classification being the classes of all its replicates")  # fmt: skip
        same_b = sum(barrett(found[0][k]) == barrett(found[1][k]) for k in common)
        print(f"same classification in both runs: {same_b} of {len(common)} cells (>= 90%), a "
              "cell's classification being Barrett's (its replicates' one class, else good "
              "or bad inconsistent: warmup_class.cell_class)")  # fmt: skip
        lumped = sum(
            barrett(found[0][k]).split()[-1] == barrett(found[1][k]).split()[-1] for k in common
        )
        print(f"  ({lumped} of {len(common)} with good and bad inconsistent as one)")
        for k in sorted(common):
            if found[0][k] != found[1][k]:
                print(f"  {k}: {barrett(found[0][k])} ({', '.join(found[0][k])}) | "
                      f"{barrett(found[1][k])} ({', '.join(found[1][k])})")  # fmt: skip


def barrett(classes: tuple[str, ...]) -> str:
    """A cell's classification from its replicates' classes ("-": unclassified, left out)."""
    known = [c for c in classes if c != "-"]
    return cell_class(known) if known else "-"


if __name__ == "__main__":
    main()
