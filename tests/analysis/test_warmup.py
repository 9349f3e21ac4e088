"""The warm-up rule (analysis/warmup.py) on known series: a lone process's curve judged
online, a group process's shares of the round, and the one rule under both."""

from __future__ import annotations

import math
import random

import pytest
from pywebbench.analysis.steady import noise, slope_bounds
from pywebbench.analysis.warmup import (
    SteadyRule,
    WarmRule,
    WarmupEnd,
    WarmupWatch,
    regime_start,
    warm_round,
)

# ---------------------------------------------------------------------------- a lone process


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


# ------------------------------------------------------------------------ a process of a group


def _series(values: list[float]) -> list[tuple[int, float]]:
    return list(enumerate(values))


def test_a_process_warming_up_is_warm_where_its_share_settles() -> None:
    rng = random.Random(2)
    ramp = [0.5 + 0.05 * r for r in range(10)]  # 0.5 -> 0.95 over 10 rounds
    flat = [1.0 + rng.gauss(0, 0.01) for _ in range(20)]
    found = warm_round(_series([*ramp, *flat]))
    assert found is not None and 9 <= found <= 11


def test_a_flat_process_is_warm_from_its_first_judged_round() -> None:
    rng = random.Random(3)
    found = warm_round(_series([1.0 + rng.gauss(0, 0.01) for _ in range(12)]), WarmRule(skip=1))
    assert found == 1


def test_a_process_still_climbing_is_not_warm() -> None:
    rng = random.Random(4)
    climbing = [0.5 + 0.02 * r + rng.gauss(0, 0.005) for r in range(30)]
    assert warm_round(_series(climbing)) is None


def test_too_few_rounds_are_not_judged() -> None:
    assert warm_round(_series([1.0] * 5), WarmRule(window=6, skip=0)) is None


# ------------------------------------------------------------------------- one rule under both


def _lone_and_group(ys: list[float]) -> tuple[int | None, int | None]:
    """The start the lone rule and the group rule find on the same points, with the same
    window (6 points, a trend horizon of 6 points) and nothing skipped: the lone curve one
    point a second of a million requests each (so its counting-noise floor is 0.1%), the
    group's one point a round."""
    lone = SteadyRule(bucket_s=1.0, window_s=6.0)
    curve = [(float(k + 1), y) for k, y in enumerate(ys)]
    counts = [1_000_000] * len(ys)
    group = WarmRule(window=6, skip=0)
    return regime_start(curve, counts, lone), warm_round(list(enumerate(ys)), group)


@pytest.mark.parametrize("seed", range(40))
def test_the_two_designs_differ_only_where_no_trend_shows(seed: int) -> None:
    """A ramp of random length and height, then a plateau of random noise (0.2-4%): where
    the lone rule finds a steady start, the group's finds the same one; where only the
    group's does, the regime it found has a slope interval that holds 0 (its one setting of
    its own: analysis/warmup.py's doc). Either answer missing from the other is a second
    rule."""
    rng = random.Random(seed)
    ramp = rng.randrange(0, 12)
    sd = rng.choice([0.002, 0.01, 0.02, 0.04])
    ys = [0.5 + 0.5 * min(1.0, k / ramp) if ramp else 1.0 for k in range(ramp)]
    ys += [1.0 + rng.gauss(0, sd) for _ in range(rng.randrange(4, 20))]
    lone, group = _lone_and_group(ys)
    if lone is not None:
        assert group == lone
    elif group is not None:
        _, low, high = slope_bounds([float(k) for k in range(group, len(ys))], ys[group:], 0.99)
        assert low <= 0.0 <= high


def test_both_designs_call_a_quiet_plateau_after_a_ramp_steady_at_its_start() -> None:
    ys = [0.5 + 0.05 * k for k in range(10)] + [1.0 + 0.001 * (-1) ** k for k in range(12)]
    assert _lone_and_group(ys) == (10, 10)


def test_a_noisy_plateau_is_steady_for_a_group_and_not_yet_for_a_lone_process() -> None:
    """6 points at 3% noise: no trend shows (the group's rule), but the slope cannot be
    bounded within 5% over 6 points (the lone rule's evidence of flatness)."""
    rng = random.Random(11)
    ys = [1.0 + rng.gauss(0, 0.03) for _ in range(6)]
    assert noise(ys) > 0.01
    lone, group = _lone_and_group(ys)
    assert (lone, group) == (None, 0)
