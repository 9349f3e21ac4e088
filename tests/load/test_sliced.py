"""Interleaved slices of the engine (docs/load-engine.md, "Interleaved slices") against the
reference servers on loopback: targets of their own slice lengths and first touches (a PyPy
process beside CPython ones wants longer slices and a longer touch).

A slice's ``duration_s`` is from the instant its thread noticed the counted part began to the
planned end (a thread that notices the end late still ends the slice there), so it is never
longer than planned, and shorter by how late its thread woke at the start: a median of
0.09 ms here, 14.4 ms at worst in 3,566 waits beside other test runs, at most twice that at
50% steal (tests/load/test_ray_agents.py's docstring). Each slice is asked to be within
:data:`LATE_S` of its target's length (3.5 times that worst), each target's median within
:data:`MEDIAN_S`. The engine's threads run to ``planned_s() + 1`` s (its time bound: the
last slice ends at ``planned_s()``, then every thread idles), so the run's elapsed time is
that within :data:`ELAPSED_S` (the threads' start and the binding's 5 ms polls).
"""

from __future__ import annotations

import json
import statistics

import pytest
from pywebbench.load import LoadSpec
from pywebbench.load.sliced import SlicePlan, SliceProgress, run_sliced
from pywebbench.refserver import RefServer

LATE_S = 0.1
MEDIAN_S = 0.02
ELAPSED_S = 0.25
#: The engine's threads run this long after the planned end (slices.rs, ``start``).
TAIL_S = 1.0


def _plan(a: RefServer, b: RefServer, **kw: object) -> SlicePlan:
    fields: dict[str, object] = {
        # load.warmup_s and slice_s are the fallbacks, unused with per-target values
        "load": LoadSpec(url=a.url + "/hello", connections=2, warmup_s=1.5, cpus=[1]),
        "targets": [a.url, b.url],
        "slice_s": 0.05,
        "slice_s_by_target": [0.15, 0.45],
        "warmup_s_by_target": [0.2, 0.6],
        "settle_s": 0.05,
        "rounds": 3,
        "seed": 5,
    }
    fields.update(kw)
    return SlicePlan.model_validate(fields)


def test_each_target_gets_its_own_slice_length_and_first_touch(
    refserver: RefServer, refserver_1ms: RefServer
) -> None:
    plan = _plan(refserver, refserver_1ms)
    assert plan.planned_s() == pytest.approx(0.8 + 3 * (0.05 + 0.15 + 0.05 + 0.45))
    planned_seen: list[float] = []

    def progress(p: SliceProgress) -> None:
        planned_seen.append(p.planned_s)

    result = run_sliced(plan, progress, interval_s=0.2)
    assert not result.interrupted and not result.stopped_early
    assert result.spec["slice_s_by_target"] == [0.15, 0.45]
    assert result.spec["warmup_s_by_target"] == [0.2, 0.6]
    assert planned_seen and set(planned_seen) == {plan.planned_s()}, "the engine's own sum"
    assert sorted((s.round, s.target) for s in result.slices) == [
        (r, t) for r in range(3) for t in range(2)
    ]
    for t, length in enumerate(plan.slice_s_by_target):
        mine = [s.duration_s for s in result.slices if s.target == t]
        for d in mine:
            assert length - LATE_S <= d <= length + 1e-6, (t, mine)
        assert abs(statistics.median(mine) - length) <= MEDIAN_S, (t, mine)
    assert all(s.requests > 0 for s in result.slices)
    # The rounds follow each other without gaps: from the first counted instant to the last
    # end, every slice and settle but the first settle.
    first, last = result.slices[0], result.slices[-1]
    rounds_s = plan.planned_s() - sum(plan.warmup_s_by_target)
    assert last.ended_at - first.started_at == pytest.approx(rounds_s - plan.settle_s, abs=LATE_S)
    # The first touches are in the run's time: it lasts the planned seconds and the tail.
    assert abs(result.elapsed_s - (plan.planned_s() + TAIL_S)) <= ELAPSED_S, result.elapsed_s


def test_per_target_lengths_are_checked_by_the_engine(
    refserver: RefServer, refserver_1ms: RefServer
) -> None:
    with pytest.raises(ValueError, match=r"^slice_s_by_target: 3 values for 2 targets$"):
        run_sliced(_plan(refserver, refserver_1ms, slice_s_by_target=[0.15, 0.45, 0.2]))
    with pytest.raises(ValueError, match=r"^slice_s_by_target: 0\.01 for target 1: "):
        run_sliced(_plan(refserver, refserver_1ms, slice_s_by_target=[0.15, 0.01]))
    with pytest.raises(ValueError, match=r"^warmup_s_by_target: 1 values for 2 targets$"):
        run_sliced(_plan(refserver, refserver_1ms, warmup_s_by_target=[3.0]))
    with pytest.raises(ValueError, match=r"^warmup_s_by_target: -1 for target 0: "):
        run_sliced(_plan(refserver, refserver_1ms, warmup_s_by_target=[-1.0, 0.5]))


def test_the_plan_without_per_target_lengths_is_as_before() -> None:
    plan = SlicePlan(
        load=LoadSpec(url="http://127.0.0.1:1/", warmup_s=0.5),
        targets=["http://127.0.0.1:1/", "http://127.0.0.1:2/", "http://127.0.0.1:3/"],
        slice_s=0.25,
        rounds=4,
    )
    assert plan.planned_s() == pytest.approx(3 * 0.5 + 4 * 3 * (0.2 + 0.25))
    doc = json.loads(plan.to_json())
    assert doc["slice_s_by_target"] == [] and doc["warmup_s_by_target"] == []
    assert doc["load"]["warmup_s"] == 0.5
    assert [plan.slice_s_of(t) for t in range(3)] == [0.25] * 3
    assert [plan.warmup_s_of(t) for t in range(3)] == [0.5] * 3
