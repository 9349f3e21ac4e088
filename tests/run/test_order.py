"""No order effect (issue 21: under server_scope=stack, PyPy replicates whose server met cpu
first measured cpu at 0.38-0.66x the others, and were declared steady).

One run of PyPy on gunicorn-gthread (4 threads)/raw-wsgi with ``hello,json`` and 6
replicates: the order of the workloads rotates, so 3 replicates of each workload met it first
on a fresh server and 3 after the other workload. The figures that count are the steady
ones, by Barrett's class of the whole series (flat, warm-up or slowdown; the online warm-up
may reach its cap before it can prove flatness on a noisy machine, and a capped one is then
judged again with its 3 s measured series; a 20 s cap here: with 7 s and 2 s measured, the
second look found too few points to call any replicate steady on a fresh clone, and with
12 s, 7 of 12 replicates reached the cap unsettled in one of four runs): a cold
replicate must be classed "no steady state", never counted as steady. For each workload the
ratio of the steady figures met first to those met second must lie inside the equivalence
margin [0.85, 1.15].

The server was waitress until a fresh-clone CI run (2026-11-28) failed here with nothing to
compare: waitress under PyPy wandered by +-13% over seconds, 5 of its 12 replicates were no
steady state, and each workload had a side with fewer than 2 steady figures.
gunicorn-gthread with 12 s caps had 1 of 12 no steady state in each of two runs, passed a
fresh-clone run, and had 7 of 12 in a fourth (all capped), which failed; with 20 s caps, 12
of 12 were steady (148 s, one
run). At 1 in 12 a side of 3 has fewer than 2 steady figures with probability 0.020, a
workload is left out with 0.039, and both (the ``compared >= 1`` guard fails) with 0.0015;
with 20 s caps the rate is not yet measured beyond one run, so the guard's false-failure
rate is an estimate, not a design.

The designed false-failure rate of the comparison itself is at most 1 in 1,000: a ratio
outside the margin fails the test only when it is also significant at the 0.001 level,
Welch's t-test on the log figures
(``scipy.stats.ttest_ind``, unequal variances): if the order has no effect, the t statistic
exceeds its two-sided 0.001 critical value with probability 0.001 (log-normal replicate
figures; their spread, 1.14-1.77x max/min on PyPy hello in the issue, is the test's own
estimate, not a figure assumed here). The old check (one run's median inside the other's
95% CI, three replicates each) failed about 1 run in 5 with no order effect at all.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from pwbtest import pwb
from pywebbench.catalogue.interpreters import discover
from pywebbench.store import Store
from pywebbench.warmup_class import STEADY_CLASSES
from scipy import stats

MARGIN = (0.85, 1.15)
ALPHA = 0.001


def _figures_by_order(
    results: Path, seen: list[tuple[str, bool, str | None, str | None, float]]
) -> dict[str, dict[str, list[float]]]:
    """workload -> {"first" | "second": steady replicate figures}; marked replicates left out.
    Every replicate is appended to ``seen`` (workload, met first, warm-up end, class,
    figure), for the failure message."""
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    served: dict[int, list[tuple[str, str]]] = {}  # server pid -> (started_at, workload)
    for cell in study.cells:
        assert cell.id is not None and cell.status == "ok", (cell.key, cell.failure_reason)
        for r in study.replicates_of(cell.id):
            assert r.pid is not None
            served.setdefault(r.pid, []).append((r.started_at, cell.workload))
    out: dict[str, dict[str, list[float]]] = {}
    for cell in study.cells:
        assert cell.id is not None
        its = study.iterations_of(cell.id)
        for r in study.replicates_of(cell.id):
            assert r.pid is not None
            first = min(served[r.pid])[1] == cell.workload
            rps = [i.rps for i in its if i.replicate == r.replicate]
            figure = statistics.median(rps) if rps else math.nan
            seen.append((cell.workload, first, r.warmup_end, r.warmup_class, round(figure, 1)))
            if r.warmup_class not in STEADY_CLASSES or not rps:
                continue  # marked: not a steady figure
            side = out.setdefault(cell.workload, {"first": [], "second": []})
            side["first" if first else "second"].append(statistics.median(rps))
    return out


@pytest.mark.timeout(1200)  # 12 PyPy warm-ups until steady, on a shared machine
def test_the_workload_met_first_measures_as_the_one_met_second(tmp_path: Path, census: str) -> None:
    pypy = [i.name for i in discover() if i.is_pypy]
    assert pypy, "PyPy must be installed (scripts/setup.sh installs Debian's pypy3)"
    results = tmp_path / "res"
    proc = pwb(
        "run", "--python", pypy[0], "--server", "gunicorn-gthread", "--threads", "4",
        "--framework", "raw-wsgi",
        "--workload", "hello,json", "--server-scope", "stack", "--warmup-cap", "20",
        "--jit-warmup-cap", "20",
        "--replicates", "6", "--max-replicates", "6", "--iterations", "1", "-d", "3", "-c", "16",
        "--no-report",
        results=results, timeout=1100,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen: list[tuple[str, bool, str | None, str | None, float]] = []
    by_order = _figures_by_order(results, seen)
    compared = 0
    for workload, side in by_order.items():
        first, second = side["first"], side["second"]
        if len(first) < 2 or len(second) < 2:
            continue  # the rest were marked cold: kept out of the figures, as designed
        compared += 1
        ratio = statistics.median(first) / statistics.median(second)
        test = stats.ttest_ind(
            [math.log(y) for y in first], [math.log(y) for y in second], equal_var=False
        )
        inside = MARGIN[0] <= ratio <= MARGIN[1]
        assert inside or not test.pvalue < ALPHA, (workload, ratio, test.pvalue, seen)
    assert compared >= 1, seen  # hello, at least, settles on PyPy
