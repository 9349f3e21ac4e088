"""A/A check of the cell intervals (issue 22): run one single-stack study in pairs, and count
how often one run's median lies outside the other run's 95% CI.

    python benchmarks/aa_intervals.py --pairs 20          # ~1 min a study: ~40 min
    python benchmarks/aa_intervals.py --pairs 3 --workload hello --results-dir /tmp/aa

Two runs of an unchanged stack are the same experiment twice, so the share of pairs in which
run B's median falls outside run A's interval is set by the interval's method and the number
of replicates: the script simulates it with the cell intervals' own code
(``stats.summarize_replicates``, Student's t on the log scale) on log-normal replicates, and
compares the observed share with it (an exact binomial test, scipy.stats.binomtest). An
observed share far above the prediction says the intervals are too narrow for the machine
(drift between runs, interference); far below, too wide.

The runs go one after the other on this machine; other work on it moves the figures. The
interference guard stays on: the script reports how many cells were interfered. Both runs of
a pair are put at one core speed, as ``pywebbench compare`` puts them
(docs/interference.md#core-speed): a host that runs the core faster in one run than in the
other is not a change of the stack.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from pywebbench.analysis.stats import Summary, summarize_replicates
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.meter.core_speed import SpeedScaling, study_scaling
from pywebbench.run.rows import replicate_rps
from pywebbench.store import Store, Study
from scipy.stats import binomtest

PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")


def study(results: Path, options: list[str]) -> Study:
    """Run the study; its stored study."""
    proc = subprocess.run(
        [PYWEBBENCH, "run", *options, "--no-report", "--results-dir", str(results)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"pywebbench run failed ({proc.returncode}):\n{proc.stderr}{proc.stdout[-2000:]}")
    with Store(results / "pywebbench.sqlite", create=False) as store:
        run = store.latest_run()
        assert run is not None
        return store.load_study([run.id])


def cells(st: Study, speed: SpeedScaling) -> dict[str, tuple[Summary, bool]]:
    """Per cell key, its summary at the pair's one core speed, and whether it was
    interfered."""
    out = {}
    for cell in st.cells:
        assert cell.id is not None
        rps = replicate_rps(st.replicates_of(cell.id), st.iterations_of(cell.id), speed)
        out[cell.key.split("|", 1)[1]] = (
            summarize_replicates(rps),
            bool(cell.flags.get("interfered")),
        )
    return out


def outside(value: float, s: Summary) -> bool:
    """``value`` lies outside ``s``'s interval (a summary without one counts as inside)."""
    return s.n >= 2 and not s.ci_low <= value <= s.ci_high


def predicted(n: int, trials: int = 20_000, sd: float = 0.1) -> float:
    """The share of A/A pairs with B's median outside A's CI, for ``n`` log-normal replicates
    a side, by the cell intervals' own code (seeded)."""
    rng = random.Random(n)
    hits = 0
    for _ in range(trials):
        a = summarize_replicates([[rng.lognormvariate(0.0, sd)] for _ in range(n)])
        b = summarize_replicates([[rng.lognormvariate(0.0, sd)] for _ in range(n)])
        hits += outside(b.median, a)
    return hits / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--python", default=default_interpreters()[0].name)
    parser.add_argument("--server", default="gunicorn-gthread")
    parser.add_argument("--framework", default="raw-wsgi")
    parser.add_argument("--workload", default="hello")
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--results-dir", type=Path)
    args = parser.parse_args()
    if not 1 <= args.pairs <= 200:
        parser.error(f"--pairs: {args.pairs} is not between 1 and 200")
    results = args.results_dir or Path(tempfile.mkdtemp(prefix="pwb-aa-"))
    options = [
        "--python", args.python, "--server", args.server, "--framework", args.framework,
        "--workload", args.workload, "--replicates", str(args.replicates),
        "--max-replicates", str(args.replicates),
    ]  # fmt: skip
    print(f"results in {results}; study: pywebbench run {' '.join(options)}")
    hits = total = interfered = 0
    for pair in range(args.pairs):
        study_a, study_b = study(results, options), study(results, options)
        # both at one core speed, as compare puts them (docs/interference.md#core-speed)
        speed = study_scaling(study_a, study_b)
        a, b = cells(study_a, speed), cells(study_b, speed)
        for key in sorted(set(a) & set(b)):
            (sa, ia), (sb, ib) = a[key], b[key]
            miss = outside(sb.median, sa)
            hits += miss
            total += 1
            interfered += ia or ib
            print(
                f"pair {pair + 1} {key}: A {sa.median:,.0f} [{sa.ci_low:,.0f}-{sa.ci_high:,.0f}]"
                f" B {sb.median:,.0f}: {'outside' if miss else 'inside'}"
                + (" (interfered)" if ia or ib else ""),
                flush=True,
            )
    expected = predicted(args.replicates)
    test = binomtest(hits, total, expected)
    ci = test.proportion_ci(0.95)
    print(
        f"B's median outside A's 95% CI: {hits} of {total} ({hits / total:.1%}, 95% CI "
        f"{ci.low:.1%}-{ci.high:.1%}); predicted for {args.replicates} replicates a side: "
        f"{expected:.1%}; binomial test p = {test.pvalue:.3f}; pairs with an interfered "
        f"cell: {interfered}"
    )


if __name__ == "__main__":
    main()
