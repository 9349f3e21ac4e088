"""The interleaved group (run/interleaved.py): which cells it takes, its stop rule on
synthetic slices, whole groups on synthetic slices (a fake agent's sliced run, no server:
deterministic, in about a second), and whole groups of real reference servers on loopback.

The reference servers answer after a fixed delay, so their throughput is set by a timer,
not by the CPU: a server four times slower per request reads slower whatever the host
does to the cores. No test here asserts a statistical power or a CI width (those are
benchmarks: benchmarks/tournament.py); they assert what must hold on any host: the group
runs, stores what it measured, ranks a 4x gap the right way round, stops a process over the
memory budget and goes on, fails a stack that does not verify, and leaves no process behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from fake_bench import FakeAgent, SlicedModel, Timeline
from pwbtest import planned
from pywebbench.bringup import ServerPool, StackFailure
from pywebbench.catalogue.workloads import HttpRequest
from pywebbench.load import LoadSpec, LocalAgent
from pywebbench.load.sliced import SliceStats
from pywebbench.load.spec import spec_for_request
from pywebbench.refserver import RefServer
from pywebbench.run.interleaved import (
    GROW_AFTER,
    LEG_TOUCH_S,
    GroupOptions,
    GroupRun,
    enough,
    group_label,
    interleaved_groups,
    run_group,
    why_not_interleaved,
)
from pywebbench.run.rotation import (
    JIT_MEMORY_SHARES,
    JIT_SETTLE_S,
    JIT_SLICE_S,
    LEAST_ROUNDS,
    MIN_ROUNDS,
    Member,
    first_touch_s,
    judge,
    memory_budgets,
)
from pywebbench.run.schedule import CellProgress
from pywebbench.store import Phase
from pywebbench.study.config import resolve

# ----------------------------------------------------------------------------- the cells


def test_a_quick_study_is_grouped_by_interpreter_and_workload() -> None:
    config = resolve(None, {"matrix": {"interpreters": ["cpython3.11"]}}, profile="quick")
    assert config.load.design == "interleaved"
    cells = planned(config).cells
    assert all(why_not_interleaved(c, config.load) is None for c in cells)
    groups = interleaved_groups(cells)
    assert len(groups) == 2  # hello, cpu
    for g in groups:
        assert len({c.workload.name for c in g}) == 1
        assert len({c.variant.key for c in g}) == len(g) == 6


def test_cpython_and_pypy_share_a_group_per_workload() -> None:
    """Issue 64 item 1: the interpreters of a workload and load point are one group, so their
    ratios come from the same rounds."""
    config = resolve(
        None, {"matrix": {"interpreters": ["cpython3.11", "pypy3.9"]}}, profile="quick"
    )
    cells = planned(config).cells
    groups = interleaved_groups(cells)
    assert len(groups) == 2  # hello, cpu
    for g in groups:
        assert len({c.workload.name for c in g}) == 1
        assert {c.variant.stack.interpreter.name for c in g} == {"cpython3.11", "pypy3.9"}
        assert len({group_label(c) for c in g}) == 1


def test_the_standard_profile_is_interleaved_one_group_per_load_point() -> None:
    """``--profile standard`` with no ``--design`` is interleaved (load.design's default), and
    its connection sweep (16 and 64) is two groups: a group holds one load point."""
    config = resolve(
        None,
        {"matrix": {"interpreters": ["cpython3.11"], "workloads": ["hello"]}},
        profile="standard",
    )
    assert config.load.design == "interleaved"
    cells = planned(config).cells
    assert all(why_not_interleaved(c, config.load) is None for c in cells)
    groups = interleaved_groups(cells)
    assert len(groups) == 2
    assert sorted({c.load_point for c in g}.pop() for g in groups) == ["c16", "c64"]
    for g in groups:
        assert len({c.load_point for c in g}) == 1
        assert len({c.variant.key for c in g}) == len(g) > 1


@pytest.mark.parametrize("profile", ["quick", "standard", "full", "versions"])
def test_every_profile_is_interleaved(profile: str) -> None:
    assert resolve(profile=profile).load.design == "interleaved"
    assert resolve({"profile": profile}).load.design == "interleaved"  # a study file's


def test_sequential_remains_a_choice() -> None:
    for profile in ("versions", "standard"):
        chosen = resolve(None, {"load": {"design": "sequential"}}, profile=profile)
        assert chosen.load.design == "sequential"


def test_the_versions_profile_puts_every_interpreter_of_a_workload_in_one_group() -> None:
    """The version study's interpreters are compared in the same rounds (issue 64 item 1):
    one group per workload, whatever the interpreter."""
    names = ["cpython3.11", "cpython3.13t", "pypy3.9"]
    config = resolve(None, {"matrix": {"interpreters": names}}, profile="versions")
    assert config.load.design == "interleaved"
    cells = planned(config).cells
    assert all(why_not_interleaved(c, config.load) is None for c in cells)
    groups = interleaved_groups(cells)
    assert sorted(g[0].workload.name for g in groups) == ["cpu", "hello"]
    for g in groups:
        assert {c.variant.stack.interpreter.name for c in g} == set(names)


def test_a_users_projects_share_a_group_by_default(tmp_path: Path) -> None:
    """``--app`` with ``--project`` twice: interleaved, both projects of every server in one
    group per path."""
    for name in ("v1", "v2"):
        (tmp_path / name).mkdir()
        app = "def app(environ, start_response):\n    return []\n"
        (tmp_path / name / "web.py").write_text(app)
    config = resolve(
        {
            "matrix": {"interpreters": ["cpython3.11"], "servers": ["waitress", "gunicorn-sync"]},
            "app": {
                "app": "web:app",
                "interface": "wsgi",
                "paths": ["/", "/x"],
                "project": [str(tmp_path / "v1"), str(tmp_path / "v2")],
            },
        }
    )
    assert config.load.design == "interleaved"
    cells = planned(config).cells
    assert all(why_not_interleaved(c, config.load) is None for c in cells)
    groups = interleaved_groups(cells)
    assert len(groups) == 2  # one per path
    assert all(len(g) == 4 for g in groups)  # 2 servers x 2 projects


@pytest.mark.parametrize(
    ("load", "why"),
    [
        ({"design": "sequential"}, "design = sequential"),
        ({"slo": "p99=20ms"}, "--slo"),
        ({"syscalls": True}, "--syscalls"),
        ({"warmup": "deep"}, "--warmup deep"),
        ({"warmup": "fixed"}, "--warmup fixed"),
        ({"server_scope": "stack"}, "--server-scope stack"),
        ({"load_agents": 2, "ray_address": "local"}, "--load-agents"),
    ],
)
def test_what_needs_a_server_of_its_own_keeps_the_per_cell_path(
    load: dict[str, Any], why: str
) -> None:
    config = resolve(
        None,
        {"matrix": {"interpreters": ["cpython3.11"], "workloads": ["hello"]}, "load": load},
        profile="quick",
    )
    reasons = {why_not_interleaved(c, config.load) for c in planned(config).cells}
    assert len(reasons) == 1
    (reason,) = reasons
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    ("load", "points"),
    [
        ({"connection_mode": ["keepalive", "close"]}, ["c64", "c64 close"]),
        ({"connection_mode": ["keepalive", 100]}, ["c64", "c64 100/conn"]),
        ({"bind": ["tcp", "unix"]}, ["c64", "c64 unix"]),
        ({"bind": ["unix"], "connection_mode": ["close"]}, ["c64 unix close"]),
        ({"rates": [1000.0, 2000.0], "model": "open"}, ["r1000", "r2000"]),
    ],
    ids=["close", "per-connection", "unix", "unix-close", "open-loop"],
)
def test_connection_modes_and_binds_are_groups_of_their_own(
    load: dict[str, Any], points: list[str]
) -> None:
    """Issue 64 item 2: slices speak a connection per request, N per connection, unix
    sockets and an open loop, so such cells are interleaved; a group is one load point, so
    each mode, bind and rate is a group of its own, every stack of the workload in it."""
    config = resolve(
        None,
        {"matrix": {"interpreters": ["cpython3.11"], "workloads": ["hello"]}, "load": load},
        profile="quick",
    )
    cells = planned(config).cells
    assert {why_not_interleaved(c, config.load) for c in cells} == {None}
    groups = interleaved_groups(cells)
    assert sorted(g[0].load_point for g in groups) == points
    for g in groups:
        assert len({c.load_point for c in g}) == 1
        assert len({c.variant.key for c in g}) == len(g) > 1


def test_h2c_and_websocket_cells_are_groups_of_their_own() -> None:
    """Issue 64 item 2: slices speak h2c and WebSocket, so such cells are interleaved. A
    group speaks one protocol (h2c is in the load point, a WebSocket workload is its own),
    and every member's load spec carries it: the group's sliced run takes one spec for all
    its targets."""
    config = resolve(
        None,
        {
            "matrix": {
                "interpreters": ["cpython3.11"],
                "servers": ["granian-asgi", "hypercorn"],  # both serve h2c and WebSocket
                "frameworks": ["raw-asgi"],
                "workloads": ["hello", "ws-echo"],
            },
            "load": {"protocol": ["http1", "h2c"], "streams": 4},
        },
        profile="quick",
    )
    cells = planned(config).cells
    assert {why_not_interleaved(c, config.load) for c in cells} == {None}
    groups = interleaved_groups(cells)
    assert sorted((g[0].workload.name, g[0].load_point) for g in groups) == [
        ("hello", "c64"),
        ("hello", "c64 h2c×4"),
        ("ws-echo", "c64"),
    ]
    want = {"c64": ("http1", "http://"), "c64 h2c×4": ("h2c", "http://")}
    for g in groups:
        assert len({c.variant.key for c in g}) == len(g) == 2
        assert len({c.protocol for c in g}) == 1
        for c in g:
            spec = c.load_spec("http://127.0.0.1:8000", config.load, [1], duration_s=1.0)
            protocol, scheme = ("ws", "ws://") if c.workload.websocket else want[c.load_point]
            assert (spec.protocol, spec.url[: len(scheme)]) == (protocol, scheme), spec
            assert spec.streams == (4 if protocol == "h2c" else 1)


def test_instructions_keep_the_interleaved_path() -> None:
    """--instructions counts on fresh servers after a group (HostBench.run_group), so its
    cells are still measured interleaved."""
    config = resolve(
        None,
        {"matrix": {"interpreters": ["cpython3.11"], "workloads": ["hello"]},
         "load": {"instructions": True}},
        profile="quick",
    )  # fmt: skip
    assert {why_not_interleaved(c, config.load) for c in planned(config).cells} == {None}


# ------------------------------------------------------------------------- the stop rule


def _slices(levels: dict[int, list[float]]) -> list[SliceStats]:
    out = []
    for target, series in levels.items():
        for r, rps in enumerate(series):
            out.append(
                SliceStats(
                    index=len(out), round=r, target=target, requests=int(rps / 4), errors=0,
                    timeouts=0, duration_s=0.25, rps=rps, started_at=float(r),
                    ended_at=r + 0.25, p50_us=100, p99_us=900,
                )
            )  # fmt: skip
    return out


def _members(stacks: list[str], k: int) -> list[Member]:
    out = []
    for s in stacks:
        for j in range(k):
            server = cast(Any, SimpleNamespace(pid=0, base_url=""))
            out.append(Member(len(out), s, j, server, ""))
    return out


def test_the_group_stops_once_every_process_is_warm_and_every_interval_narrow() -> None:
    rounds = MIN_ROUNDS + 8
    wobble = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001]
    levels = {
        t: [base * (1 + 0.004 * t) * wobble[(r + t) % 8] for r in range(rounds)]
        for t, base in enumerate([1000.0] * 3 + [2000.0] * 3)
    }
    members = _members(["a", "b"], 3)
    j = judge(_slices(levels), members, GroupOptions().rule)
    assert all(w is not None for w in j.warm.values())
    assert enough(j, members, GroupOptions(ci_width=0.05))
    assert not enough(j, members, GroupOptions(ci_width=0.0001))  # not that narrow


def test_a_process_still_warming_holds_the_group() -> None:
    rounds = MIN_ROUNDS + 8
    levels = {t: [1000.0 + (t % 2) for _ in range(rounds)] for t in range(6)}
    levels[4] = [500.0 + 30.0 * r for r in range(rounds)]  # climbing all along
    members = _members(["a", "b"], 3)
    j = judge(_slices(levels), members, GroupOptions().rule)
    assert j.warm[4] is None
    assert not enough(j, members, GroupOptions(ci_width=1.0))
    final = judge(_slices(levels), members, GroupOptions().rule, final=True)
    assert final.measured[4] == rounds // 2  # measured on its last half, flagged by the caller


def test_a_named_reference_outside_the_group_falls_back_to_the_geometric_mean() -> None:
    rounds = MIN_ROUNDS + 8
    levels = {t: [1000.0 * (1 + t // 3) * (1 + 0.001 * ((r + t) % 3)) for r in range(rounds)]
              for t in range(6)}  # fmt: skip
    members = _members(["a", "b"], 3)
    j = judge(_slices(levels), members, GroupOptions().rule)
    assert j.reference("not-in-this-group") is None and j.reference("b") == "b"
    assert j.widest("not-in-this-group") == j.widest(None)
    assert enough(j, members, GroupOptions(ci_width=1.0, reference="not-in-this-group"))


def test_a_group_of_one_stack_stops_once_its_processes_are_warm_and_measured() -> None:
    rounds = MIN_ROUNDS + 8
    levels = {t: [1000.0 * (1 + 0.002 * ((r + t) % 4)) for r in range(rounds)] for t in range(3)}
    members = _members(["alone"], 3)
    j = judge(_slices(levels), members, GroupOptions().rule)
    assert j.fit is not None and list(j.fit.levels) == ["alone"]
    assert enough(j, members, GroupOptions(ci_width=0.0001))


# -------------------------------------------------------------- groups of real servers


@dataclass
class FakeStore:
    """The store writes a group makes, kept in memory."""

    replicates: dict[int, dict[str, Any]] = field(default_factory=dict)
    iterations: list[Any] = field(default_factory=list)

    def add_replicate(self, rep: Any) -> int:
        self.replicates[len(self.replicates) + 1] = {"cell_id": rep.cell_id, "k": rep.replicate}
        return len(self.replicates)

    def update_replicate(self, rep_id: int, **cols: Any) -> None:
        self.replicates[rep_id].update(cols)

    def add_iteration(self, it: Any) -> None:
        self.iterations.append(it)


class Served:
    """A reference server as the group sees a running server."""

    def __init__(self, ref: RefServer) -> None:
        self.ref = ref
        self.base_url = f"http://127.0.0.1:{ref.port}"
        group = ref._group  # noqa: SLF001 - its process group, to read its pid
        assert group is not None
        self.pid = group.pid
        self.cold_start_s = 0.0
        self.log_path = "-"


def _cell(stack: str, delay_ms: float, *, pypy: bool = False, rate: float | None = None) -> Any:
    # a PyPy that cannot be asked for its collector's sizes (the leak test then has no floor)
    interp = SimpleNamespace(
        name="pypy" if pypy else "refserver", is_pypy=pypy, path=Path("/nonexistent/pypy3")
    )
    return SimpleNamespace(
        variant=SimpleNamespace(key=stack, stack=SimpleNamespace(interpreter=interp)),
        workload=SimpleNamespace(name="hello"),
        load_point="c16" if rate is None else f"r{rate:g}",
        load_model="closed" if rate is None else "open",
        rate=rate,
        connections=16,
        delay_ms=delay_ms,
    )


@pytest.fixture
def servers() -> Iterator[list[Served]]:
    """Every reference server a test started, stopped after it whatever happened."""
    started: list[Served] = []
    yield started
    for s in started:
        s.ref.stop()


class RefPool(ServerPool):
    """A pool of reference servers (each answering after its cell's ``delay_ms``), verified
    by ``check``: the group's bring-up and stops, without a stack."""

    def __init__(self, servers: list[Served], check: Any) -> None:
        super().__init__(lambda cell: (cast(Any, None), cast(Any, None)))  # never launched
        self.servers = servers
        self.check = check

    def _start_process(self, cell: Any, k: int) -> Any:
        served = Served(RefServer(delay_ms=cell.delay_ms, cpus=[0]).start())
        self.servers.append(served)
        return served

    def _stop_process(self, server: Any) -> None:
        server.ref.stop()

    def verify(self, server: Any, cell: Any) -> StackFailure | None:
        return cast(StackFailure | None, self.check(server, cell))


def _group(
    servers: list[Served],
    cells: list[Any],
    *,
    verify: Any = lambda server, cell: None,
    rss: Any = None,
    rate: float | None = None,
    **options: Any,
) -> GroupRun:
    def load_spec(cell: Any, base_url: str) -> LoadSpec:
        return LoadSpec(
            url=base_url + "/hello", connections=16, duration_s=1.0, cpus=[1], rate=rate
        )

    progress = [CellProgress(cell=c, cell_id=i + 1, ok=0, next_rep=0) for i, c in enumerate(cells)]
    defaults: dict[str, Any] = {"processes": 2, "budget_s": 12.0, "slice_s": 0.1, "ci_width": 0.5}
    return GroupRun(
        progress,
        GroupOptions(**(defaults | options)),
        store=cast(Any, FakeStore()),
        pool=RefPool(servers, verify),
        agent=LocalAgent(),
        load_spec=load_spec,
        rss=rss,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_group_of_reference_servers_ranks_a_4x_gap_and_stores_every_slice(
    servers: list[Served],
) -> None:
    """1 ms against 4 ms per response over 16 connections: about 16,000 against 4,000
    requests/s, set by the servers' timers. For the slower one to read within 1.5x of the
    faster, the faster would have to lose over 60% of its throughput relative to the slower
    in the same rounds, slice after slice: no host's steal does that to one server of a
    round and not the other (the bound's false-failure rate is nil for any steal that is
    shared within a round)."""
    run = _group(servers, [_cell("fast", 1.0), _cell("slow", 4.0)])
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    assert [o.ok for o in outcomes] == [2, 2]
    fast, slow = (o.group for o in outcomes)
    assert fast is not None and slow is not None
    assert fast["vs"]["slow"][0] > 1.5
    assert fast["vs"]["slow"][1] is not None and fast["vs"]["slow"][1] > 1.0  # not tied
    assert fast["rps"] > slow["rps"] and fast["processes"] == 2
    assert fast["reference"] == "geometric mean"
    store = cast(FakeStore, run.store)
    assert run.result is not None
    assert len(store.iterations) == len(run.result.slices) > 0
    kinds = {it.kind for it in store.iterations}
    assert "measured" in kinds
    assert all(r["status"] == "ok" for r in store.replicates.values())
    assert all(r.get("warmup_class") for r in store.replicates.values())
    assert not any(_alive(s.pid) for s in servers)


def test_a_process_over_the_memory_budget_is_stopped_and_the_group_goes_on(
    servers: list[Served],
) -> None:
    big: set[int] = set()

    def rss(pid: int) -> int | None:
        if not big and len(servers) == 4:
            big.add(servers[3].pid)  # the slow stack's second process
        return 8 * 2**30 if pid in big else 40 * 2**20

    run = _group(
        servers, [_cell("fast", 1.0), _cell("slow", 4.0)], rss=rss, memory_budget_bytes=2**30
    )
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    assert [o.ok for o in outcomes] == [2, 1]  # the group went on without it
    stopped = [m for m in run.members if m.stopped]
    assert len(stopped) == 1 and stopped[0].stopped is not None
    assert stopped[0].stopped.startswith("memory budget: 8,192 MiB passed the memory budget")
    store = cast(FakeStore, run.store)
    failed = [r for r in store.replicates.values() if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["failure_reason"].startswith("memory budget")
    assert '"stopped"' in failed[0]["leak_json"] and '"curve"' in failed[0]["leak_json"]
    assert '"leaking": true' in failed[0]["leak_json"]  # marked leak, with its curve
    assert not any(_alive(s.pid) for s in servers)


def test_a_process_bound_to_pass_its_budget_is_stopped_before_it_does(
    servers: list[Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process growing 100 MiB a second below its collector's floor (4 GiB, as PyPy's
    1.9 GiB on a large-cache host), with a 1-GiB budget and seconds of rounds to go: it is
    stopped once its samples show it bound to pass, below the budget, said so, and the group
    goes on without it (it held its windows for seconds, not until it passed)."""
    import time

    from pywebbench.run import interleaved, rotation

    monkeypatch.setattr(rotation, "MEMORY_EVERY_S", 0.2)
    monkeypatch.setattr(rotation, "FORESEE_AFTER_S", 2.0)
    monkeypatch.setattr(interleaved, "leak_floors", lambda interpreter: (0.0, 4.0 * 2**30))
    began: list[float] = []

    def rss(pid: int) -> int | None:
        if pid != servers[3].pid:  # the slow stack's second process grows
            return 40 * 2**20
        began.append(began[0] if began else time.time())
        return int((100 + 100 * (time.time() - began[0])) * 2**20)

    run = _group(
        servers,
        [_cell("fast", 1.0), _cell("slow", 4.0)],
        rss=rss,
        memory_budget_bytes=2**30,
        budget_s=16.0,
    )
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    assert outcomes[1].ok == 1 and outcomes[0].ok >= 2  # (a noisy host may grow the fast)
    (stopped,) = [m for m in run.members if m.stopped]
    assert stopped.stopped is not None and "it would pass the memory budget" in stopped.stopped
    assert "nothing collected below 4.0 GiB" in stopped.stopped
    assert stopped.memory[-1][1] < 2**30  # before it passed
    # below its collector's floor: stored as the machine's share, not as a leak
    store = cast(FakeStore, run.store)
    (failed,) = [r for r in store.replicates.values() if r["status"] == "failed"]
    doc = json.loads(failed["leak_json"])
    assert doc["leaking"] is False and doc["over_share"] is True and doc["stopped"]
    assert all(m.memory[-1][1] == 40 * 2**20 for m in run.members if not m.stopped)
    assert not any(_alive(s.pid) for s in servers)


def test_a_stack_that_fails_verification_leaves_the_group(servers: list[Served]) -> None:
    def verify(server: Any, cell: Any) -> StackFailure | None:
        return StackFailure(Phase.VERIFY, "wrong body") if cell.variant.key == "slow" else None

    run = _group(servers, [_cell("fast", 1.0), _cell("slow", 4.0)], verify=verify)
    outcomes = run_group(run)
    assert outcomes[1].failure is not None and outcomes[1].failure.phase == Phase.VERIFY
    assert outcomes[0].failure is None and outcomes[0].ok == 2
    assert not any(_alive(s.pid) for s in servers)


def test_the_rotation_seed_is_the_groups_own_and_moves_with_the_studys_seed() -> None:
    """Without ``--seed`` a group rotates as every earlier run of the study did (its label's
    CRC); a study's seed gives each group another rotation, and two groups never share one."""
    import zlib

    from pywebbench.run.interleaved import rotation_seed

    label = "cpython3.11 | hello @ c64"
    assert rotation_seed(label) == zlib.crc32(label.encode())
    seeded = {rotation_seed(label, s) for s in range(20)}
    assert len(seeded) == 20 and rotation_seed(label) not in seeded
    assert rotation_seed(label, 7) == rotation_seed(label, 7)
    assert rotation_seed(label, 7) != rotation_seed("cpython3.11 | cpu @ c64", 7)


# ------------------------------------------------------- a whole group on synthetic slices


#: Where the pids of a :class:`SyntheticPool` with pids of its own start (none is real).
FAKE_PID = 10**7


class SyntheticPool(ServerPool):
    """A pool whose processes are names only: the rotation's slices come from a
    :class:`~fake_bench.SlicedModel`, so nothing listens behind these URLs (or, with
    ``bind`` unix, these sockets)."""

    def __init__(self, bind: str = "tcp", *, own_pids: bool = False) -> None:
        super().__init__(lambda cell: (cast(Any, None), cast(Any, None)))  # never launched
        self.started = 0
        self.bind = bind
        #: each process a pid of its own (FAKE_PID + its number), none of them real
        self.own_pids = own_pids

    def _start_process(self, cell: Any, k: int) -> Any:
        self.started += 1
        base_url = f"http://127.0.0.1:{9000 + self.started}"
        if self.bind == "unix":  # each process its own socket, as launch/server.py's
            base_url = f"unix:/tmp/pwb-fake{self.started}/server.sock:"
        return SimpleNamespace(
            pid=FAKE_PID + self.started if self.own_pids else os.getpid(),
            base_url=base_url,
            log_path="-",
            cold_start_s=0.0,
        )

    def _stop_process(self, server: Any) -> None:
        pass

    def verify(self, server: Any, cell: Any) -> StackFailure | None:
        return None


def _synthetic_group(
    model: SlicedModel,
    stacks: list[str],
    *,
    pypy: Sequence[str] = (),
    bind: str = "tcp",
    keepalive: bool = True,
    rate: float | None = None,
    rss: Callable[[int], int | None] = lambda pid: 40 * 2**20,
    **options: Any,
) -> GroupRun:
    """A group of ``stacks`` (three processes each, in the engine's target order: process 1
    of each stack, then process 2 of each, ...; those in ``pypy`` on a JIT interpreter)
    measured on ``model``'s slices: no server, no clock, no core read (no CPU accounting,
    no core-speed probe). Each process listens on ``bind``; ``keepalive`` False: a
    connection per request."""

    def load_spec(cell: Any, base_url: str) -> LoadSpec:
        request = HttpRequest("GET", "/hello")
        return spec_for_request(
            base_url, request, connections=16, duration_s=1.0, timeout_s=5.0, cpus=[],
            keepalive=keepalive, rate=rate,
        )  # fmt: skip

    cells = [_cell(s, 1.0, pypy=s in pypy, rate=rate) for s in stacks]
    progress = [CellProgress(cell=c, cell_id=i + 1, ok=0, next_rep=0) for i, c in enumerate(cells)]
    # +-3%: the models' processes, 1% apart, allow a gap of +-2.3% over 4 degrees of freedom
    defaults: dict[str, Any] = {
        "processes": 3, "budget_s": 600.0, "ci_width": 0.03, "core_speed": False,
    }  # fmt: skip
    return GroupRun(
        progress,
        GroupOptions(**(defaults | options)),
        store=cast(Any, FakeStore()),
        pool=SyntheticPool(bind, own_pids=True),
        agent=FakeAgent(Timeline(), sliced=model),
        load_spec=load_spec,
        rss=rss,
    )


def test_a_group_on_a_host_that_moves_30_percent_a_round_reads_the_true_ratio() -> None:
    """Two stacks 1.5x apart (processes 1% apart within each), on a host whose speed moves
    up to 30% from round to round and 1% of noise a slice: the rounds take the host out,
    so the group stops as soon as every process is warm and the gap is within +-3% (the
    processes' 1% spread, over 4 degrees of freedom, allows +-2.3%), and reads 1.5 with an
    interval that holds it. Deterministic (seeded slices), no server."""
    levels = [1000.0, 1500.0, 1010.0, 1485.0, 990.0, 1515.0]  # a, b, a, b, a, b
    run = _synthetic_group(SlicedModel(levels, seed=3), ["a", "b"])
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    a, b = (o.group for o in outcomes)
    assert a is not None and b is not None
    ratio, low, high = b["vs"]["a"]
    assert abs(ratio - 1.5) < 0.015 and low < 1.5 < high and low > 1.0
    assert run.result is not None and run.result.stopped_early
    planned = run.rotation.agent.sliced  # type: ignore[attr-defined]
    assert planned is not None
    rounds = b["rounds"]
    assert MIN_ROUNDS < rounds < 40  # stopped once it knew, long before the budget
    store = cast(FakeStore, run.store)
    assert len(store.iterations) == len(run.result.slices) == 6 * rounds
    warmup = [it for it in store.iterations if it.kind == "warmup"]
    assert warmup and all(it.idx == 0 for it in warmup)  # the first round is never judged


def test_a_unix_group_loads_each_process_over_its_own_socket() -> None:
    """``--bind unix`` (here with ``--connection-mode close``): every process listens on a
    socket of its own and its load spec reads ``http://localhost/hello`` over it, so the
    URLs of the group's processes are all alike. The group's one sliced run sends each
    target to its own process's socket (the plan's ``unix_socket_by_target``, its load
    naming none) with the cell's connection mode."""
    levels = [1000.0, 1500.0, 1010.0, 1485.0, 990.0, 1515.0]
    run = _synthetic_group(SlicedModel(levels, seed=3), ["a", "b"], bind="unix", keepalive=False)
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    assert {m.url for m in run.members} == {"http://localhost/hello"}
    sockets = [m.unix_socket for m in sorted(run.members, key=lambda m: m.index)]
    assert sockets == [f"/tmp/pwb-fake{k}/server.sock" for k in range(1, 7)]
    timeline = cast(FakeAgent, run.rotation.agent).timeline
    (plan,) = [e for e in timeline.entries if e["entry"] == "sliced"]
    assert plan["unix_sockets"] == sockets
    assert plan["load_unix_socket"] is None
    loads = [e["spec"] for e in timeline.entries if e["entry"] == "load"]  # the first touches
    assert loads and all(not spec["keepalive"] for spec in loads)
    assert all(spec["unix_socket"] in sockets for spec in loads)
    a, b = (o.group for o in outcomes)
    assert a is not None and b is not None
    assert abs(b["vs"]["a"][0] - 1.5) < 0.015


def test_a_process_still_compiling_is_warm_only_once_its_share_stops_climbing() -> None:
    """One process of stack b climbs from 60% of its level to all of it over 15 rounds (a
    JIT compiling): it is judged warm no sooner than its climb ends, the group does not
    stop before, and its slices before that are stored as warm-up; the ratio is read from
    its warm slices, so the climb does not pull it down."""
    levels = [1000.0, 1500.0, 1010.0, 1485.0, 990.0, 1515.0]
    # b's processes, 1-2% apart, disagree far beyond their slices' 1% noise: the group may
    # add processes of b (ports 9007 on), at b's level
    later = {f":{port}/": 1500.0 for port in range(9007, 9020)}
    model = SlicedModel(levels, warming={3: 15}, seed=5, by_url=later)
    run = _synthetic_group(model, ["a", "b"])
    outcomes = run_group(run)
    b = outcomes[1].group
    assert b is not None
    assert abs(b["vs"]["a"][0] - 1.5) < 0.02
    climbing = [m for m in run.members if m.index == 3]
    assert len(climbing) == 1
    mine = [it for it in cast(FakeStore, run.store).iterations
            if it.cell_id == 2 and it.replicate == climbing[0].k]  # fmt: skip
    first_measured = min(it.idx for it in mine if it.kind == "measured")
    assert first_measured >= 12  # 60% -> 100% over 15 rounds: still moving before
    assert b["rounds"] >= first_measured + MIN_ROUNDS
    assert run.result is not None and run.result.stopped_early  # once it knew, not the budget


def test_cpython_and_pypy_in_one_group_each_with_its_slices_and_its_spread() -> None:
    """Issue 64 item 1: CPython stacks a and b (processes 1% apart) and a PyPy stack p
    (processes 8% apart) in one group. p's processes get their longer slices and first touch
    (the engine's per-target plan), the others keep theirs; b/a is as narrow as p's spread
    allows it to be in a group of its own (each interpreter its own process variance), and
    p/a carries p's spread; each stack's memory share follows its interpreter."""
    levels = [1000.0, 1050.0, 2000.0, 1010.0, 1040.0, 2160.0, 990.0, 1060.0, 1840.0]
    # p's processes disagree far beyond their slices' noise: the group adds processes of p
    # (ports 9010 on), and of no CPython stack, whose processes agree
    later = {f":{port}/": 2000.0 for port in range(9010, 9020)}
    model = SlicedModel(levels, seed=11, host=0.2, by_url=later)
    run = _synthetic_group(model, ["a", "b", "p"], pypy=["p"], budget_s=400.0, ci_width=0.2)
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None, None]
    assert {g["stack"] for g in run.grown} == {"p"}
    timeline = cast(FakeAgent, run.rotation.agent).timeline
    plan = next(e for e in timeline.entries if e["entry"] == "sliced")
    jit = {m.index for m in run.members if m.jit and m.index < 9}  # the first leg's
    assert len(jit) == 3
    assert {plan["slice_s"][i] for i in jit} == {JIT_SLICE_S}
    others = {plan["slice_s"][i] for i in range(9) if i not in jit}
    assert len(others) == 1 and others.pop() < JIT_SLICE_S
    # a JIT's process's collector holds its last requests: a longer settle after its slices
    assert {plan["settle_s"][i] for i in jit} == {JIT_SETTLE_S}
    assert max(plan["settle_s"][i] for i in range(9) if i not in jit) < JIT_SETTLE_S
    # every process touched alone before the rounds, PyPy's for longer, the touch's last
    # part counted (it sizes the settles): no further probe
    first = timeline.entries.index(plan)
    loads = [e["spec"] for e in timeline.entries[:first] if e["entry"] == "load"]
    assert len(loads) == 9
    touches = sorted(spec["warmup_s"] + spec["duration_s"] for spec in loads)
    assert touches == [first_touch_s(False)] * 6 + [first_touch_s(True)] * 3
    assert all(0 < spec["duration_s"] < spec["warmup_s"] + spec["duration_s"] for spec in loads)
    # the first leg's first round opens the connections again (the warm-up rule never
    # judges it); a further leg's processes, measured already, reconnect alone first
    assert set(plan["touch_s"]) == {0.0}
    further = [e for e in timeline.entries if e["entry"] == "sliced"][1:]
    assert further and all(set(e["touch_s"]) == {LEG_TOUCH_S} for e in further)
    a, b, p = (o.group for o in outcomes)
    assert a is not None and b is not None and p is not None
    assert a["group"] == p["group"]  # one group, one ranking
    ba = b["vs"]["a"]
    pa = p["vs"]["a"]
    assert ba[1] < 1.05 < ba[2] and (ba[2] - ba[1]) / 2 < 0.03
    assert pa[1] < 2.0 < pa[2] and (pa[2] - pa[1]) / pa[0] > 2 * (ba[2] - ba[1]) / ba[0]
    budgets = memory_budgets(None, [False, True])
    assert budgets[1] == JIT_MEMORY_SHARES * budgets[0]


def test_a_pypy_stack_starts_its_own_count_of_processes() -> None:
    """``jit_replicates`` (GroupOptions.jit_processes): CPython's stacks a and b start 3
    processes, PyPy's p 2, interleaved (process 1 of each, process 2 of each, then a's and
    b's third); the outcome counts each stack's own and the group ranks all three."""
    # by start order: a on ports 9001, 9004, 9007; b on 9002, 9005, 9008; p on 9003, 9006
    # (a PyPy process the group adds, p's 2 disagreeing beyond their slices' noise: 9009 on)
    levels = {":9001/": 1000.0, ":9002/": 1500.0, ":9003/": 2000.0, ":9004/": 1000.0,
              ":9005/": 1500.0, ":9006/": 2000.0, ":9007/": 1000.0, ":9008/": 1500.0,
              **{f":{port}/": 2000.0 for port in range(9009, 9020)}}  # fmt: skip
    run = _synthetic_group(
        SlicedModel([], seed=3, by_url=levels), ["a", "b", "p"], pypy=["p"], jit_processes=2,
        budget_s=400.0,
    )  # fmt: skip
    a, b, p = run_group(run)
    assert [o.failure for o in (a, b, p)] == [None, None, None]
    timeline = cast(FakeAgent, run.rotation.agent).timeline
    first = next(e for e in timeline.entries if e["entry"] == "sliced")
    assert len(first["targets"]) == 8  # the rounds began with p's 2 and a's and b's 3
    started = [m.stack for m in run.members]
    assert started[:8] == ["a", "b", "p", "a", "b", "p", "a", "b"]
    assert set(started[8:]) <= {"p"}  # only p's were added, if any
    assert (a.ok, b.ok) == (3, 3) and a.next_rep == 3
    assert p.ok == p.next_rep == 2 + len(started[8:])
    assert p.group is not None and a.group is not None and a.group["processes"] == 3
    assert abs(p.group["vs"]["a"][0] - 2.0) < 0.05


def test_the_least_load_a_group_plans_is_its_touches_and_least_rounds_of_shortest_slots() -> None:
    """``least_load_s``: the quick profile's group (6 CPython stacks x 4 processes, 6 PyPy x
    3) plans 66 s of first touches (24 x 0.5 s, 18 x 3 s) and 15 rounds of 20.7 s (24 x
    0.25 + 0.05, 18 x 0.5 + 0.25) at least, which is what its hello group planned on
    2026-12-07 (66.3 s, 20.7-s rounds); CPython alone plans 20 rounds."""
    from pywebbench.run.interleaved import least_load_s
    from pywebbench.study.config import LoadConfig

    load = LoadConfig(replicates=4, jit_replicates=3)
    cells = [_cell(f"c{k}", 1.0) for k in range(6)]
    cells += [_cell(f"p{k}", 1.0, pypy=True) for k in range(6)]
    assert least_load_s(cells, load) == pytest.approx(66.0 + 15 * 20.7)
    assert least_load_s(cells[:6], load) == pytest.approx(12.0 + LEAST_ROUNDS * 7.2)
    # a slice asked for is every process's shortest, PyPy's no shorter than its own
    sliced = LoadConfig(replicates=2, slice_s=1.0)
    assert least_load_s(cells[:1] + cells[6:7], sliced) == pytest.approx(
        2 * 0.5 + 2 * 3.0 + 15 * (2 * 1.05 + 2 * 1.25)
    )


def test_a_settle_sized_by_a_cold_touch_is_shortened_once_every_process_is_warm() -> None:
    """The first touches read 1,000-1,300 req/s (a JIT's cold process), which over 400
    connections calls for 0.3-0.4-s settles; the processes, warm, serve 10,000-15,000 (40
    ms for 400 requests in flight): once every process is warm the group ends its leg and
    goes on with 0.05-s settles, its rounds continuing, and reads the true ratio."""
    levels = [10_000.0, 15_000.0, 10_100.0, 14_850.0, 9_900.0, 15_150.0]
    run = _synthetic_group(SlicedModel(levels, seed=3), ["a", "b"], budget_s=900.0)
    for p in run.cells:
        p.cell.connections = 400
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    assert run.replanned is not None
    before, after = run.replanned["round_s"]
    assert after < before / 2
    assert all(s <= 0.1 for s in run.replanned["settle_s_by_stack"].values())
    timeline = cast(FakeAgent, run.rotation.agent).timeline
    legs = [e for e in timeline.entries if e["entry"] == "sliced"]
    assert len(legs) == 2
    a, b = (o.group for o in outcomes)
    assert a is not None and b is not None and b["replanned"] == run.replanned
    ratio, low, high = b["vs"]["a"]
    assert abs(ratio - 1.5) < 0.015 and low < 1.5 < high
    assert run.result is not None
    rounds = sorted({s.round for s in run.result.slices})
    assert rounds == list(range(len(rounds)))  # one numbering across both legs


def test_each_stack_gets_a_settle_of_its_own_response_time() -> None:
    """A fast stack (20,000 req/s) and a slow one (200) over 16 connections: the window after
    a slow process's slice starts with two of its response times of settle (160 ms: its
    requests in flight drain while the next process's load has begun), the one after a fast
    process's with the 0.05-s floor, so the rounds are shorter than with the slow stack's
    settle everywhere; the plan is stored with the group's figures."""
    levels = [20_000.0, 200.0, 20_200.0, 204.0, 19_800.0, 202.0]  # fast, slow, ...
    run = _synthetic_group(SlicedModel(levels, seed=3), ["fast", "slow"])
    agent = cast(FakeAgent, run.rotation.agent)
    agent.rates = {f":{9001 + i}/": level for i, level in enumerate(levels)}
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    plan = next(e for e in agent.timeline.entries if e["entry"] == "sliced")
    stack_of = {m.index: m.stack for m in run.members}
    settles = {stack_of[i]: s for i, s in enumerate(plan["settle_s"])}
    assert settles == {"fast": 0.05, "slow": 0.16}
    assert run.replanned is None  # the touches read the warm rates here
    fast, slow = (o.group for o in outcomes)
    assert fast is not None and slow is not None
    stored = slow["plan"]
    assert stored["settle_s_by_stack"] == {"fast": 0.05, "slow": 0.16}
    assert stored["round_s"] == pytest.approx(6 * stored["slice_s"] + 3 * (0.05 + 0.16))
    assert stored["legs"] == 1
    assert abs(fast["vs"]["slow"][0] - 100.0) < 1.5


def test_processes_stopped_for_their_memory_leave_the_rounds_in_a_further_leg() -> None:
    """Stack p's three processes pass their memory budget at the first sample: their windows
    would stay in the engine's plan, empty, for every round left, so the group ends its leg
    and goes on without them (the rounds' numbering continuing); a and b are ranked from the
    same rounds, p fails with its reason, and the stored plan says what was left out."""
    levels = {":9001/": 1000.0, ":9002/": 1500.0, ":9004/": 1010.0, ":9005/": 1485.0,
              ":9007/": 990.0, ":9008/": 1515.0, ":9003/": 800.0, ":9006/": 800.0,
              ":9009/": 800.0}  # fmt: skip
    heavy = {FAKE_PID + n for n in (3, 6, 9)}  # p's processes: 3rd, 6th and 9th started

    def rss(pid: int) -> int:
        return 2**30 if pid in heavy else 40 * 2**20

    model = SlicedModel([], seed=3, by_url=levels)
    run = _synthetic_group(model, ["a", "b", "p"], rss=rss, memory_budget_bytes=500 * 2**20)
    outcomes = run_group(run)
    a, b, p = outcomes
    assert a.failure is None and b.failure is None
    assert p.failure is not None and "memory budget" in p.failure.reason
    timeline = cast(FakeAgent, run.rotation.agent).timeline
    legs = [e for e in timeline.entries if e["entry"] == "sliced"]
    assert [len(leg["targets"]) for leg in legs] == [9, 6]
    assert not any(url.startswith("http://127.0.0.1:9003") for url in legs[1]["targets"])
    assert run.left_out and run.left_out[0]["processes"] == 3
    assert a.group is not None and b.group is not None
    assert b.group["plan"]["left_out"] == run.left_out and b.group["plan"]["legs"] == 2
    assert abs(b.group["vs"]["a"][0] - 1.5) < 0.015
    assert run.result is not None
    rounds = sorted({s.round for s in run.result.slices})
    assert rounds == list(range(len(rounds)))  # one numbering across both legs


def test_pypy_processes_stopped_below_their_collector_floor_fail_as_memory_not_leak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stack p (PyPy, its collector collecting nothing below 4 GiB) holds 1 GiB a process
    against a 500-MiB share: all three are stopped at the budget below that floor. Its
    failure says the machine's memory was shared among too many processes and is no leak,
    with what to do; the same processes with no floor (CPython) fail as a leak."""
    from pywebbench.run import interleaved

    heavy = {FAKE_PID + n for n in (3, 6, 9)}  # p's processes: 3rd, 6th and 9th started

    def rss(pid: int) -> int:
        return 2**30 if pid in heavy else 40 * 2**20

    # by start order: a on ports 9001, 9004, 9007; b on 9002, 9005, 9008; p on the rest
    levels = {f":{9001 + k}/": (1000.0, 1500.0, 800.0)[k % 3] for k in range(9)}
    for floor, word in ((4.0 * 2**30, "memory: "), (None, "leak: ")):
        monkeypatch.setattr(interleaved, "leak_floors", lambda interpreter, f=floor: (0.0, f))
        run = _synthetic_group(
            SlicedModel([], seed=3, by_url=levels), ["a", "b", "p"], pypy=["p"], rss=rss,
            memory_budget_bytes=500 * 2**20,
        )  # fmt: skip
        a, b, p = run_group(run)
        assert a.failure is None and b.failure is None
        assert p.failure is not None and p.failure.reason.startswith(word), p.failure.reason
        if floor is not None:
            assert "among the group's 9 processes" in p.failure.reason
            assert "not a leak" in p.failure.reason and "--python" in p.failure.reason
            assert "nothing collected below 4.0 GiB" in p.failure.reason


def test_a_settle_the_touches_sized_right_is_kept() -> None:
    levels = [1000.0, 1500.0, 1010.0, 1485.0, 990.0, 1515.0]
    run = _synthetic_group(SlicedModel(levels, seed=3), ["a", "b"])
    run_group(run)
    assert run.replanned is None


# --------------------------------------------- more processes where the variance lives


def _disagreeing(**options: Any) -> GroupRun:
    """Stacks a and b 1.5x apart; b's three processes read 1.5x, 1.65x and 1.35x a's (their
    own levels 10% apart, against 1% of noise a slice), so no number of rounds narrows b's
    interval to +-3%; b's processes added later (ports 9007 on) read 1.5x."""
    levels = [1000.0, 1500.0, 1010.0, 1650.0, 990.0, 1350.0]  # a, b, a, b, a, b
    later = {f":{port}/": 1500.0 for port in range(9007, 9020)}
    model = SlicedModel(levels, seed=7, by_url=later)
    return _synthetic_group(model, ["a", "b"], **({"budget_s": 120.0} | options))


def test_a_stack_whose_processes_disagree_gets_more_processes_not_more_rounds() -> None:
    """Kalibera & Jones: the variance lives between b's processes, so once every process is
    warm and measured the group ends its leg, starts two more processes of b (a's stay three),
    and goes on with all eight in a further leg whose rounds and slices continue the first's;
    every slice of both legs is stored under its own process, the report's figures count b's
    five processes, and say why they were added."""
    run = _disagreeing()
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    assert [g["stack"] for g in run.grown] == ["b"]
    assert run.grown[0]["added"] == 2 and run.grown[0]["processes"] == 5
    assert "disagree" in run.grown[0]["why"]
    a, b = (o.group for o in outcomes)
    assert a is not None and b is not None
    assert (a["processes"], b["processes"]) == (3, 5)
    assert b["grown"] == run.grown
    assert outcomes[1].next_rep == 5 and outcomes[0].next_rep == 3
    result = run.result
    assert result is not None
    assert run.rotated is not None and run.rotated.legs == 2
    indexes = [s.index for s in result.slices]
    assert len(set(indexes)) == len(indexes)  # the second leg's numbered after the first's
    added = [m for m in run.members if m.k >= 3]
    assert len(added) == 2 and all(m.stack == "b" for m in added)
    first_round = min(s.round for s in result.slices if s.target == added[0].index)
    # joined in the further leg, once every process had been measured, the rounds continued
    assert first_round > GROW_AFTER
    assert {s.round for s in result.slices if s.target == 0} >= set(range(first_round + 1))
    store = cast(FakeStore, run.store)
    assert len(store.replicates) == 8
    assert len(store.iterations) == len(result.slices)
    mine = [it for it in store.iterations if it.cell_id == 2 and it.replicate == added[0].k]
    assert mine and min(it.idx for it in mine) == first_round
    assert abs(b["vs"]["a"][0] - 1.5) < 0.03


def test_no_process_is_added_past_the_memory_budget() -> None:
    """The processes hold 40 MiB each and a process may hold 50: one more process of b
    would leave no headroom (each process's share shrinks with them), so the group goes on
    with its six and says why its intervals stayed wide."""
    run = _disagreeing(memory_budget_bytes=50 * 2**20)
    outcomes = run_group(run)
    assert run.grown == []
    assert len(run.members) == 6
    b = outcomes[1].group
    assert b is not None and "disagree" in b["wide_because"]
    assert b["wide_because"].endswith(
        "; none were added: with 2 more processes each would get 50 MiB, under 1.5x the "
        "40 MiB one holds"
    )


def test_a_group_without_the_time_for_more_processes_says_so() -> None:
    """The same disagreement with a budget that leaves no time for a further leg: the group
    ends at its budget and says what a further leg would have needed."""
    run = _disagreeing(budget_s=20.0)
    outcomes = run_group(run)
    assert run.grown == []
    b = outcomes[1].group
    assert b is not None
    assert "; none were added: a further leg of " in b["wide_because"]
    assert "the budget (with its overrun) had " in b["wide_because"]


def test_a_stack_whose_processes_spread_apart_is_stored_as_such() -> None:
    """Three stacks, b's processes 10% apart where a's and c's agree within 1%: b's spread
    is its own (analysis/group.py, "Stacks apart"), and every cell's figures say so, for the
    report to name it; no process is added within the short budget."""
    levels = [1000.0, 1500.0, 2000.0, 1010.0, 1650.0, 2020.0, 990.0, 1350.0, 1980.0]
    run = _synthetic_group(SlicedModel(levels, seed=7), ["a", "b", "c"], budget_s=20.0)
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None, None]
    for o in outcomes:
        assert o.group is not None and o.group["apart"] == ["b"]
    a, b, c = (o.group for o in outcomes)
    assert a is not None and b is not None and c is not None
    # a/c from a's and c's agreeing processes, b's ratios from its own spread
    assert b["high"] / b["low"] > 1.2 > a["high"] / a["low"]


def test_processes_that_agree_get_rounds_not_processes() -> None:
    """Processes 1% apart: more rounds narrow the interval, and none is added."""
    levels = [1000.0, 1500.0, 1010.0, 1485.0, 990.0, 1515.0]
    run = _synthetic_group(SlicedModel(levels, seed=3), ["a", "b"])
    run_group(run)
    assert run.grown == [] and len(run.members) == 6


def test_a_group_whose_budget_ends_before_its_slices_noise_says_how_many_rounds() -> None:
    """Processes that agree, a target no budget this short reaches: the group says the
    budget ended first, how noisy a slice was, and about how many times its rounds (and
    which flag) would reach the target; no process is added."""
    levels = [1000.0, 1500.0, 1000.0, 1500.0, 1000.0, 1500.0]
    model = SlicedModel(levels, seed=3, noise=0.1)
    run = _synthetic_group(model, ["a", "b"], budget_s=20.0, ci_width=0.002)
    outcomes = run_group(run)
    assert run.grown == []
    b = outcomes[1].group
    assert b is not None
    why = b["wide_because"]
    assert why.startswith("the budget ended before its slices' noise allowed the +-0.2% asked")
    assert "its widest interval was +-" in why
    assert "a slice " in why and " off its round and process, sd)" in why
    rounds = b["rounds"]
    factor = float(why.split("about ", 1)[1].split("x its ", 1)[0])
    assert factor > 1.5 and f"x its {rounds} rounds (--group-budget)" in why
    assert why.endswith("or a quieter machine")


# ------------------------------------------------------------------------ open loops


def _paced(latency: dict[int, list[float]], rate: float = 1000.0) -> list[SliceStats]:
    """An open loop's slices: every target at ``rate``, its median latency (us) a round."""
    out = []
    for s in _slices({t: [rate] * len(series) for t, series in latency.items()}):
        p50 = latency[s.target][s.round]
        out.append(s.model_copy(update={"p50_us": int(p50), "p99_us": int(3 * p50)}))
    return out


def test_an_open_loops_warm_up_is_judged_on_latency_not_on_its_pinned_rate() -> None:
    """At a fixed offered rate every process serves that rate from its first slice: a
    process whose latency still falls (a cold cache, a JIT compiling) is not warm, and holds
    the group, though its req/s never moved."""
    rounds = MIN_ROUNDS + 8
    wobble = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001]
    latency = {t: [1000.0 * (1 + 0.004 * t) * wobble[(r + t) % 8] for r in range(rounds)]
               for t in range(6)}  # fmt: skip
    latency[4] = [3000.0 - 60.0 * r for r in range(rounds)]  # falling all along
    members = _members(["a", "b"], 3)
    j = judge(_paced(latency), members, GroupOptions().rule, open_loop=True)
    assert j.warm[4] is None
    assert all(j.warm[t] is not None for t in (0, 1, 2, 3, 5))
    assert not enough(j, members, GroupOptions(ci_width=1.0))


def test_an_open_loop_group_reads_each_stacks_latency_with_intervals_over_processes() -> None:
    """Two stacks at the same offered rate, b answering in twice a's time (processes 1%
    apart within each), on a host that moves 30% a round: every process serves the rate,
    so the group's figures are each stack's p50 and p99 from its processes' merged slices,
    with intervals over the processes, and it stops once every p99 interval is within
    +-ci_width. Deterministic (seeded slices, their histograms the engine's), no server."""
    levels = [1000.0, 2000.0, 1010.0, 1980.0, 990.0, 2020.0]  # median latency, us
    run = _synthetic_group(SlicedModel(levels, seed=5), ["a", "b"], rate=500.0, ci_width=0.05)
    assert run.open_loop
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    a, b = (o.group for o in outcomes)
    assert a is not None and b is not None
    assert run.result is not None and run.result.stopped_early  # narrow before the budget
    for g in (a, b):
        lat = g["latency"]
        assert lat["rate"] == 500.0
        for name in ("p50", "p99"):
            low, value, high = lat[f"{name}_low"], lat[f"{name}_us"], lat[f"{name}_high"]
            assert low < value < high
        assert lat["p99_high"] / lat["p99_us"] - 1 <= 0.05 + 1e-9  # what stopped it
        assert lat["p99_us"] > 2.5 * lat["p50_us"]  # log-normal, sigma 0.5: 3.2x
        assert lat["offered"] > 0 and lat["unsent"] == 0
        # req/s is the offered rate: no interval, its ratios read, not judged
        assert abs(g["rps"] - 500.0) < 1.0
        assert g["rps_low"] is None and g["low"] is None
        assert all(v[1] is None and v[2] is None for v in g["vs"].values())
    assert 1.85 < b["latency"]["p50_us"] / a["latency"]["p50_us"] < 2.15
    assert 1.8 < b["latency"]["p99_us"] / a["latency"]["p99_us"] < 2.2
    store = cast(FakeStore, run.store)
    assert len(store.iterations) == len(run.result.slices)
    assert all(r["status"] == "ok" for r in store.replicates.values())


def test_an_open_loop_group_of_reference_servers(servers: list[Served]) -> None:
    """A short open-loop group on real reference servers (1 ms and 4 ms a response over
    16 connections: 16,000 and 4,000 req/s at most) offered 1,000 req/s each: both keep
    up, every process serves the rate with nothing unsent, the slower answers slower at the
    median, and no process is left behind. Bounded: a 6-s budget."""
    cells = [_cell("fast", 1.0, rate=1000.0), _cell("slow", 4.0, rate=1000.0)]
    run = _group(servers, cells, rate=1000.0, budget_s=6.0, slice_s=0.25)
    outcomes = run_group(run)
    assert [o.failure for o in outcomes] == [None, None]
    fast, slow = (o.group for o in outcomes)
    assert fast is not None and slow is not None
    for g in (fast, slow):
        assert 900.0 < g["rps"] < 1100.0, g["rps"]
        lat = g["latency"]
        assert lat["offered"] > 0 and lat["unsent"] <= 0.01 * lat["offered"]
    assert slow["latency"]["p50_us"] > 2 * fast["latency"]["p50_us"] > 2000
    assert run.result is not None
    # (a generator thread that got no CPU for a whole window lets it pass, counting nothing)
    counted = [s for s in run.result.slices if s.requests > 0]
    assert len(counted) >= 0.9 * len(run.result.slices)
    assert all(s.offered > 0 and s.latency is not None for s in counted)
    assert not any(_alive(s.pid) for s in servers)
