"""The rotation shared by a study's interleaved group and ``ab``: the sizing of its slices,
its interference rule, and ``ab``'s use of both."""

from __future__ import annotations

import os

from pywebbench.ab.session import AbOptions, least_budget_s, sized
from pywebbench.load.sliced import SliceStats
from pywebbench.meter.slice_interference import CoreAccounting
from pywebbench.run.rotation import (
    FORESEE_AFTER_S,
    LEAST_ROUNDS,
    burst_rule,
    idle_figures,
    slots,
    will_pass,
)


def _slice(index: int, start: float, duration: float, rnd: int = 0) -> SliceStats:
    return SliceStats(
        index=index, round=rnd, target=index, requests=100, errors=0, timeouts=0,
        duration_s=duration, rps=100 / duration, started_at=start, ended_at=start + duration,
        p50_us=1000, p99_us=2000,
    )  # fmt: skip


def _accounting(samples: list[tuple[float, float]], step: float) -> CoreAccounting:
    """One core whose other processes took each sample's share of it over the ``step`` s
    before it."""
    acc = CoreAccounting(cores=[0], pids=[])
    busy = 0.0
    for t, other in samples:
        busy += other * step
        acc.at.append(t)
        acc.busy_s.append(busy)
        acc.own_s.append(0.0)
        acc.tree_s.append([0.0])
    return acc


def _seconds(*others: float) -> tuple[CoreAccounting, list[SliceStats]]:
    """A round of 1-s slices, others taking each given share of the core in its slice."""
    samples = [(0.0, 0.0)] + [(i + 1.0, x) for i, x in enumerate(others)]
    return _accounting(samples, 1.0), [_slice(i, float(i), 1.0) for i in range(len(others))]


def test_a_burst_beyond_the_rounds_usual_share_drops_the_slice() -> None:
    """Others took 30%, 0% and 10% of the core in a round's three 1-s slices: the round's
    usual share is the median, 10%, and over 1 s the clock ticks resolve 2% (2 ticks at 100
    a second). The first slice is 20% beyond the usual share: dropped at a limit of 10%,
    kept at 20%; the others are not beyond it."""
    assert os.sysconf("SC_CLK_TCK") == 100
    acc, slices = _seconds(0.3, 0.0, 0.1)
    strict = burst_rule(acc, None, 0.1, slices)
    assert (strict(slices[0]) or "").startswith("interference burst: other processes took 30%")
    assert strict(slices[1]) is None and strict(slices[2]) is None
    assert burst_rule(acc, None, 0.2, slices)(slices[0]) is None
    assert burst_rule(None, None, 0.0, slices)(slices[0]) is None  # not sampled: none


def test_what_hit_the_whole_round_is_not_a_burst() -> None:
    """A neighbour that took 40% of the core through a whole round slowed every process of
    it alike (the round's effect takes it out): nothing is dropped. In a round of two slices
    the usual share is the lower one, so a burst on one of them is judged against the
    other, as the pair's two slices are compared."""
    acc, slices = _seconds(0.4, 0.4, 0.4)
    rule = burst_rule(acc, None, 0.05, slices)
    assert [rule(s) for s in slices] == [None, None, None]
    acc, pair = _seconds(0.0, 0.4)
    rule = burst_rule(acc, None, 0.05, pair)
    assert rule(pair[0]) is None and "took 40%" in (rule(pair[1]) or "")


def test_a_difference_the_clock_ticks_cannot_resolve_drops_nothing() -> None:
    """Over a 0.25-s slice the kernel's tick-counted CPU time is known to two ticks at each
    end (8% of the span at 100 ticks/s): 10% against a usual 0-10% is nothing, 40% is a
    burst."""
    samples = [(0.0, 0.0), (0.25, 0.10), (0.5, 0.0), (0.75, 0.0), (1.0, 0.40)]
    slices = [_slice(0, 0.0, 0.25), _slice(1, 0.25, 0.25), _slice(2, 0.75, 0.25)]
    rule = burst_rule(_accounting(samples, step=0.25), None, 0.05, slices)
    assert rule(slices[0]) is None and rule(slices[1]) is None
    assert "took 40%" in (rule(slices[2]) or "")


def test_a_generator_burst_drops_the_slice_too() -> None:
    quiet, slices = _seconds(0.0, 0.0, 0.0)
    generator, _ = _seconds(0.5, 0.0, 0.0)
    why = burst_rule(quiet, generator, 0.05, slices)(slices[0])
    assert why is not None and why.endswith("of the generator cores")


def test_ab_sizes_its_slices_as_a_group_does_and_fills_the_budget_with_rounds() -> None:
    """Two sides of four processes at 6,400 req/s over 64 connections: settle 0.05 s (one
    response time, 0.01 s, floored), slice 0.25 s (the shortest); at 1,000 req/s the slice
    holds 10 responses per connection (0.64 s) and the settle one (0.064 s). A first touch of
    0.5 s a process on CPython, 3 s on PyPy (whose slices are 0.5 s at least); the rounds
    fill what the first touches leave."""
    options, rounds = sized(AbOptions(budget_s=100.0), 6_400.0, 64, jit=False)
    assert (options.slice_s, options.settle_s, options.warmup_s) == (0.25, 0.05, 0.5)
    assert rounds == int((100.0 - 8 * 0.5) / (8 * (0.25 + 0.05)))
    slow, _ = sized(AbOptions(budget_s=100.0), 1_000.0, 64, jit=False)
    assert (slow.slice_s, slow.settle_s) == (0.64, 0.064)
    pypy, _ = sized(AbOptions(budget_s=100.0), 6_400.0, 64, jit=True)
    assert (pypy.slice_s, pypy.warmup_s) == (0.5, 3.0)
    given, _ = sized(AbOptions(slice_s=1.0, settle_s=0.2, warmup_s=2.0), 6_400.0, 64, jit=False)
    assert (given.slice_s, given.settle_s, given.warmup_s) == (1.0, 0.2, 2.0)  # unchanged
    tight, rounds = sized(AbOptions(budget_s=1.0), 6_400.0, 64, jit=False)
    assert rounds == 2  # never fewer than two


def test_the_least_budget_holds_two_rounds_of_the_longest_slices() -> None:
    least = least_budget_s(4, None)
    assert least == 8 * (0.5 + 2 * (2.0 + 0.5))  # CPython's first touch, 2-s slices
    slowest, rounds = sized(AbOptions(budget_s=least), 32.0, 64, jit=False)
    assert (slowest.slice_s, slowest.settle_s, rounds) == (2.0, 0.5, 2)
    assert least_budget_s(1, 1.0, slice_s=0.5, settle_s=0.0) == 2 * (1.0 + 2 * 0.5)


def test_the_settle_drains_the_slowest_stack_and_the_rounds_fill_the_budget() -> None:
    """A slice's settle is one response time of the slowest probed stack (64 connections at
    1,000 req/s: 0.064 s), floored at 0.05 s and capped at 0.5 s; the slice is 0.25 s at least
    (0.5 s on PyPy) and twice the settle; the rounds fill the budget, 20 at least."""
    slice_s, settle, rounds = slots(18, 120.0, 64, 1000.0)
    assert (slice_s, settle) == (0.25, 0.064)
    assert rounds == int(120.0 / (18 * (0.25 + 0.064)))
    assert slots(18, 120.0, 64, 50_000.0)[1] == 0.05  # a fast stack: the floor
    assert slots(18, 600.0, 64, 64.0)[:2] == (1.0, 0.5)  # 1 s per response: the cap, 2x
    assert slots(18, 120.0, 64, 1000.0, shortest=0.5)[0] == 0.5
    assert slots(18, 1.0, 64, 1000.0)[2] == LEAST_ROUNDS
    # a budget that would not hold 20 rounds of 1-s slices and 0.5-s settles: one response
    # time a slice (0.5 s) before the 20 rounds exceed it
    assert slots(18, 246.0, 64, 128.0, shortest=0.5)[:2] == (0.5, 0.5)
    assert slots(18, 600.0, 64, 128.0, shortest=0.5)[:2] == (1.0, 0.5)


def test_a_slices_generator_verdict_is_stored_and_a_stack_needs_most_of_its_slices() -> None:
    """The engine's per-slice verdict travels to the slice's iteration; a group's stack is
    generator-bound when more than half its measured slices were, not for one burst."""
    from pywebbench.run.rows import slice_iteration, slices_generator_bound

    bound = _slice(0, 0.0, 0.25).model_copy(
        update={"generator_bound": True, "generator_cpu_s": 0.24, "generator_wait_s": 0.0}
    )
    free = _slice(1, 0.25, 0.25)
    assert slice_iteration(bound, cell_id=1, dropped=None).generator_bound
    assert not slice_iteration(free, cell_id=1, dropped=None).generator_bound
    one_in_five = [slice_iteration(s, 1, None) for s in [bound, free, free, free, free]]
    assert not slices_generator_bound(one_in_five)
    three_in_five = [slice_iteration(s, 1, None) for s in [bound, bound, bound, free, free]]
    assert slices_generator_bound(three_in_five)
    assert not slices_generator_bound([])


def test_each_trees_idle_cost_is_its_share_of_the_core_during_the_others_slices() -> None:
    """Three trees, one 1-s slice each: tree 2 spins 3% of the core all along (an event
    loop's timers), the others idle at nothing. Each tree's idle cost is read over the other
    two's slices only: 3% for tree 2 (twice), none for the others; its own slice is its
    load, not its idle."""
    acc = CoreAccounting(cores=[0], pids=[1, 2, 3])
    for t in range(4):
        acc.at.append(float(t))
        acc.busy_s.append(float(t))
        acc.own_s.append(float(t))
        busy = [1.0 if t >= 1 else 0.0, (1.0 if t >= 2 else 0.0), 0.0]
        acc.tree_s.append([busy[0], busy[1], 0.03 * t + (0.97 if t >= 3 else 0.0)])
    slices = [_slice(i, float(i), 1.0) for i in range(3)]
    cost = idle_figures(slices, acc)[1]
    assert [round(x, 3) for x in cost[2]] == [0.03, 0.03]
    assert cost[0] == [0.0, 0.0] and cost[1] == [0.0, 0.0]


MiB = 2**20


def _growing(
    seconds: float, mib_a_second: float, start_mib: float = 300.0
) -> list[tuple[float, int]]:
    """A memory sample a second over ``seconds``, growing by ``mib_a_second`` with a 10-MiB
    staircase's jitter (PyPy's arenas)."""
    return [
        (1000.0 + t, int((start_mib + mib_a_second * t + 10 * (t % 3 == 0)) * MiB))
        for t in range(int(seconds) + 1)
    ]


def test_a_process_bound_to_pass_its_budget_below_its_collectors_floor_is_foreseen() -> None:
    """Granian's PyPy processes on a host whose PyPy collects nothing below 1.9 GiB grew 5-9
    MB per 1,000 requests and passed a 1,004-MiB budget in the rounds' last minute, having
    held every round's windows until then. Growing 5 MiB a second at 500 MiB with 120 s of
    rounds left, one is bound to pass 1,004 MiB: said once 30 s of samples show it."""
    floor = 1.9 * 2**30
    memory = _growing(FORESEE_AFTER_S + 10, 5.0)
    now = memory[-1][0]
    why = will_pass(memory, 1004 * MiB, floor, end_at=now + 120)
    assert why is not None and why.startswith("memory budget: 500 MiB and growing ")
    assert "nothing collected below 1.9 GiB" in why and "memory budget of 1,004 MiB" in why
    # too few seconds of samples to say yet
    assert will_pass(memory[:20], 1004 * MiB, floor, end_at=now + 120) is None
    # the rounds end before it gets there (500 + 5 x 60 s < 1,004)
    assert will_pass(memory, 1004 * MiB, floor, end_at=now + 60) is None
    # a collector that collects below the budget may stop the growth; none known: neither
    assert will_pass(memory, 1004 * MiB, 900 * MiB, end_at=now + 120) is None
    assert will_pass(memory, 1004 * MiB, None, end_at=now + 120) is None
    # growth that stopped in the later half (JIT warm-up's): not foreseen
    flat = memory + [(now + t, memory[-1][1]) for t in range(1, 60)]
    assert will_pass(flat, 1004 * MiB, floor, end_at=flat[-1][0] + 1000) is None


def test_a_long_series_is_thinned_before_its_growth_is_fitted() -> None:
    """Ten minutes of samples (600) fitted on at most FORESEE_POINTS of the later half: the
    same verdicts as on a short series, growing or flat."""
    floor = 1.9 * 2**30
    memory = _growing(600, 0.5, start_mib=200.0)  # 500 MiB now, +0.5 MiB a second
    now = memory[-1][0]
    assert will_pass(memory, 1004 * MiB, floor, end_at=now + 1200) is not None
    assert will_pass(memory, 1004 * MiB, floor, end_at=now + 600) is None
    flat = [(t, 500 * MiB + (t % 3 == 0) * 10 * MiB) for t, _ in memory]
    assert will_pass(flat, 1004 * MiB, floor, end_at=now + 10_000) is None
