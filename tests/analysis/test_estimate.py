"""The paired ratio and the interference rule, on slices made here (no server needed)."""

from __future__ import annotations

import math
import random

from pywebbench.analysis.estimate import (
    half_width,
    narrow_enough,
    pair_rounds,
    paired_ratio,
    processes_kept,
)
from pywebbench.load.sliced import SliceStats
from pywebbench.meter.slice_interference import CoreAccounting


def _slice(
    index: int, rnd: int, target: int, rps: float, start: float = 0.0, duration: float = 1.0
) -> SliceStats:
    return SliceStats(
        index=index,
        round=rnd,
        target=target,
        requests=int(rps),
        errors=0,
        timeouts=0,
        duration_s=duration,
        rps=rps,
        started_at=start,
        ended_at=start + duration,
        p50_us=1000,
        p99_us=2000,
    )


def _run(ratio: float, rounds: int, drift: float, noise: float, seed: int) -> list[SliceStats]:
    """Rounds of BASE/CHANGE slices on a machine whose speed drifts by ``drift`` per round
    and jitters by ``noise`` per slice."""
    rng = random.Random(seed)
    out = []
    speed = 1000.0
    for r in range(rounds):
        speed *= 1.0 + rng.uniform(-drift, drift)
        order = [0, 1] if rng.random() < 0.5 else [1, 0]
        for t in order:
            rps = speed * (ratio if t == 1 else 1.0) * (1.0 + rng.gauss(0, noise))
            out.append(_slice(len(out), r, t, rps, start=float(len(out))))
    return out


def test_the_pairing_cancels_drift_and_finds_the_ratio() -> None:
    slices = _run(0.97, 60, drift=0.05, noise=0.01, seed=1)
    est = paired_ratio(pair_rounds(slices))
    assert est is not None
    assert est.low < 0.97 < est.high
    assert est.high < 1.0
    assert half_width(est) < 0.01


def test_an_aa_interval_covers_one() -> None:
    covered = 0
    for seed in range(40):
        est = paired_ratio(pair_rounds(_run(1.0, 30, drift=0.05, noise=0.02, seed=seed)))
        assert est is not None
        covered += est.low <= 1.0 <= est.high
    assert covered >= 34  # 95% intervals: about 38 of 40


def _processes_run(
    ratio: float, processes: int, rounds: int, spread: float, noise: float, seed: int
) -> list[SliceStats]:
    """Rounds of ``processes`` BASE and CHANGE server processes (targets ``2k`` and
    ``2k + 1``); each process runs at its own level, ``spread`` (log sd) about its side's,
    as two processes of one app do; the machine drifts 5% a round at most."""
    rng = random.Random(seed)
    level = [rng.gauss(0, spread) for _ in range(2 * processes)]
    out = []
    speed = 1000.0
    for r in range(rounds):
        speed *= 1.0 + rng.uniform(-0.05, 0.05)
        order = list(range(2 * processes))
        rng.shuffle(order)
        for t in order:
            side = ratio if t % 2 == 1 else 1.0
            rps = speed * side * math.exp(level[t] + rng.gauss(0, noise))
            out.append(_slice(len(out), r, t, rps, start=float(len(out))))
    return out


def test_slices_pair_process_k_of_base_with_process_k_of_change() -> None:
    slices = _processes_run(1.0, 3, 2, spread=0.0, noise=0.0, seed=0)
    pairs = pair_rounds(slices, processes=3)
    assert [(p.round, p.process) for p in pairs] == [(r, k) for r in (0, 1) for k in range(3)]
    assert all(p.change.target == p.base.target + 1 == 2 * p.process + 1 for p in pairs)


def test_the_fit_over_processes_finds_the_ratio() -> None:
    exact = paired_ratio(
        pair_rounds(_processes_run(0.97, 4, 10, 0.0, 0.0, 1), processes=4), processes=4
    )
    assert exact is not None and math.isclose(exact.ratio, 0.97, rel_tol=1e-9)
    noisy = _processes_run(0.97, 4, 40, spread=0.005, noise=0.02, seed=2)
    pairs = pair_rounds(noisy, processes=4, drop=lambda b, c: "x" if b.round % 5 == 0 else None)
    est = paired_ratio(pairs, processes=4)
    assert est is not None and est.low < 0.97 < est.high < 1.0


def test_no_interval_over_processes_that_cannot_be_compared() -> None:
    """Kept pairs from one process only: no interval (never the narrower one over rounds);
    processes that share no kept round: their levels cannot be compared, no interval."""
    slices = _processes_run(1.0, 4, 10, spread=0.02, noise=0.02, seed=5)
    one = pair_rounds(slices, processes=4, drop=lambda b, c: None if b.target == 0 else "x")
    assert processes_kept(one) == 1
    assert paired_ratio(one, processes=4) is None
    assert paired_ratio(one) is not None  # (what --processes 1 would give)
    apart = pair_rounds(
        slices, processes=4, drop=lambda b, c: None if b.target // 2 == b.round % 4 else "x"
    )
    assert processes_kept(apart) == 4
    assert paired_ratio(apart, processes=4) is None


def test_an_interval_over_processes_holds_their_spread_where_rounds_alone_do_not() -> None:
    """Processes 2% apart, slices 2% noisy: A/A intervals over 4 processes a side cover 1 in
    95.4% of 1,000 simulated runs, so 180 of 200 fails by chance about once in 2,500
    suites; intervals over rounds with one process a side, as --processes 1 gives, covered
    it in 14%."""
    over_processes = over_rounds = 0
    for seed in range(200):
        slices = _processes_run(1.0, 4, 30, 0.02, 0.02, seed)
        four = paired_ratio(pair_rounds(slices, processes=4), processes=4)
        one = paired_ratio(pair_rounds(_processes_run(1.0, 1, 120, 0.02, 0.02, seed)))
        assert four is not None and one is not None
        over_processes += four.low <= 1.0 <= four.high
        over_rounds += one.low <= 1.0 <= one.high
    assert over_processes >= 180
    assert over_rounds <= 110


def test_incomplete_rounds_and_empty_slices_are_not_pairs() -> None:
    slices = [_slice(0, 0, 0, 100.0), _slice(1, 0, 1, 90.0), _slice(2, 1, 1, 95.0)]
    slices.append(_slice(3, 2, 0, 0.0))
    slices.append(_slice(4, 2, 1, 100.0))
    pairs = pair_rounds(slices)
    assert [p.round for p in pairs] == [0, 2]
    assert pairs[0].dropped is None
    assert pairs[1].dropped == "a slice completed no request"
    assert paired_ratio(pairs) is None  # one kept pair: no interval


def test_the_stop_rule_needs_rounds_and_width() -> None:
    slices = _run(1.0, 6, drift=0.0, noise=0.001, seed=3)
    est = paired_ratio(pair_rounds(slices))
    assert est is not None and half_width(est) < 0.01
    assert not narrow_enough(est, 6, 0.01)  # too few rounds to trust
    assert narrow_enough(est, 8, 0.01)
    assert not narrow_enough(est, 8, half_width(est) / 2)


def test_drop_rule_removes_the_pair() -> None:
    slices = _run(1.0, 10, drift=0.0, noise=0.01, seed=4)
    pairs = pair_rounds(slices, drop=lambda b, c: "noisy" if b.round == 3 else None)
    assert [p.round for p in pairs if p.dropped] == [3]


def test_other_share_is_busy_minus_own_over_the_window() -> None:
    acc = CoreAccounting(cores=[0], pids=[])
    for t, busy, own in [(0.0, 0.0, 0.0), (1.0, 0.9, 0.6), (2.0, 1.8, 1.5), (3.0, 2.0, 1.6)]:
        acc.at.append(t)
        acc.busy_s.append(busy)
        acc.own_s.append(own)
        acc.tree_s.append([own])
    assert math.isclose(acc.other_share(0.0, 1.0) or 0, 0.3)
    assert math.isclose(acc.other_share(1.0, 2.0) or 0, 0.0)
    assert acc.other_share(1.2, 1.8) is None  # no two samples inside
    assert math.isclose(acc.tree_share(0, 0.0, 2.0) or 0, 0.75)


def test_a_difference_the_clock_ticks_cannot_resolve_drops_nothing() -> None:
    """Over a 0.25-s span the kernel's tick-counted CPU time is known to two ticks at each
    end (8% of the span at 100 ticks/s): a 10% difference between two such slices is within
    that rounding, a 40% one is not."""
    tick = 1 / __import__("os").sysconf("SC_CLK_TCK")
    acc = CoreAccounting(cores=[0], pids=[])
    busy = 0.0
    for t, other in [(0.0, 0.0), (0.25, 0.10), (0.5, 0.0), (0.75, 0.0), (1.0, 0.40)]:
        busy += other * 0.25
        acc.at.append(t)
        acc.busy_s.append(busy)
        acc.own_s.append(0.0)
        acc.tree_s.append([0.0])
    read = acc.other_share_read(0.0, 0.25)
    assert read is not None and math.isclose(read[0], 0.10)
    assert math.isclose(read[1], 2 * tick / 0.25)


def test_the_default_budget_is_two_rounds_when_instructions_are_judged() -> None:
    """--figure instructions judges counts made after the timed run, whose time ratio is only
    reported beside them: by default it gets the least budget that holds two rounds, not the
    three minutes the other figures get (trials of ab_detect.py --figure instructions took
    105-136 s with 65 s of timed load; 180 s would take them past 3 minutes)."""
    from pywebbench.commands.ab import _check_numbers

    given = {
        "ci_width": 0.01, "level": 0.95, "min_change": 0.02, "slice_s": None, "settle": None,
        "warmup": 3.0, "processes": 4, "budget": None, "interference_limit": 0.05,
        "fmt": "json", "output": None, "figure": "instructions",
    }  # fmt: skip
    counted = dict(given)
    _check_numbers(counted)
    assert counted["budget"] == 64.0  # 8 x (3 + 2 x (2 + 0.5)), --warmup 3
    timed = {**given, "figure": "rps"}
    _check_numbers(timed)
    assert timed["budget"] == 180.0
    many = {**given, "figure": "cpu", "processes": 16}  # 32 x 8 s = 256
    _check_numbers(many)
    assert many["budget"] == 256.0  # not a refusal of a --budget nobody gave
    mine = {**given, "budget": 90.0}
    _check_numbers(mine)
    assert mine["budget"] == 90.0


def test_the_stop_rule_judges_no_less_than_the_slices_noise() -> None:
    """Two processes a side whose slices are noisy by +-2% in a pattern that leaves each
    process's mean exactly on its side's level: the processes' spread is 0 and the reported
    interval has no width, but the one the stop rule judges (``stopping``) is as wide as the
    slices' noise makes it, so the run does not stop on it."""
    slices = []
    for r in range(8):
        for t in range(4):  # BASE process 0, CHANGE 0, BASE 1, CHANGE 1
            rps = 1000.0 * (0.9 if t % 2 else 1.0) * math.exp(0.02 * (-1) ** (r + t // 2))
            slices.append(_slice(len(slices), r, t, rps))
    pairs = pair_rounds(slices, processes=2)
    plain = paired_ratio(pairs, processes=2)
    judged = paired_ratio(pairs, processes=2, stopping=True)
    assert plain is not None and judged is not None
    assert math.isclose(plain.ratio, 0.9) and math.isclose(judged.ratio, 0.9)
    assert half_width(plain) < 1e-9 and narrow_enough(plain, 8, 0.01)
    assert half_width(judged) > 0.01 and not narrow_enough(judged, 8, 0.01)
