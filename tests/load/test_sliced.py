"""Interleaved slices of the engine (docs/load-engine.md, "Interleaved slices") against the
reference servers on loopback: targets of their own slice lengths and first touches (a PyPy
process beside CPython ones wants longer slices and a longer touch), a connection per request
and N requests per connection (counted by the servers themselves), and, against small servers
on unix sockets (conftest.py: the reference server listens on TCP only), targets of one URL
each on its own socket.

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
from collections.abc import Callable
from typing import Any

import pytest
from pwbtest import UnixHttpServer
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


def test_each_window_starts_with_the_settle_of_the_target_before_it(
    refserver: RefServer, refserver_1ms: RefServer
) -> None:
    """Target 1's settle is 0.3 s, target 0's 0.05 s: the gap between one slice's end and
    the next slice's counted start is the settle of the target whose slice ended."""
    plan = _plan(refserver, refserver_1ms, settle_s_by_target=[0.05, 0.3], rounds=4)
    result = run_sliced(plan, interval_s=0.2)
    assert not result.interrupted and result.spec["settle_s_by_target"] == [0.05, 0.3]
    ordered = sorted(result.slices, key=lambda s: s.index)
    assert len(ordered) == 8
    # the first window follows target 1's first touch (the last one)
    pairs = zip(ordered, ordered[1:], strict=False)
    gaps = [(a.target, b.started_at - a.ended_at) for a, b in pairs]
    for before, gap in gaps:
        want = plan.settle_s_by_target[before]
        assert want - 1e-3 <= gap <= want + LATE_S, (before, gaps)
    planned = sum(plan.warmup_s_by_target) + plan.settle_s_after(1)
    planned += sum(plan.slice_s_of(s.target) for s in ordered)
    planned += sum(plan.settle_s_after(b) for b, _ in gaps)
    assert abs(result.elapsed_s - (planned + TAIL_S)) <= ELAPSED_S, (result.elapsed_s, planned)


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
    with pytest.raises(ValueError, match=r"^settle_s_by_target: 1 values for 2 targets$"):
        run_sliced(_plan(refserver, refserver_1ms, settle_s_by_target=[0.1]))


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


@pytest.mark.parametrize(
    ("mode", "per_connection"),
    [({"keepalive": False}, 1), ({"requests_per_connection": 10}, 10)],
    ids=["close", "10-per-connection"],
)
def test_new_connections_in_slices(
    refserver: RefServer, refserver_1ms: RefServer, mode: dict[str, Any], per_connection: int
) -> None:
    """``--connection-mode close`` and N in slices: every slice counts requests, and each
    target's server accepted a connection per request (close), or one per N requests: counted
    by the reference servers themselves. Connections are opened inside their target's
    windows only; with close, a connect still under way when a window ends is closed unused
    (one per connection and window at most)."""
    servers = (refserver, refserver_1ms)
    before = [s.stats()["connections_accepted"] for s in servers]
    plan = SlicePlan(
        load=LoadSpec(url=refserver.url + "/hello", connections=2, warmup_s=0.2, cpus=[1], **mode),
        targets=[s.url + "/hello" for s in servers],
        slice_s=0.2,
        settle_s=0.05,
        rounds=3,
        seed=5,
    )
    result = run_sliced(plan)
    assert not result.interrupted
    assert sorted((s.round, s.target) for s in result.slices) == [
        (r, t) for r in range(3) for t in range(2)
    ]
    assert all(s.requests > 0 and s.errors == 0 for s in result.slices), result.slices
    windows = 1 + plan.rounds  # the first touch and a slice a round
    for t, server in enumerate(servers):
        target = result.targets[t]
        assert target.errors == 0, target.error_classes
        # each stats() is a connection of its own: the second one's is in the count
        accepted = server.stats()["connections_accepted"] - before[t] - 1
        assert accepted == target.established, (t, accepted, target)
        assert target.requests >= 100, target
        if per_connection == 1:
            unused = 2 * windows
            assert target.requests <= target.established <= target.requests + unused, target
        else:
            # every connection served its N but the (at most 2) still open at the end
            least = target.requests / per_connection
            assert least <= target.established <= least + 2, target


@pytest.mark.parametrize("keepalive", [True, False], ids=["keepalive", "close"])
def test_each_target_on_its_own_unix_socket(
    unix_servers: Callable[[str], UnixHttpServer], keepalive: bool
) -> None:
    """``--bind unix``: the group's processes share one URL (``http://localhost/...``, as
    ``spec_for_request`` makes it) and differ by their sockets; each target is loaded over
    its own, and each socket's server answered exactly its target's requests."""
    a, b = unix_servers("a.sock"), unix_servers("b.sock")
    url = "http://localhost/hello"
    plan = SlicePlan(
        load=LoadSpec(
            url=url,
            connections=2,
            warmup_s=0.2,
            cpus=[1],
            keepalive=keepalive,
            expect_body="hello /hello localhost",
        ),
        targets=[url, url],
        unix_socket_by_target=[a.path, b.path],
        slice_s=0.2,
        settle_s=0.05,
        rounds=3,
        seed=5,
    )
    assert plan.unix_socket_of(0) == a.path and plan.unix_socket_of(1) == b.path
    result = run_sliced(plan)
    assert len(result.slices) == 6
    assert all(s.requests > 0 and s.errors == 0 for s in result.slices), result.slices
    assert [t.unix_socket for t in result.targets] == [a.path, b.path]
    assert result.spec["unix_socket_by_target"] == [a.path, b.path]
    for server, target in zip((a, b), result.targets, strict=True):
        assert target.errors == 0, target.error_classes
        assert target.requests > 0 and server.served == target.requests, (server.served, target)
        if not keepalive:
            assert target.established >= target.requests


def test_the_loads_own_unix_socket_is_refused_in_slices(
    unix_servers: Callable[[str], UnixHttpServer],
) -> None:
    """One socket for every target would send them all to one server: each target names its
    own (``unix_socket_by_target``)."""
    a = unix_servers("a.sock")
    plan = SlicePlan(
        load=LoadSpec(url="http://localhost/", unix_socket=a.path),
        targets=["http://localhost/a", "http://localhost/b"],
        slice_s=0.2,
        rounds=1,
    )
    with pytest.raises(ValueError, match=r"^load\.unix_socket: "):
        run_sliced(plan)
    with pytest.raises(ValueError, match=r"^unix_socket_by_target: 1 values for 2 targets$"):
        run_sliced(
            plan.model_copy(
                update={
                    "load": plan.load.replace(unix_socket=None),
                    "unix_socket_by_target": [a.path],
                }
            )
        )
