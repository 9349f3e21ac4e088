"""No order effect (issue 21: under server_scope=stack, PyPy replicates whose server met cpu
first measured cpu at 0.38-0.66x the others, and were declared steady).

One run of PyPy on gunicorn-gthread (4 threads)/raw-wsgi with ``hello,json`` and 4
replicates: the order of the workloads rotates, so each workload is met first on a fresh
server in 2 replicates and after the other workload in 2. The figures that count are the
steady ones, by Barrett's class of the whole series (flat, warm-up or slowdown; the online
warm-up may reach its cap before it can prove flatness on a noisy machine, and a capped one
is then judged again with its 3 s measured series; a 20 s cap here: with 12 s, 7 of 12
replicates reached the cap unsettled in one of four runs): a cold replicate must be classed
"no steady state", never counted as steady. For each workload, the ratio of its steady
figures met first to those met second must lie inside the equivalence margin [0.85, 1.15]
(:func:`order_effects`: one fit on the log figures of both workloads, a level and an order
term per workload, so that the noise is estimated from every steady figure).

History. The server was waitress until a fresh-clone CI run (2026-11-28) failed here with
nothing to compare (waitress under PyPy wandered by +-13% over seconds). The test then ran 6
replicates and compared each workload on its own, needing 2 steady figures on each side of
one workload: 12 warm-ups, 150-260 s, the longest test of the suite. With the noise pooled,
a workload is compared with one steady figure a side, and 4 replicates (8 warm-ups, ~150 s)
leave something to compare more often than 6 did: the test fails with nothing compared (no
workload with a figure on each side, or no degree of freedom left) with probability 0.0008
when 1 replicate in 12 is not steady (two runs with 20 s caps: 0 and 3 of 12), 0.004 at 1
in 8 and 0.049 at 1 in 4 (the worse of those runs; the 6-replicate design failed then with
about 0.08). Exact sums over which of the 8 figures are steady. A fresh-clone CI run
(2026-11-29) still found nothing to compare: its PyPy replicates were classed no steady
state, slowdown, or reached the cap. A run that leaves nothing to compare is therefore
followed by a second one, its figures fitted with the first's (a level per run and workload,
so a shift of the host between the runs is not read as an order effect; the noise is
pooled): ~150 s more, only then; the second run must have both sides of a workload itself,
so with the runs' steadiness independent the rates above square (0.049 -> 0.0024). A
fresh-clone CI run (2026-12-01) found nothing to compare in two runs while the host took
10-33% of the cores (2 and 4 of 8 replicates steady); a third run follows then (the rates
cube: 0.049 -> 0.0001, with the runs independent, which a host's steal for minutes is not).
That day a run beside 30% steal had 3 of 8 steady once the warm-up divided out the server's
idle time while the generator's core was stolen (docs/interference.md), 0 of 8 without.

The designed false-failure rate of each comparison is at most 1 in 1,000 (2 in 1,000 for
both): a ratio outside the margin fails the test only when its order term is also
significant at the 0.001 level (Student's t of the least-squares coefficient, on ``n -
columns`` degrees of freedom): if the order has no effect, its t statistic exceeds the
two-sided 0.001 critical value with probability 0.001 (log-normal replicate figures with one
spread for both workloads; their spread, 1.14-1.77x max/min on PyPy hello in the issue, is
the test's own estimate, not a figure assumed here). The old check (one run's median inside
the other's 95% CI, three replicates each) failed about 1 run in 5 with no order effect at
all.
"""

from __future__ import annotations

import math
import statistics
import warnings
from pathlib import Path

import numpy as np
import pytest
from pwbtest import pwb
from pywebbench.analysis.warmup_class import STEADY_CLASSES
from pywebbench.catalogue.interpreters import discover
from pywebbench.store import Store
from scipy import stats

MARGIN = (0.85, 1.15)
ALPHA = 0.001
#: Another run, fitted with the ones before (a level per run), only while those left nothing
#: to compare
RUNS = 3


def _figures_by_order(
    results: Path, seen: list[tuple[str, bool, str | None, str | None, float, str]]
) -> dict[str, dict[str, list[float]]]:
    """workload -> {"first" | "second": steady replicate figures}; marked replicates left out.
    Every replicate is appended to ``seen`` (workload, met first, warm-up end, class,
    figure, the warm-up's steal), for the failure message."""
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
        warmups = study.iterations_of(cell.id, kind="warmup")
        for r in study.replicates_of(cell.id):
            assert r.pid is not None
            first = min(served[r.pid])[1] == cell.workload
            rps = [i.rps for i in its if i.replicate == r.replicate]
            figure = statistics.median(rps) if rps else math.nan
            # the share of the two pinned cores the hypervisor gave to others in the warm-up:
            # a host that takes a third of them leaves little to call steady
            stolen = [(w.steal_s or 0.0) / (2 * w.duration_s) for w in warmups
                      if w.replicate == r.replicate and w.duration_s]  # fmt: skip
            steal = f"steal {max(stolen, default=0.0):.0%}"
            seen.append(
                (cell.workload, first, r.warmup_end, r.warmup_class, round(figure, 1), steal)
            )
            if r.warmup_class not in STEADY_CLASSES or not rps:
                continue  # marked: not a steady figure
            side = out.setdefault(cell.workload, {"first": [], "second": []})
            side["first" if first else "second"].append(statistics.median(rps))
    return out


def order_effects(
    *runs: dict[str, dict[str, list[float]]],
) -> dict[str, tuple[float, float]] | None:
    """For each workload with a steady figure on each side in one run, the ratio of its
    figures met first to those met second and that ratio's two-sided p-value, from one
    least-squares fit on every log figure of every run: a level per run and workload, and an
    order term per workload with both sides in a run (``log y = level[run, w] + d[w] *
    met_first``), Student's t of each ``d[w]`` on ``n - columns`` degrees of freedom (the
    noise pooled over workloads and runs: figures on one side only add to it). A level per
    run keeps a shift of the host between runs (steal comes and goes for minutes) out of the
    order term: a workload met first only in one run and second only in the other says
    nothing about the order. None when no workload has a figure on each side in a run, or
    there are too few figures for one degree of freedom."""
    levels = [
        (k, w) for k, run in enumerate(runs) for w, s in run.items() if s["first"] or s["second"]
    ]
    both = sorted({w for run in runs for w, s in run.items() if s["first"] and s["second"]})
    columns = len(levels) + len(both)
    rows: list[list[float]] = []
    ys: list[float] = []
    for k, w in levels:
        for name, first in (("first", 1.0), ("second", 0.0)):
            for y in runs[k][w][name]:
                row = [0.0] * columns
                row[levels.index((k, w))] = 1.0
                if w in both:
                    row[len(levels) + both.index(w)] = first
                rows.append(row)
                ys.append(math.log(y))
    df = len(ys) - columns
    if not both or df < 1:
        return None
    design, y = np.array(rows), np.array(ys)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ coef
    sigma2 = float(residual @ residual) / df
    inverse = np.linalg.inv(design.T @ design)
    out = {}
    for k, w in enumerate(both):
        j = len(levels) + k
        d, se = float(coef[j]), math.sqrt(sigma2 * float(inverse[j, j]))
        # a perfect fit: any difference is certain, none is not one
        p = (0.0 if d else 1.0) if se == 0 else float(2 * stats.t.sf(abs(d) / se, df))
        out[w] = (math.exp(d), p)
    return out


@pytest.mark.timeout(2200)  # up to 24 PyPy warm-ups until steady, on a shared machine
@pytest.mark.benchmark  # a power question on PyPy's timings: python -m pytest -m benchmark
def test_the_workload_met_first_measures_as_the_one_met_second(tmp_path: Path, census: str) -> None:
    pypy = [i.name for i in discover() if i.is_pypy]
    assert pypy, "PyPy must be installed (scripts/setup.sh installs Debian's pypy3)"
    seen: list[tuple[str, bool, str | None, str | None, float, str]] = []
    by_order: list[dict[str, dict[str, list[float]]]] = []  # a run's
    for attempt in range(RUNS):
        results = tmp_path / f"res{attempt}"
        proc = pwb(
            "run", "--python", pypy[0], "--server", "gunicorn-gthread", "--threads", "4",
            "--framework", "raw-wsgi",
            "--workload", "hello,json", "--server-scope", "stack", "--warmup-cap", "20",
            "--jit-warmup-cap", "20",
            "--replicates", "4", "--max-replicates", "4", "--iterations", "1", "-d", "3",
            "-c", "16", "--no-report",
            results=results, timeout=700,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        by_order.append(_figures_by_order(results, seen))
        effects = order_effects(*by_order)
        if effects:
            break
        warnings.warn(f"run {attempt + 1} left nothing to compare: {seen}", stacklevel=1)
    assert effects, seen  # hello, at least, settles on PyPy
    for workload, (ratio, p) in effects.items():
        inside = MARGIN[0] <= ratio <= MARGIN[1]
        assert inside or not p < ALPHA, (workload, ratio, p, seen)


def test_each_workloads_order_effect_is_read_with_the_noise_of_both() -> None:
    """On figures made up: each workload at its own level, the noise 2%. An order effect on
    one workload only (met first 0.6x on hello) is read on that workload, significant, and
    not on the other; without it every ratio is 1 and not significant. A workload with
    figures on one side only says nothing about the order but adds to the noise's degrees
    of freedom; too few figures, or no workload with both sides, give None. Across runs, each
    has its own level."""
    noise = [1.0, 1.02, 0.98, 1.01]

    def sides(level: float, effect: float) -> dict[str, list[float]]:
        return {
            "first": [level * effect * x for x in noise[:2]],
            "second": [level * x for x in noise[2:]],
        }

    cold = order_effects({"hello": sides(6000, 0.6), "json": sides(4000, 1.0)})
    assert cold is not None
    assert cold["hello"][0] == pytest.approx(0.6, rel=0.03) and cold["hello"][1] < ALPHA
    assert cold["json"][0] == pytest.approx(1.0, rel=0.03) and cold["json"][1] > 0.05
    warm = order_effects({"hello": sides(6000, 1.0), "json": sides(4000, 1.0)})
    assert warm is not None and all(p > 0.05 for _, p in warm.values())
    # json met second only: no term of its own, 2 more degrees of freedom for hello's
    lopsided = {
        "hello": {"first": [6000.0], "second": [6100.0]},
        "json": {"first": [], "second": [4000.0, 4040.0, 3990.0]},
    }
    effect = order_effects(lopsided)
    assert effect is not None and set(effect) == {"hello"}
    assert order_effects({"hello": lopsided["hello"]}) is None  # no degree of freedom left
    assert order_effects({"json": lopsided["json"]}) is None  # nothing met first
    # two runs, the host 1.5x faster in the first: hello met first only there and second only
    # in the second run says nothing about the order (one level for both runs would read a
    # 1.5x order effect); json, both sides in each run, is read within each run
    fast = {"hello": {"first": [6000.0, 6060.0], "second": []}, "json": sides(6000, 1.0)}
    slow = {"hello": {"first": [], "second": [4000.0, 3960.0]}, "json": sides(4000, 1.0)}
    shifted = order_effects(fast, slow)
    assert shifted is not None and set(shifted) == {"json"}
    assert shifted["json"][0] == pytest.approx(1.0, rel=0.03) and shifted["json"][1] > 0.05
    exact = {"hello": {"first": [5000.0, 5000.0], "second": [6000.0, 6000.0]}}
    ((ratio, p),) = (order_effects(exact) or {}).values()  # no noise: certain
    assert ratio == pytest.approx(5 / 6) and p < ALPHA
