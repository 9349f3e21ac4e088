"""Barrett's classes on labelled synthetic curves, and the warm-up rule on a slow noisy ramp.

The curves carry noise like this machine's: 1-4% per quarter-second point, a slow drift of
up to 2% over a minute, and Poisson counting noise in the warm-up watch. The labelled curves
also carry what the quick studies of 2026-11-28 saw on settled CPython servers: a
half-second blip of 9-23% in half of them, and the measured load's own shift of up to 11%
against the warm-up's level. The acceptance (issue 21) is at least 95% classified as
labelled.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from pywebbench.analysis.warmup import SteadyRule, WarmupEnd, WarmupWatch
from pywebbench.analysis.warmup_class import (
    BAD_INCONSISTENT,
    GOOD_INCONSISTENT,
    LEVEL_TOLERANCE,
    LOAD_START_POINTS,
    MIN_REGIME_POINTS,
    WarmupClass,
    _across_the_seam,
    cell_class,
    classify,
    holds_at_end,
    regimes,
    segments,
    unsettled,
)

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
    # The change ends >= 2.5 s before measuring, and >= 2 s after the load's start (the
    # classes leave its first half second out, and a small change must be held a second).
    ramp = rng.uniform(2.0, nw * 0.25 - 2.5)
    level_at: Level
    if label == WarmupClass.FLAT:
        level_at = lambda t: base  # noqa: E731
    elif label == WarmupClass.WARMUP:
        low = rng.uniform(0.3, 0.8)
        # Its rise after the first second is at least twice the 10% that makes a regime of
        # its own: a smaller one, held for less than a second, reads as flat.
        while low + (1 - low) / ramp > 0.8:
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
    if rng.random() < 0.5:  # a blip: two points 9-23% off
        at = rng.randrange(4, nw + nm - 2)
        bump = rng.choice([-1, 1]) * rng.uniform(0.09, 0.23)
        ys[at : at + 2] = [y * (1 + bump) for y in ys[at : at + 2]]
    seam = rng.uniform(0.89, 1.11)  # the measured load's own level
    return ys[:nw], [y * seam for y in ys[nw:]]


def test_labelled_synthetic_curves_are_classified_as_labelled() -> None:
    """30 of each class. Over seeds 1-9 and 21 (1,200 series) 20 were wrong (1.7%), at most
    4 of 120 in one seed; the classifier before blips and the seam got 234 wrong (19.5%)."""
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


def test_a_blip_is_not_a_regime() -> None:
    """Half a second 15% up (or down) between two stretches of one level: one regime, as
    the settled CPython servers of the 2026-11-28 quick studies should have read."""
    rng = random.Random(5)
    for bump in (1.15, 0.85):
        ys = [1_400 * (1 + rng.gauss(0, 0.02)) for _ in range(40)]
        ys[20:22] = [y * bump for y in ys[20:22]]
        assert len(segments(ys)) == 3, bump  # PELT cuts the blip out
        assert len(regimes(ys)) == 1, bump
        assert classify(ys[:26], ys[26:]) == WarmupClass.FLAT
    # One second away and back is a regime.
    ys = [1_400 * (1 + rng.gauss(0, 0.02)) for _ in range(40)]
    ys[20:24] = [y * 1.2 for y in ys[20:24]]
    assert [r.start for r in regimes(ys)] == [0, 20, 24]


def test_a_short_step_joins_a_regime_only_near_it() -> None:
    """A short segment at the curve's end is a change, not a blip: the measured series
    [1212, 1208, 1212, 1000, 1000, 1000] after a warm-up at ~1,210 falls 17% while it is
    measured. Inside the curve, the same 20% step joins the regime after it."""
    warm = [1_210.0, 1_208, 1_212, 1_209, 1_211, 1_210, 1_208, 1_212, 1_210, 1_209]
    assert classify(warm, [1_212, 1_208, 1_212, 1_000, 1_000, 1_000]) == (
        WarmupClass.NO_STEADY_STATE
    )
    rng = random.Random(8)
    flat = [5_000 * (1 + rng.gauss(0, 0.02)) for _ in range(40)]
    assert classify(flat[:28], flat[28:37] + [4_000.0] * 3) == WarmupClass.NO_STEADY_STATE
    # The step's edge, 4,300: over 10% from both sides, so only the blip rule joins it.
    stepped = flat[:20] + [4_300.0] * 2 + [3_800.0] * 18
    found = regimes(stepped)
    assert [r.start for r in found] == [0, 20] and found[1].level == 3_800.0


def test_a_short_level_is_judged_again_once_its_neighbour_is_joined() -> None:
    """Two short segments in a row: 12,000 then 10,900, between 5,000 and 10,000. The first
    has no regime near it until the second joins the 10,000 after it; then it is that
    step's edge (17% off), not a level of its own."""
    rng = random.Random(3)
    ys = [5_000.0] * 12 + [12_000.0] * 2 + [10_900.0] * 2 + [10_000.0] * 20
    ys = [y * (1 + rng.gauss(0, 0.01)) for y in ys]
    assert [b - a for a, b in segments(ys)] == [12, 2, 2, 20]
    assert [r.start for r in regimes(ys)] == [0, 12]


def test_pypys_first_second_is_its_warmup() -> None:
    """pypy3.9 gunicorn-gthread/raw-wsgi hello (quick study, 2026-11-28): ~2,500-6,600 req/s
    for its first 1.25 s, then ~23,000. With blips, leaving the first second out called it
    flat; a short segment 5x below its neighbour is a level, not a blip."""
    warm = [2529, 2579, 4348, 3550, 6566, 18716, 20678, 24733, 18319, 23561, 24254, 20337]
    warm += [23_500.0] * 20
    measured = [23048, 23442, 20987, 23556, 22880, 20287, 22500, 23100, 23900, 22000]
    assert classify(warm, measured) == WarmupClass.WARMUP
    first, *_, last = regimes(warm[LOAD_START_POINTS:] + measured)
    assert first.end < MIN_REGIME_POINTS and first.level < 0.3 * last.level


def test_a_short_spike_far_off_is_a_level() -> None:
    """The reference server's saw-tooth: a quarter second at ~22,000 every 3 s between
    ~1,100 and ~2,500 req/s. Its spikes are not blips: the curve has no steady state."""
    tooth = [22_612.0, 7_237, 4_495, 3_221, 2_548, 2_076, 1_780, 1_529, 1_338, 1_211, 1_115, 3_000]
    ys = tooth * 4
    assert classify(ys[:30], ys[30:]) == WarmupClass.NO_STEADY_STATE
    spikes = [r for r in regimes(ys) if r.level > 10_000]
    assert len(spikes) == 4 and all(r.end - r.start < MIN_REGIME_POINTS for r in spikes)


def test_the_measured_loads_own_shift_continues_the_warmup() -> None:
    """A settled server measured 11% below its warm-up level (the new load's shift) is flat;
    past 15% it is a slowdown. A warm-up measured 12% below the level it rose to is still a
    warm-up (without the seam: a slowdown)."""
    rng = random.Random(6)
    warm = [12_500 * (1 + rng.gauss(0, 0.01)) for _ in range(16)]
    measured = [11_100 * (1 + rng.gauss(0, 0.01)) for _ in range(12)]
    assert classify(warm, measured) == WarmupClass.FLAT
    assert classify(warm, [y * 12_500 * 0.86 / 11_100 for y in measured]) == WarmupClass.FLAT
    assert classify(warm, [y * 12_500 * 0.83 / 11_100 for y in measured]) == (WarmupClass.SLOWDOWN)
    warm = [6_000.0 if k < 12 else 9_000.0 for k in range(40)]
    assert classify(warm, [7_920.0] * 12) == WarmupClass.WARMUP


def test_the_seam_leaves_a_measured_series_that_changed_level_alone() -> None:
    """Scaling is for a measured series at one level; one that changed level itself, or a
    warm-up whose last regime is too short to say where it ended, is read as it is."""
    warm = [10_000.0] * 30
    stepped = [10_000.0] * 6 + [8_000.0] * 6  # median 9,000: within 15% of 10,000
    assert _across_the_seam(warm, stepped, LEVEL_TOLERANCE) == stepped
    assert _across_the_seam(warm, [9_000.0] * 12, LEVEL_TOLERANCE) == [10_000.0] * 12
    short_end = [10_000.0] * 24 + [14_000.0] * 5  # its last regime: 5 points
    assert _across_the_seam(short_end, [13_000.0] * 12, LEVEL_TOLERANCE) == [13_000.0] * 12
    gap = [9_000.0] * 11 + [math.nan]  # its median is finite, its scaling would not be
    assert _across_the_seam(warm, gap, LEVEL_TOLERANCE)[:11] == [9_000.0] * 11


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


#: The quick profile's PyPy warm-up (30 s cap, its JIT floor) and its one 3 s iteration.
QUICK_PYPY = SteadyRule(window_s=2.0, cap_s=30.0, min_requests=10_000)


@pytest.mark.parametrize("seed", range(20))
def test_a_capped_ramp_still_rising_when_measured_is_no_steady_state(seed: int) -> None:
    """A warm-up that hit its cap on a ramp of 6-12% per 2 s (the rule calls more than 5%
    per 2 s moving), still rising at that rate through the 3 s it was measured, under this
    machine's noise: the measured points must not make it a steady state."""
    rng = random.Random(seed)
    rate = rng.uniform(0.03, 0.06)  # relative, per second
    ys = _noisy(rng, lambda t: 1_000.0 * math.exp(rate * t), 120 + 12)
    found = classify(ys[:120], ys[120:], capped=QUICK_PYPY)
    assert found == WarmupClass.NO_STEADY_STATE, (rate, found)
    assert unsettled("cap", found.value)


def test_a_capped_curve_that_settled_before_the_cap_is_mostly_a_steady_state() -> None:
    """The JIT raised the level 3 s before the cap: the rule needs about 6 s of a new level
    to bound its slope under this noise, so the warm-up reached its cap; with the 3 s
    measured at the new level it holds, and the class says where it settled. At 4% noise a
    point 6 s is not always enough: 26 of these 30 series pass (the rest stay no steady
    state, the cautious side)."""
    found = []
    for seed in range(30):
        rng = random.Random(seed)
        ys = _noisy(rng, lambda t: 3_000.0 * (0.5 if t < 27.0 else 1.0), 120 + 12)
        found.append(classify(ys[:120], ys[120:], capped=QUICK_PYPY))
    assert set(found) <= {WarmupClass.WARMUP, WarmupClass.NO_STEADY_STATE}
    assert found.count(WarmupClass.WARMUP) >= 24, found


def test_the_second_look_confirms_as_the_warmup_does() -> None:
    """``rule.confirm`` judgements, the last at the last point, must all pass: at the first
    length where one judgement passes, the two before it did not, so it is not confirmed."""
    once = SteadyRule(window_s=2.0, confirm=1)
    rng = random.Random(7)
    flat = [3_000.0 * (1 + rng.gauss(0, 0.01)) for _ in range(60)]
    first = next(k for k in range(1, 61) if holds_at_end(flat[:k], [], once))
    assert not holds_at_end(flat[:first], [], SteadyRule(window_s=2.0))  # confirm = 3
    assert holds_at_end(flat, [], SteadyRule(window_s=2.0))
    assert not holds_at_end(flat, [], SteadyRule(window_s=2.0, min_requests=10**9))


def test_a_capped_curve_short_of_the_jit_floor_is_no_steady_state() -> None:
    """Flat at interpreter speed for the whole cap: PyPy may not have compiled the path yet."""
    rng = random.Random(2)
    ys = _noisy(rng, lambda t: 200.0, 120 + 12)
    assert classify(ys[:120], ys[120:]) == WarmupClass.FLAT
    assert classify(ys[:120], ys[120:], capped=QUICK_PYPY) == WarmupClass.NO_STEADY_STATE


def test_unsettled_is_a_capped_warmup_without_a_steady_class() -> None:
    assert unsettled("cap", "no steady state") and unsettled("cap", None)
    assert not any(unsettled("cap", c) for c in ("flat", "warm-up", "slowdown"))
    assert not unsettled("steady", "no steady state") and not unsettled(None, None)


def test_a_cells_classification_is_barretts() -> None:
    """As softdevteam/warmup_stats reports a pair: one class, or good or bad inconsistent."""
    assert cell_class(["warm-up", "warm-up", "warm-up"]) == "warm-up"
    assert cell_class(["flat", "warm-up", "flat"]) == GOOD_INCONSISTENT
    assert cell_class(["flat", "slowdown"]) == BAD_INCONSISTENT
    assert cell_class(["warm-up", "no steady state"]) == BAD_INCONSISTENT
    with pytest.raises(ValueError):
        cell_class([])
