"""One place builds a cell's load spec (``CellPlan.load_spec``), so every phase of a replicate
(warm-up, measured iterations, knee probes, fault phase, syscalls window) loads the server the
way the cell says: its connection mode, I/O backend, per-request timeout and bind.

Before the builder, the knee built its own spec without ``keepalive`` and ``io``, and the fault
phase without ``keepalive``: with ``--connection-mode close`` both ran keep-alive, and the knee
ignored ``--io``. These tests fail if any phase drifts again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pwbtest import GEN_CPUS, planned
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.load import LoadAgent, LoadSpec, LocalAgent
from pywebbench.load.result import LoadResult
from pywebbench.refserver import RefServer
from pywebbench.run.knee import KneePhase
from pywebbench.run.robustness import FaultTarget, fault_phase
from pywebbench.run.runner import run_study
from pywebbench.store import Store
from pywebbench.study.config import resolve

CPYTHON = default_interpreters()[0].name


@dataclass
class RecordingAgent:
    """The real local agent, keeping every spec it was given and its result."""

    inner: LoadAgent = field(default_factory=LocalAgent)
    runs: list[tuple[LoadSpec, LoadResult]] = field(default_factory=list)
    name: str = "recording"

    def run(self, spec: LoadSpec, progress: Any = None) -> LoadResult:
        result = self.inner.run(spec, progress=progress)
        self.runs.append((spec, result))
        return result


def _study(connection_mode: str, io: str, **load: Any) -> Any:
    return resolve(
        {
            "matrix": {
                "interpreters": [CPYTHON],
                "servers": ["gunicorn-gthread"],
                "frameworks": ["raw-wsgi"],
                "workloads": ["hello"],
            },
            "load": {
                "connections": [8],
                "duration_s": 0.5,
                "warmup": "fixed",
                "warmup_duration_s": 0.3,
                "replicates": 1,
                "max_replicates": 1,
                "connection_mode": [connection_mode],
                "io": io,
                "timeout_s": 3.5,
                # of function: no re-measures when other work is on the cores (tests/pwbtest.py's
                # _quiet_guard); the guard has its own tests
                "interference_max": 2.0,
                **load,
            },
            "report": False,
        }
    )


def test_every_phase_of_a_real_study_loads_as_the_cell_says(tmp_path: Path, census: str) -> None:
    """A study with every phase (fixed warm-up, measured, knee, faults, syscalls) with
    ``--connection-mode close --io epoll``: every load the runner starts is a new connection
    per request over epoll, and the engine opened a connection for each request it sent."""
    config = _study(
        "close",
        "epoll",
        slo="p50=200ms",
        slo_budget_s=4.0,
        slo_warmup_s=0.2,
        faults="slowloris=4",
        syscalls=True,
        syscalls_duration_s=0.5,
    )
    agent = RecordingAgent()
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(config, planned(config), store, results_dir=tmp_path, agent=agent)
    assert outcome.status == "completed", outcome
    specs = [spec for spec, _ in agent.runs]
    knee = [s for s in specs if s.rate is not None]
    assert knee, "the knee search ran no probe"
    # warm-up, measured, syscalls window, faulted (the clean baseline is the measured run)
    assert len(specs) - len(knee) >= 4
    for spec, result in agent.runs:
        assert (spec.keepalive, spec.io, spec.timeout_s) == (False, "epoll", 3.5), spec
        assert spec.fresh_share == 0, spec  # every connection is fresh already
        sent = result.requests + result.errors
        if sent >= 20:
            # a connection per request: established connections track requests sent
            assert result.connections.established >= 0.9 * sent, (spec, result.connections)


def test_knee_probes_and_fault_phase_open_a_connection_per_request_on_the_server(
    census: str,
) -> None:
    """Counted where it happens: the reference server's accepted connections, for a knee
    probe and for the fault phase of a ``close`` cell, and none extra for a keep-alive one."""
    store: Any = None  # the knee's spec needs no store
    for mode, per_request in (("close", True), ("keepalive", False)):
        config = _study(mode, "epoll", slo="p50=200ms", faults="slowloris=2")
        cell = planned(config).cells[0]
        knee = KneePhase(config, store, LocalAgent(), GEN_CPUS, progress=_ignore, report=_ignore)
        with RefServer(threads=1, cpus=[0]) as srv:
            server = _Server(srv.url)
            before = srv.stats()["connections_accepted"]
            spec = knee.probe_spec(cell, server, knee.plan(300.0), 300.0)  # type: ignore[arg-type]
            assert spec.io == "epoll" and spec.rate == 300.0
            result = LocalAgent().run(spec)
            accepted = srv.stats()["connections_accepted"] - before
            sent = result.requests + _warm(result)
            _check(mode, accepted, sent, most=spec.connections + 4, per_request=per_request)

            before = srv.stats()["connections_accepted"]
            agent = RecordingAgent()
            fault_phase(
                cell,
                FaultTarget(srv.url, lambda: True, srv.pid),
                None,
                config=config,
                agent=agent,
                server_cpus=[0],
                generator_cpus=GEN_CPUS,
            )
            accepted = srv.stats()["connections_accepted"] - before
            good = sum(r.requests + _warm(r) for _, r in agent.runs)
            assert all(s.keepalive is not per_request for s, _ in agent.runs)
            # the slow clients' own connections come on top of the good clients'; with
            # keep-alive the plan's arriving clients (its fresh share) open some too
            _check(
                mode, accepted - 2 * len(agent.runs), good, most=good // 2, per_request=per_request
            )


def test_a_server_that_closes_every_connection_is_probed_a_connection_per_request(
    census: str,
) -> None:
    """A keep-alive cell on a server whose manifest says it closes every connection
    (gunicorn's sync worker): each knee probe opens a new connection per request when it is
    due, over the cell's own connections, as a connection-per-request client does (once one
    pre-opened connection per worker, so the client's own cycle sat in the knee)."""
    store: Any = None
    config = _study("keepalive", "epoll", slo="p50=200ms")
    cell = planned(config).cells[0]
    knee = KneePhase(config, store, LocalAgent(), GEN_CPUS, progress=_ignore, report=_ignore)
    with RefServer(threads=1, cpus=[0]) as srv:
        closing = _Server(srv.url, {"keep_alive": "off (closes after every response)"})
        spec = knee.probe_spec(cell, closing, knee.plan(300.0), 300.0)  # type: ignore[arg-type]
        assert (spec.keepalive, spec.connections, spec.mode) == (False, cell.connections, "open")
        before = srv.stats()["connections_accepted"]
        result = LocalAgent().run(spec)
        accepted = srv.stats()["connections_accepted"] - before
        _check("closing", accepted, result.requests + _warm(result), most=0, per_request=True)
        spec = knee.probe_spec(cell, _Server(srv.url), knee.plan(300.0), 300.0)  # type: ignore[arg-type]
        assert (spec.keepalive, spec.connections) == (True, cell.connections)


@dataclass
class _Server:
    """What a phase reads of a running server."""

    base_url: str
    settings: dict[str, Any] = field(default_factory=dict)


def _warm(result: LoadResult) -> int:
    return result.warmup.requests if result.warmup else 0


def _ignore(*_: Any) -> None:
    return None


def _check(mode: str, accepted: int, sent: int, *, most: int, per_request: bool) -> None:
    """A connection per request sent, or at ``most`` connections for that many requests."""
    assert sent > 50, (mode, sent)
    if per_request:
        assert accepted >= 0.95 * sent, (mode, accepted, sent)
    else:
        assert accepted <= most, (mode, accepted, sent)


def test_the_builder_carries_bind_and_lets_a_phase_add_only_its_own() -> None:
    config = _study("close", "uring")
    cell = planned(config).cells[0]
    spec = cell.load_spec("unix:/tmp/pwb.sock:", config.load, [1], duration_s=2.0)
    assert spec.unix_socket == "/tmp/pwb.sock" and spec.url.endswith("/hello")
    assert (spec.keepalive, spec.io, spec.timeout_s, spec.duration_s) == (False, "uring", 3.5, 2.0)
    probe = cell.load_spec("http://127.0.0.1:1", config.load, [1], duration_s=1, rate=50.0)
    assert probe.rate == 50.0 and probe.mode == "open" and not probe.keepalive
    with pytest.raises(ValueError):
        cell.load_spec("http://127.0.0.1:1", config.load, [1], duration_s=1, no_such_field=1)
