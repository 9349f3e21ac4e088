"""No order effect (issue 21: under server_scope=stack, PyPy replicates whose server met cpu
first measured cpu at 0.38-0.66x the others, and were declared steady).

One run of PyPy on gunicorn-gthread (4 threads)/raw-wsgi with ``hello,json`` and 4
replicates: the order of the workloads rotates, so each workload is met first on a fresh
server in 2 replicates and after the other workload in 2. The figures that count are the
steady ones, by Barrett's class of the whole series (flat, warm-up or slowdown; the online
warm-up may reach its cap before it can prove flatness on a noisy machine, and a capped one
is then judged again with its 3 s measured series; a 20 s cap here: with 12 s, 7 of 12
replicates reached the cap unsettled in one of four runs): a cold replicate must be classed
"no steady state", never counted as steady. The ratio of the steady figures met first to
those met second, pooled over both workloads (:func:`order_effect`: one level per workload,
one order term, on the log figures), must lie inside the equivalence margin [0.85, 1.15].

History. The server was waitress until a fresh-clone CI run (2026-11-28) failed here with
nothing to compare (waitress under PyPy wandered by +-13% over seconds). The test then ran 6
replicates and compared each workload on its own, needing 2 steady figures on each side of
one workload: 12 warm-ups, 150-260 s, the longest test of the suite. A run of 28 Nov 2026 had
3 of its 12 replicates not steady; at that rate (q = 1/4) a side of 3 lacks 2 steady figures
with probability 0.16, and both workloads were left out, failing the test with nothing
compared, with probability about 0.08. Pooled, a workload counts when it has one steady
figure met first and one met second: with 2 replicates a side it is left out with
probability 1 - (1 - q^2)^2 = 0.12, both are with 0.015 (at q = 1/12, as in earlier runs:
0.0002), for 8 warm-ups instead of 12.

The designed false-failure rate of the comparison itself is at most 1 in 1,000: a ratio
outside the margin fails the test only when the order term is also significant at the 0.001
level (Student's t of the least-squares coefficient, ``n - 3`` degrees of freedom): if the
order has no effect, its t statistic exceeds the two-sided 0.001 critical value with
probability 0.001 (log-normal replicate figures with one spread for both workloads; their
spread, 1.14-1.77x max/min on PyPy hello in the issue, is the test's own estimate, not a
figure assumed here). The old check (one run's median inside the other's 95% CI, three
replicates each) failed about 1 run in 5 with no order effect at all.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
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


def order_effect(
    by_order: dict[str, dict[str, list[float]]],
) -> tuple[float, float, int, int] | None:
    """The ratio of steady figures met first to those met second, pooled over the workloads,
    and its two-sided p-value: least squares on the log figures with one level per workload
    and one order term (``log y = level[workload] + d * met_first``), the ratio ``exp(d)``
    and Student's t of ``d`` on ``n - workloads - 1`` degrees of freedom. Also the figures
    met first and second. None when no workload has a figure on each side, or there are too
    few figures for one degree of freedom."""
    used = {w: s for w, s in by_order.items() if s["first"] and s["second"]}
    rows: list[list[float]] = []
    ys: list[float] = []
    for k, side in enumerate(used.values()):
        for name, first in (("first", 1.0), ("second", 0.0)):
            for y in side[name]:
                level = [0.0] * len(used)
                level[k] = 1.0
                rows.append([*level, first])
                ys.append(math.log(y))
    df = len(ys) - len(used) - 1
    if not used or df < 1:
        return None
    design, y = np.array(rows), np.array(ys)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ coef
    sigma2 = float(residual @ residual) / df
    se = math.sqrt(sigma2 * float(np.linalg.inv(design.T @ design)[-1, -1]))
    d = float(coef[-1])
    p = 1.0 if se == 0 else float(2 * stats.t.sf(abs(d) / se, df))
    firsts = sum(len(s["first"]) for s in used.values())
    return math.exp(d), p, firsts, len(ys) - firsts


@pytest.mark.timeout(900)  # 8 PyPy warm-ups until steady, on a shared machine
def test_the_workload_met_first_measures_as_the_one_met_second(tmp_path: Path, census: str) -> None:
    pypy = [i.name for i in discover() if i.is_pypy]
    assert pypy, "PyPy must be installed (scripts/setup.sh installs Debian's pypy3)"
    results = tmp_path / "res"
    proc = pwb(
        "run", "--python", pypy[0], "--server", "gunicorn-gthread", "--threads", "4",
        "--framework", "raw-wsgi",
        "--workload", "hello,json", "--server-scope", "stack", "--warmup-cap", "20",
        "--jit-warmup-cap", "20",
        "--replicates", "4", "--max-replicates", "4", "--iterations", "1", "-d", "3", "-c", "16",
        "--no-report",
        results=results, timeout=800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen: list[tuple[str, bool, str | None, str | None, float]] = []
    effect = order_effect(_figures_by_order(results, seen))
    assert effect is not None, seen  # hello, at least, settles on PyPy
    ratio, p, _, _ = effect
    inside = MARGIN[0] <= ratio <= MARGIN[1]
    assert inside or not p < ALPHA, (ratio, p, seen)


def test_the_order_effect_is_pooled_over_the_workloads() -> None:
    """The pooled estimate, on figures made up: each workload at its own level, the ones met
    first 0.6x (a cold replicate counted as steady), the noise 2%: the ratio is read across
    both levels, and significant; without the effect the ratio is 1 and not significant."""
    noise = [1.0, 1.02, 0.98, 1.01]

    def sides(level: float, first: list[float], second: list[float]) -> dict[str, list[float]]:
        return {"first": [level * 0.6 * x for x in first], "second": [level * x for x in second]}

    cold = {"hello": sides(6000, noise[:2], noise[2:]), "json": sides(4000, noise[1:3], noise[::3])}
    effect = order_effect(cold)
    assert effect is not None
    ratio, p, firsts, seconds = effect
    assert ratio == pytest.approx(0.6, rel=0.03) and p < ALPHA and (firsts, seconds) == (4, 4)
    warm = {
        w: {"first": [y / 0.6 for y in s["first"]], "second": s["second"]} for w, s in cold.items()
    }
    effect = order_effect(warm)
    assert effect is not None and effect[0] == pytest.approx(1.0, rel=0.03) and effect[1] > 0.05
    # one side empty in a workload: that workload says nothing about the order
    only = {"hello": cold["hello"], "json": {"first": [], "second": [4000.0, 4040.0]}}
    effect = order_effect(only)
    assert effect is not None and effect[2:] == (2, 2)
    assert order_effect({"json": only["json"]}) is None
