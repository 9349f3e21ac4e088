"""Reproducibility of a study: the same study twice, cell by cell and rank by rank.

    python benchmarks/reproducibility.py                      # runs the quick profile twice
    python benchmarks/reproducibility.py --stores A.sqlite B.sqlite   # two stored runs

Prints, over the cells both runs measured:
- the CI half-widths reached (median and worst, as % of the median);
- rank swaps: pairs of stacks (same workload) ordered one way in A and the other in B, out
  of all pairs, and how many of those swaps are not significant in A or B (the 95% CI of
  the pair's ratio contains 1: the report's tie rule, pywebbench.analysis.ratio);
- cells whose medians differ by more than 15%, and steady cells whose B median lies outside
  A's CI and A's outside B's, with how many a run of the same cell twice would give by
  chance;
- the flags raised (not_steady, drift, leak) in each run.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pywebbench.analysis.ratio import ratio_of_medians, seed_for
from pywebbench.analysis.stats import Summary, summarize_replicates
from pywebbench.run.rows import replicate_rps
from pywebbench.store import DEFAULT_FILENAME, Store

# the pywebbench beside this interpreter (the venv's), whatever PATH says
PYWEBBENCH = shutil.which("pywebbench") or str(Path(sys.executable).parent / "pywebbench")

Figures = dict[tuple[str, str, str], tuple[Summary, dict[str, object], list[list[float]]]]


def figures(store_path: Path) -> Figures:
    """(stack, workload, load point) -> (summary of replicate medians, flags, replicates'
    iteration req/s) of ok cells."""
    with Store(store_path, create=False) as store:
        study = store.load_study()
    names = {s.id: s.key for s in study.stacks}
    out: Figures = {}
    for cell in study.cells:
        if cell.status != "ok" or cell.id is None:
            continue
        rps = replicate_rps(study.replicates_of(cell.id), study.iterations_of(cell.id))
        out[(names[cell.stack_id], cell.workload, cell.load_point)] = (
            summarize_replicates(rps),
            cell.flags,
            rps,
        )
    return out


def compare(a: Figures, b: Figures) -> None:
    common = sorted(set(a) & set(b))
    print(f"cells in both runs: {len(common)} (A only {len(set(a) - set(b))}, "
          f"B only {len(set(b) - set(a))})")  # fmt: skip
    widths = sorted(
        100 * s.ci_halfwidth_rel for f in (a, b) for k in common for s in [f[k][0]] if s.n >= 2
    )
    if widths:
        print(f"CI half-width: median {widths[len(widths) // 2]:.1f}%, worst {widths[-1]:.1f}%")
    pairs = swaps = tied = 0
    groups: dict[tuple[str, str], list[str]] = {}
    for stack, workload, point in common:
        groups.setdefault((workload, point), []).append(stack)
    for (workload, point), stacks in groups.items():
        for x, y in itertools.combinations(stacks, 2):
            ka, kb = (x, workload, point), (y, workload, point)
            pairs += 1
            order_a = a[ka][0].median > a[kb][0].median
            order_b = b[ka][0].median > b[kb][0].median
            if order_a != order_b:
                swaps += 1
                tied += _tie(a[ka][2], a[kb][2]) or _tie(b[ka][2], b[kb][2])
    print(f"rank swaps: {swaps} of {pairs} pairs ({tied} of them not significant in A or B)")
    far = [k for k in common if _ratio(a[k][0].median, b[k][0].median) > 1.15]
    print(f"cells differing by more than 15%: {len(far)} of {len(common)}")
    for k in far:
        print(f"  {'/'.join(k)}: {a[k][0].median:,.0f} vs {b[k][0].median:,.0f}")
    steady = [k for k in common if not (a[k][1].get("not_steady") or b[k][1].get("not_steady"))]
    outside = [
        k
        for k in steady
        if not (_inside(b[k][0].median, a[k][0]) or _inside(a[k][0].median, b[k][0]))
    ]
    print(f"steady cells outside each other's CI: {len(outside)} of {len(common)}")
    for k in outside:
        print(f"  {'/'.join(k)}: A {_fmt(a[k][0])}  B {_fmt(b[k][0])}")
    chance = sum(_chance_outside(a[k][0].n, b[k][0].n) for k in steady)
    print(f"  expected by chance alone: {chance:.1f} (95% CIs; replicates normal, same mean)")
    for name, f in (("A", a), ("B", b)):
        counts = {flag: sum(bool(f[k][1].get(flag)) for k in f) for flag in
                  ("not_steady", "drift", "leak")}  # fmt: skip
        print(f"flags in {name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


def _ratio(x: float, y: float) -> float:
    return max(x, y) / min(x, y) if min(x, y) > 0 else float("inf")


def _tie(x: list[list[float]], y: list[list[float]]) -> bool:
    est = ratio_of_medians(x, y, seed=seed_for("pair"))
    return est is not None and est.low <= 1.0 <= est.high


@functools.cache
def _chance_outside(n_a: int, n_b: int, trials: int = 4000) -> float:
    """How often two runs of one unchanging cell, with ``n_a`` and ``n_b`` normal replicates,
    put each median outside the other's CI (simulated with the report's own intervals)."""
    if n_a < 2 or n_b < 2:
        return 0.0
    rng = random.Random(n_a * 1000 + n_b)
    hits = 0
    for _ in range(trials):
        x = summarize_replicates([[rng.lognormvariate(0.0, 0.1)] for _ in range(n_a)])
        y = summarize_replicates([[rng.lognormvariate(0.0, 0.1)] for _ in range(n_b)])
        hits += not (_inside(y.median, x) or _inside(x.median, y))
    return hits / trials


def _inside(value: float, s: Summary) -> bool:
    return s.n >= 2 and s.ci_low <= value <= s.ci_high


def _fmt(s: Summary) -> str:
    return f"{s.median:,.0f} [{s.ci_low:,.0f}-{s.ci_high:,.0f}] n={s.n}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", nargs=2, type=Path, metavar=("A", "B"))
    parser.add_argument("extra", nargs="*", help="pywebbench run options (after --)")
    args = parser.parse_args()
    if args.stores:
        stores = list(args.stores)
    else:
        stores = []
        for name in ("A", "B"):
            results = Path(tempfile.mkdtemp(prefix=f"pwb-repro-{name}-"))
            argv = [PYWEBBENCH, "run", "--results-dir", str(results), *args.extra]
            print("$", " ".join(argv), flush=True)
            started = time.monotonic()
            code = subprocess.run(argv).returncode
            print(f"run {name}: exit {code}, wall {time.monotonic() - started:.0f} s", flush=True)
            if not (results / DEFAULT_FILENAME).exists():
                sys.exit(f"run {name} failed before storing anything")
            # A failed cell (exit 1) leaves the rest stored: compare what both runs measured.
            stores.append(results / DEFAULT_FILENAME)
    print(f"A: {stores[0]}\nB: {stores[1]}")
    compare(figures(stores[0]), figures(stores[1]))


if __name__ == "__main__":
    main()
