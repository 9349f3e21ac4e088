"""Slices at one core speed (meter/slice_speed.py), on slices and probe readings made here."""

from __future__ import annotations

import random

from pywebbench.analysis.estimate import half_width, pair_rounds, paired_ratio
from pywebbench.load.sliced import SliceStats
from pywebbench.meter.core_speed import CoreSpeedProbe
from pywebbench.meter.slice_speed import SliceSpeeds, at_one_speed


def _slice(index: int, rnd: int, target: int, rps: float) -> SliceStats:
    start = float(index)
    return SliceStats(
        index=index, round=rnd, target=target, requests=int(rps), errors=0, timeouts=0,
        duration_s=1.0, rps=rps, started_at=start, ended_at=start + 1.0, p50_us=1, p99_us=2,
    )  # fmt: skip


def _machine(ratio: float, rounds: int, seed: int) -> tuple[list[SliceStats], SliceSpeeds]:
    """A core whose speed jumps between two levels 1.45x apart (as the host's here do), each
    slice's requests/s following it (elasticity 1) with 1% of its own noise; the probe reads
    the speed ten times a slice with 0.5% noise."""
    rng = random.Random(seed)
    probe = CoreSpeedProbe([0])
    slices: list[SliceStats] = []
    speed = 1.0
    for r in range(rounds):
        for t in rng.sample([0, 1], 2):
            if rng.random() < 0.3:
                speed = 1.45 if speed == 1.0 else 1.0
            i = len(slices)
            rps = 1000 * speed * (ratio if t == 1 else 1.0) * (1 + rng.gauss(0, 0.01))
            slices.append(_slice(i, r, t, rps))
            probe.readings += [(i + k / 10 + 0.05, 5e6 * speed * (1 + rng.gauss(0, 0.005)))
                               for k in range(10)]  # fmt: skip
    return slices, SliceSpeeds(probe, offset=0.0)


def test_speed_steps_between_the_slices_of_a_round_are_taken_out() -> None:
    slices, speeds = _machine(0.97, 40, seed=3)
    raw = paired_ratio(pair_rounds(slices))
    scaled = at_one_speed(slices, speeds)
    est = paired_ratio(pair_rounds(scaled.slices))
    assert raw is not None and est is not None
    assert half_width(raw) > 0.05  # the steps make the raw pairs useless at 3%
    assert half_width(est) < 0.01 and est.low < 0.97 < est.high
    assert 0.9 < scaled.elasticity < 1.1  # fitted on the run's own slices
    assert scaled.span() is not None and scaled.span()[1] / scaled.span()[0] > 1.4  # type: ignore[index]


def test_not_probed_or_a_slice_without_reading_leaves_every_slice_as_measured() -> None:
    slices, speeds = _machine(1.0, 10, seed=1)
    assert at_one_speed(slices, None).slices == slices
    speeds.probe.readings = [r for r in speeds.probe.readings if not 4 <= r[0] < 5]
    unscaled = at_one_speed(slices, speeds)
    assert unscaled.reference is None and unscaled.slices == slices
