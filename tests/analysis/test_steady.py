"""The drift test, the leak slope and the statistics' import on known series (the warm-up
rule: test_warmup.py)."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest
from pywebbench.analysis.steady import LEAK_FLOOR_JIT_BYTES_PER_1K, drift, leak, trend
from pywebbench.run.steadiness import snapshot_series


def test_the_trend_is_robust_and_tested() -> None:
    ys = [2.0 * x + 10 for x in range(10)]
    ys[3] = 100.0  # one outlier does not move the robust slope: 2 x 9 / median 21
    change, p_up = trend(ys)
    assert change == pytest.approx(18.0 / 21.0, rel=0.01) and p_up < 0.01
    _, p_flat = trend([1.0, 3.0, 2.0, 3.0, 1.0, 2.0, 1.0, 3.0])
    assert p_flat > 0.5


def test_drift_is_a_significant_trend_of_some_size() -> None:
    rng = random.Random(3)
    flat = [5000 + rng.gauss(0, 100) for _ in range(12)]
    assert not drift(flat).drifting
    rising = [5000 * (1 + 0.03 * k) + rng.gauss(0, 50) for k in range(12)]
    found = drift(rising)
    assert found.drifting and found.change > 0.25 and found.p_value < 0.01
    tiny = [5000 * (1 + 0.001 * k) for k in range(12)]  # significant, but 1%: not drift
    assert not drift(tiny).drifting
    assert not drift([1.0, 2.0]).drifting  # too few points to say


def test_a_leak_is_a_slope_whose_interval_lies_above_the_floor() -> None:
    rng = random.Random(5)
    requests = [k * 500.0 for k in range(60)]
    base = 60e6
    leaking = [base + 2048.0 * r + rng.gauss(0, 200e3) for r in requests]  # 2 KB per request
    found = leak(requests, leaking)
    assert found.leaking and found.ci_low > 256 * 1024
    assert found.bytes_per_1k == pytest.approx(2048e3, rel=0.1)
    plateau = [base + rng.gauss(0, 200e3) for _ in requests]  # allocated before, now flat
    assert not leak(requests, plateau).leaking
    slow = [base + 64.0 * r for r in requests]  # 64 KB per 1,000 requests: under the floor
    assert not leak(requests, slow).leaking
    assert not leak([1.0, 2.0], [1.0, 2.0]).leaking  # too few points
    # PyPy's GC widening its heap once: 280 MB, a step to 299 MB early on, then flat (seen)
    step = [280e6 + (19e6 if k >= 4 else 0.0) + rng.gauss(0, 100e3) for k in range(26)]
    at = [k * 1050.0 for k in range(26)]
    stepped = leak(at, step)
    assert stepped.ci_low < 256 * 1024 and not stepped.leaking, stepped


@pytest.mark.filterwarnings("error")
def test_memory_that_never_moves_has_no_interval_and_no_warning() -> None:
    """Tied values on both axes (RSS in whole pages, unchanged; slow requests, none done
    between some samples): Sen's variance is negative, the interval undefined; no leak, and
    nothing printed on the run's console (seen there with the cpu workload)."""
    requests = [k // 2 * 500.0 for k in range(8)]  # each count twice
    flat = [60e6] * 8
    found = leak(requests, flat)
    assert not found.leaking and found.bytes_per_1k == 0.0
    assert math.isnan(found.ci_low) and math.isnan(found.ci_high)


def test_snapshot_series_is_the_rate_between_snapshots() -> None:
    snaps = [(0.25, 100), (0.5, 300), (0.6, 320), (0.75, 400), (1.0, 700)]
    # 0.6 is too close to 0.5 to start an interval of its own: it is skipped
    assert snapshot_series(snaps) == pytest.approx([800.0, 400.0, 1200.0])
    assert snapshot_series([]) == [] and snapshot_series([(0.25, 10)]) == []


def test_a_leak_is_growth_that_does_not_stop() -> None:
    """A cache that fills during the first 40% of the series, then plateaus: the whole
    slope's interval lies above the floor, its last half's does not."""
    rng = random.Random(8)
    requests = [k * 500.0 for k in range(60)]
    filling = [60e6 + 4096.0 * min(r, 12_000.0) + rng.gauss(0, 100e3) for r in requests]
    whole = leak(requests, filling, floor=1.0)  # any growth at all, over the whole series
    assert whole.ci_low > 256 * 1024
    assert not leak(requests, filling).leaking


def test_pypy_heap_growth_is_under_the_jit_floor() -> None:
    """270 KB per 1,000 requests (PyPy's heap on the cached app, measured) is a leak for
    CPython's floor, not for the JIT floor; 2 KB per request is one for both."""
    rng = random.Random(9)
    requests = [k * 250.0 for k in range(40)]
    pypy = [517e6 + 270.0 * r + rng.gauss(0, 20e3) for r in requests]
    assert leak(requests, pypy).leaking
    assert not leak(requests, pypy, floor=LEAK_FLOOR_JIT_BYTES_PER_1K).leaking
    kept = [517e6 + 2048.0 * r + rng.gauss(0, 20e3) for r in requests]
    assert leak(requests, kept, floor=LEAK_FLOOR_JIT_BYTES_PER_1K).leaking


def test_the_statistics_are_imported_in_the_background_then_waited_for() -> None:
    """``run`` starts importing scipy.stats and ruptures in a thread before its pre-flight
    sample and the servers' start; the first replicate's :func:`preload` waits for it."""
    script = (
        "import sys, threading\n"
        "from pywebbench.analysis import steady\n"
        "assert 'scipy.stats' not in sys.modules and 'ruptures' not in sys.modules\n"
        "steady.preload_in_background()\n"
        "steady.preload_in_background()  # once\n"
        "names = [t.name for t in threading.enumerate()]\n"
        "assert names.count('pwb-preload') <= 1, names\n"
        "steady.preload()\n"
        "assert 'scipy.stats' in sys.modules and 'ruptures' in sys.modules\n"
        "assert not steady._importing[0].is_alive()\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_growth_below_the_collectors_floor_is_not_yet_a_leak() -> None:
    """PyPy's gunicorn-gthread/raw-wsgi cpu on this VM: ~5.7 KB a request from 486 MiB, as
    measured before PyPy's 1.9 GiB floor was reached (meter/pypy_gc.py). Below the floor
    nothing was collected: ``uncollected``, not a leak; past it, the same slope is one."""
    rng = random.Random(12)
    requests = [k * 2_000.0 for k in range(60)]  # to 1.1 GiB
    memory = [486 * 2**20 + 5_700.0 * r + rng.gauss(0, 2e6) for r in requests]
    floor = 1920 * 2**20
    below = leak(requests, memory, floor=LEAK_FLOOR_JIT_BYTES_PER_1K, collector_floor=floor)
    assert not below.leaking and below.uncollected
    assert below.to_dict()["uncollected"] is True and below.bytes_per_1k > 5e6
    past = leak(
        requests, memory, floor=LEAK_FLOOR_JIT_BYTES_PER_1K, collector_floor=max(memory) / 2
    )
    assert past.leaking and not past.uncollected and "uncollected" not in past.to_dict()
    flat = leak(
        requests, [486 * 2**20 + rng.gauss(0, 2e6) for _ in requests], collector_floor=floor
    )
    assert not flat.leaking and not flat.uncollected  # nothing to excuse
