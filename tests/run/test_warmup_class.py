"""Barrett's classes on labelled synthetic curves, and the warm-up rule on a slow noisy ramp.

The curves carry noise like this machine's: 1-4% per quarter-second point, a slow drift of
up to 2% over a minute, and Poisson counting noise in the warm-up watch. The acceptance
(issue 21) is at least 95% classified as labelled.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from pywebbench.steady import SteadyRule, WarmupEnd, WarmupWatch
from pywebbench.warmup_class import WarmupClass, classify, regimes

Level = Callable[[float], float]


def _noisy(rng: random.Random, level_at: Level, n: int) -> list[float]:
    """``n`` quarter-second points of ``level_at(t)`` with this machine's kind of noise."""
    sd = rng.uniform(0.01, 0.04)
    drift = rng.uniform(0.0, 0.02)
    phase = rng.uniform(0.0, 2 * math.pi)
    return [
        level_at(k * 0.25)
        * (1 + drift * math.sin(phase + 2 * math.pi * k * 0.25 / 60.0))
        * (1 + rng.gauss(0, sd))
        for k in range(n)
    ]


def _labelled(label: WarmupClass, rng: random.Random) -> tuple[list[float], list[float]]:
    """A warm-up curve (6-15 s) and a measured series (3-10 s) of the labelled shape."""
    base = rng.uniform(1_000, 10_000)
    nw, nm = rng.randint(24, 60), rng.randint(12, 40)
    ramp = rng.uniform(1.5, nw * 0.25 - 2.5)  # the change ends >= 2.5 s before measuring
    level_at: Level
    if label == WarmupClass.FLAT:
        level_at = lambda t: base  # noqa: E731
    elif label == WarmupClass.WARMUP:
        low = rng.uniform(0.3, 0.8)
        level_at = lambda t: base * (low + (1 - low) * min(1.0, t / ramp))  # noqa: E731
    elif label == WarmupClass.SLOWDOWN:
        high = rng.uniform(1.15, 1.6)
        level_at = lambda t: base * (high if t < ramp else 1.0)  # noqa: E731
    else:
        kind = rng.choice(["ramp", "step", "saw"])
        rate, period = rng.uniform(0.02, 0.06), rng.uniform(3.0, 6.0)
        step_at = (nw + rng.randint(3, nm - 3)) * 0.25
        step = rng.choice([0.7, 1.3])
        shapes: dict[str, Level] = {
            "ramp": lambda t: base * (1 + rate * t),  # 4-12% per 2 s, to the end
            "step": lambda t: base * (step if t >= step_at else 1.0),  # while measured
            "saw": lambda t: base * (0.7 + 0.3 * ((t % period) / period)),
        }
        level_at = shapes[kind]
    ys = _noisy(rng, level_at, nw + nm)
    return ys[:nw], ys[nw:]


def test_labelled_synthetic_curves_are_classified_as_labelled() -> None:
    rng = random.Random(21)
    wrong = []
    total = 0
    for label in WarmupClass:
        for _ in range(30):
            warmup, measured = _labelled(label, rng)
            got = classify(warmup, measured)
            total += 1
            if got != label:
                wrong.append((label.value, str(got)))
    assert len(wrong) <= 0.05 * total, wrong


def test_equivalent_regimes_merge_and_distinct_ones_do_not() -> None:
    rng = random.Random(4)
    ys = [1000 * (1 + rng.gauss(0, 0.02)) for _ in range(40)]
    ys += [1030 * (1 + rng.gauss(0, 0.02)) for _ in range(40)]  # 3%: the same level
    assert len(regimes(ys)) == 1
    ys += [1500 * (1 + rng.gauss(0, 0.02)) for _ in range(40)]
    found = regimes(ys)
    assert len(found) == 2 and found[1].start == pytest.approx(80, abs=2)


def test_too_short_a_measured_series_is_not_classified() -> None:
    assert classify([1.0] * 20, [1.0, 1.0]) is None


def _watch(rate_at: Level, rule: SteadyRule, seed: int) -> tuple[float | None, float]:
    """(steady start, elapsed) of a watch fed with counts of rate ``rate_at(t)`` under
    counting noise and 1-4% of extra noise per quarter second."""
    rng = random.Random(seed)
    extra = rng.uniform(0.01, 0.04)
    watch = WarmupWatch(rule)
    t, total = 0.0, 0
    while True:
        t += 0.25
        mean = rate_at(t) * 0.25 * (1 + rng.gauss(0, extra))
        total += max(0, int(rng.gauss(mean, math.sqrt(max(mean, 1.0)))))
        verdict = watch.observe(t, total)
        if verdict is not None:
            return verdict.steady_start_s, verdict.elapsed_s


@pytest.mark.parametrize("seed", range(12))
def test_a_slow_noisy_ramp_is_not_called_steady_before_it_ends(seed: int) -> None:
    """10% per 2 s for 10 s (the issue's PyPy cpu curve rose ~8% a second and was called
    steady at 7 s by the trailing-window tests), then flat."""
    ends = 10.0
    rule = SteadyRule(window_s=2.0, cap_s=25.0)
    start, elapsed = _watch(lambda t: 1000.0 * (1 + 0.05 * min(t, ends)), rule, seed)
    assert start is not None, "the plateau after the ramp is steady"
    assert elapsed >= ends, (start, elapsed)


def test_a_ramp_to_the_cap_is_never_steady() -> None:
    rule = SteadyRule(window_s=2.0, cap_s=15.0)
    start, elapsed = _watch(lambda t: 1000.0 * (1 + 0.05 * t), rule, 3)
    assert start is None and elapsed == pytest.approx(15.0, abs=0.3)


def test_the_deep_mode_records_to_the_cap_and_keeps_where_steadiness_began() -> None:
    rule = SteadyRule(window_s=2.0, cap_s=10.0)
    watch = WarmupWatch(rule, stop_when_steady=False)
    t, total, verdict = 0.0, 0, None
    while verdict is None:
        t += 0.25
        total += 2000
        verdict = watch.observe(t, total)
    assert verdict.end == WarmupEnd.STEADY and verdict.steady_start_s == 0.0
    assert verdict.elapsed_s == pytest.approx(10.0) and len(verdict.curve) == 40
