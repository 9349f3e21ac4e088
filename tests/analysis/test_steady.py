"""The steady-state rule, the drift test and the leak slope on known series."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest
from pywebbench.analysis.steady import (
    LEAK_FLOOR_JIT_BYTES_PER_1K,
    SteadyRule,
    WarmupEnd,
    WarmupWatch,
    drift,
    leak,
    trend,
)
from pywebbench.run.steadiness import snapshot_series


def _watch(rate_at, rule: SteadyRule, *, seed: int = 1, tick: float = 0.25):
    """Feed a watch with cumulative counts of a Poisson-ish process of rate ``rate_at(t)``."""
    rng = random.Random(seed)
    watch = WarmupWatch(rule)
    t, total = 0.0, 0
    while True:
        t += tick
        mean = rate_at(t) * tick
        total += max(0, int(rng.gauss(mean, math.sqrt(mean))))
        verdict = watch.observe(t, total)
        if verdict is not None:
            return verdict


def test_the_trend_is_robust_and_tested() -> None:
    ys = [2.0 * x + 10 for x in range(10)]
    ys[3] = 100.0  # one outlier does not move the robust slope: 2 x 9 / median 21
    change, p_up = trend(ys)
    assert change == pytest.approx(18.0 / 21.0, rel=0.01) and p_up < 0.01
    _, p_flat = trend([1.0, 3.0, 2.0, 3.0, 1.0, 2.0, 1.0, 3.0])
    assert p_flat > 0.5


def test_a_flat_server_is_steady_after_one_window() -> None:
    """Steady asks for evidence of flatness: the slope's bound over a regime of 8,000 req/s
    (2.2% counting noise per bucket) is tight enough after 4-5 s."""
    rule = SteadyRule(window_s=2.0, cap_s=20.0)
    verdict = _watch(lambda t: 8000.0, rule)
    assert verdict.end == WarmupEnd.STEADY
    assert verdict.steady_start_s is not None and verdict.steady_start_s <= 0.5
    assert verdict.elapsed_s <= 5.0 and len(verdict.curve) >= 8


@pytest.mark.parametrize("ramp_s", [3.0, 6.0, 10.0])
def test_the_steady_start_is_found_at_the_end_of_a_ramp(ramp_s: float) -> None:
    """A JIT-like ramp: throughput climbs for ``ramp_s`` then holds."""
    rule = SteadyRule(window_s=2.0, cap_s=30.0)
    verdict = _watch(lambda t: 2000.0 + 6000.0 * min(1.0, t / ramp_s), rule, seed=int(ramp_s))
    assert verdict.end == WarmupEnd.STEADY
    assert verdict.steady_start_s is not None
    assert abs(verdict.steady_start_s - ramp_s) <= 1.0, verdict.steady_start_s


def test_a_sawtooth_never_settles_and_ends_at_the_cap() -> None:
    rule = SteadyRule(window_s=2.0, cap_s=12.0)
    verdict = _watch(lambda t: 3000.0 + 2000.0 * ((t % 4.0) / 4.0), rule)
    assert verdict.end == WarmupEnd.CAP and verdict.steady_start_s is None
    assert verdict.elapsed_s == pytest.approx(12.0, abs=0.3)


def test_a_slow_server_is_judged_against_its_counting_noise() -> None:
    """At 300 req/s a 0.25 s bucket holds ~75 requests: +-12% is noise, not a trend; bounding
    the slope of so noisy a curve within 5% per 2 s takes ~8 s of it."""
    rule = SteadyRule(window_s=2.0, cap_s=20.0)
    verdict = _watch(lambda t: 300.0, rule, seed=7)
    assert verdict.end == WarmupEnd.STEADY and verdict.elapsed_s < 10.0


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


def _flipping_core(scaled: bool, seed: int) -> tuple[str, float]:
    """A server at a constant 1,000 req/s of work on a core whose speed flips between 1.0
    and 1.45 every 2 s (the host's two levels, docs/interference.md#core-speed), 3% noise;
    the probe's reading of the speed has 2% noise."""
    rnd = random.Random(seed)
    watch = WarmupWatch(SteadyRule(cap_s=15.0))
    done = 0.0
    for k in range(1, 61):
        t = k * 0.25
        speed = 1.45 if int(t / 2.0) % 2 else 1.0
        done += 250 * speed * rnd.gauss(1, 0.03)
        reading = (lambda s=speed: s * rnd.gauss(1, 0.02)) if scaled else None
        verdict = watch.observe(t, int(done), reading)
        if verdict is not None:
            return verdict.end.value, verdict.elapsed_s
    return "none", 15.0


@pytest.mark.parametrize("seed", range(5))
def test_a_core_whose_speed_flips_is_steady_once_the_curve_is_put_at_one_speed(
    seed: int,
) -> None:
    assert _flipping_core(scaled=False, seed=seed) == ("cap", 15.0)  # each flip: a new regime
    end, elapsed = _flipping_core(scaled=True, seed=seed)
    assert end == "steady" and elapsed <= 8.0


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
