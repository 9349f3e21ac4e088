"""Distributed load on Ray (docs/scale-out.md), against the reference server on loopback.

Ray starts slowly, so one two-node local cluster (the ``ray_cluster`` fixture of conftest.py)
serves these tests and those of the ray executor.

How late an engine starts after its agreed instant is a timing. The engine sleeps to half a
millisecond before the instant and spins to it (crates/engine/src/engine.rs,
``wait_until_unix_ns``): it is late by how long its thread waits for a core when it wakes,
behind other runnable threads (the scheduler's slices of a few milliseconds) and while the
host holds the core. 3,566 waits of the reference engine beside other engineers' test runs on
this 2-core VM (5 Dec 2026) were late by a median of 0.09 ms, 2.7 ms at the 99th percentile,
9.4 ms at the 99.9th and 14.4 ms at worst; the tail fell about 9-fold every 6.7 ms (1% over
2.7 ms, 0.11% over 9.4 ms), which, extended as an exponential tail, puts 25 ms at about
7e-6. At 50% steal, given in slices of milliseconds, the same wait takes at most twice as
long: over :data:`LATE_MS` (50 ms) about 7e-6 a wait, 1.4e-5 for two agents, under 1 in
10,000. Ray hands each agent its spec at least 4 measured round trips and 0.25 s before the
instant (``START_ROUND_TRIPS``, ``START_MARGIN_S``), over the 2.9x the host can stretch a
round trip (docs/contributing.md), so no agent gets its spec after the instant.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pwbtest import PYWEBBENCH, marked_processes, pwb
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.load import Histogram, LoadResult, LoadSpec, run_load
from pywebbench.load.ray_agents import (
    AgentOutcome,
    AgentPlace,
    AgentsError,
    finish,
    measuring_priority,
    run_distributed,
    split_spec,
)
from pywebbench.load.sliced import SlicePlan
from pywebbench.refserver import RefServer
from pywebbench.run.ray_load import RayStudyAgent, agent_row
from pywebbench.store import Store

MARK = "PWB_RAY_TEST_MARK"
LATE_MS = 50.0  # the most an engine starts after its instant (module docstring)


def _count(srv: RefServer) -> int:
    return int(srv.stats()["requests"])


def test_split_shares_connections_rate_and_budget() -> None:
    spec = LoadSpec(url="http://127.0.0.1:1/", connections=5, rate=1000.0, max_requests=11)
    parts = split_spec(spec, 2)
    assert [p.connections for p in parts] == [3, 2]
    assert sum(p.rate or 0 for p in parts) == pytest.approx(1000.0)
    assert [p.max_requests for p in parts] == [6, 5]
    assert len({p.seed for p in parts}) == 2
    with pytest.raises(AgentsError, match="^connections: 3 agents need at least 3") as err:
        split_spec(spec.replace(connections=2, rate=None, max_requests=None), 3)
    assert err.value.field == "connections"  # each command names its own flag for it


def test_merge_is_exact_and_agents_start_together(ray_cluster: str, refserver: RefServer) -> None:
    before = _count(refserver)
    load = run_distributed(
        # A request budget (not a duration): every request sent is answered and counted.
        LoadSpec(url=refserver.url + "/hello", connections=4, max_requests=6001),
        2,
        address=ray_cluster,
    )
    served = _count(refserver) - before  # /__stats does not count itself
    merged = load.merged
    assert merged is not None and not load.failures
    # SPREAD: one agent per node.
    assert len({a.place.node_id for a in load.agents}) == 2
    results = [a.result for a in load.agents if a.result is not None]
    assert merged.requests == sum(r.requests for r in results) == served == 6001
    assert sum(s.completed for s in merged.per_second) == sum(
        s.completed for r in results for s in r.per_second
    )
    # Merged percentiles are those of one histogram holding every agent's values.
    union = Histogram.merge_all(r.latency.hist for r in results)
    assert merged.latency.summary == union.summary()
    # The engines waited for the agreed instant: the skew is the spread of their recorded
    # starts (exact), and below what starting them one after the other takes (a Ray actor
    # call, ~100 ms and more): each is at most LATE_MS late (module docstring).
    [start_at] = {a.spec.start_at_unix_ns for a in load.agents}
    launched = [r.launched_at_unix_ns or 0 for r in results]
    assert start_at is not None and all(t >= start_at for t in launched), (start_at, launched)
    skew = load.start_skew_ms
    assert skew == pytest.approx((max(launched) - min(launched)) / 1e6, abs=1e-6), skew
    assert skew <= LATE_MS, skew
    assert any(f"start skew between 2 agents: {skew:.3f} ms" in w for w in merged.warnings)


def test_a_killed_agent_is_named_and_the_others_data_kept(
    ray_cluster: str, refserver: RefServer
) -> None:
    victim: list[AgentPlace] = []

    def kill_second_agent(places: list[AgentPlace]) -> None:
        victim.append(places[1])
        threading.Timer(1.2, os.kill, (places[1].pid, signal.SIGKILL)).start()

    load = run_distributed(
        LoadSpec(url=refserver.url + "/hello", connections=2, duration_s=2.5),
        2,
        address=ray_cluster,
        on_ready=kill_second_agent,
    )
    assert [a.place.name for a in load.failures] == ["agent-1"]
    message = load.failure_message() or ""
    assert message.startswith(f"agent-1 on {victim[0].node}: ") and "died" in message
    survivor = load.agents[0].result
    assert survivor is not None and survivor.requests > 0
    assert load.merged is not None and load.merged.requests == survivor.requests
    assert any("agent-1" in w for w in load.merged.warnings)


def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYWEBBENCH, "load", *args], capture_output=True, text=True, timeout=240, env=env
    )


def test_cli_agents_start_and_stop_a_local_ray(refserver: RefServer, tmp_path: Any) -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark}
    url = refserver.url + "/hello"
    out = tmp_path / "out.json"
    done = _run_cli(url, "--agents", "2", "-c", "4", "-d", "0.5", "-q", "--json", str(out), env=env)
    assert done.returncode == 0, done.stderr
    assert "Agents        2, start skew" in done.stdout
    assert "agent-0 on" in done.stdout and "agent-1 on" in done.stdout
    assert not marked_processes(MARK, mark), "the local Ray was not stopped"
    # The JSON holds what the console printed per agent, and each agent's own result.
    doc = json.loads(out.read_text())
    agents = doc.pop("agents")
    assert doc.pop("start_skew_ms") >= 0
    merged = LoadResult.from_dict(doc)
    assert [a["agent"] for a in agents] == ["agent-0", "agent-1"]
    for a in agents:
        assert a["status"] == "ok" and a["failure_reason"] is None and a["node"]
        assert a["connections"] == 2 and len(a["cpus"]) == 1 and a["start_lateness_us"] >= 0
        assert a["result"]["requests"] == a["requests"] > 0
        assert f"{a['agent']} on {a['node']} cpus {a['cpus'][0]}: {a['requests']:,} requests" in (
            done.stdout
        )
    assert sum(a["requests"] for a in agents) == merged.requests


def test_cli_without_ray_says_how_to_install_it(refserver: RefServer) -> None:
    code = (
        "import sys; sys.modules['ray'] = None; from pywebbench.cli import main; "
        f"sys.argv = ['pywebbench', 'load', '{refserver.url}/', '--agents', '2', '-d', '0.1']; "
        "main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Ray is not installed; install it with: pip install 'pywebbench[ray]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_engine_waits_for_the_start_instant(refserver: RefServer) -> None:
    at = time.time_ns() + 400_000_000
    result = run_load(
        LoadSpec(url=refserver.url + "/hello", connections=1, max_requests=10, start_at_unix_ns=at)
    )
    assert result.requests == 10 and result.launched_at_unix_ns is not None
    late_ms = (result.launched_at_unix_ns - at) / 1e6
    assert 0 <= late_ms <= LATE_MS, late_ms  # how late a wait ends: module docstring
    assert result.started_at * 1e9 >= at
    with pytest.raises(ValueError, match="^start_at_unix_ns: more than 60 s in the future"):
        run_load(LoadSpec(url=refserver.url + "/", start_at_unix_ns=time.time_ns() + 10**12))


def test_run_with_load_agents_keeps_each_agents_result(
    ray_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)
    results = tmp_path / "res"
    proc = pwb(
        "run", "--server", "uvicorn-h11", "--framework", "raw-asgi", "--workload", "hello",
        "-d", "1", "--max-replicates", "1", "--replicates", "1", "-c", "4",
        "--python", default_interpreters()[0].name,
        "--warmup", "fixed", "--warmup-duration", "0.5",
        "--load-agents", "2", "--ray", ray_cluster, "--no-report",
        results=results,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
        assert study.iterations and all(it.requests > 0 for it in study.iterations)
        for it in study.iterations:
            assert it.id is not None
            agents = store.load_agents(it.id)
            assert [a.agent for a in agents] == ["agent-0", "agent-1"]
            assert all(a.status == "ok" and a.node for a in agents)
            assert sum(a.requests or 0 for a in agents) == it.requests
            assert sum(a.connections for a in agents) == 4
    assert study.runs[0].config["load"]["load_agents"] == 2
    assert not marked_processes(MARK, mark), "processes left behind"


def test_one_generator_bound_agent_flags_the_merged_result(refserver: RefServer) -> None:
    spec = LoadSpec(url=refserver.url + "/hello", connections=1, max_requests=50)
    place = AgentPlace("agent-0", "n0", "host", "127.0.0.1", 1, [0], "cpu")
    bound = run_load(spec)
    bound = bound.model_copy(
        update={"generator": bound.generator.model_copy(update={"generator_bound": True})}
    )
    agents = [
        AgentOutcome(place=place, spec=spec, result=run_load(spec)),
        AgentOutcome(place=replace(place, name="agent-1"), spec=spec, result=bound),
    ]
    load = finish(agents)
    assert load.merged is not None and load.merged.requests == 100
    assert load.generator_bound and load.merged.generator_bound
    rows = load.agents_document()["agents"]
    assert [r["generator_bound"] for r in rows] == [False, True]


def test_a_failed_agent_is_in_the_agents_document(refserver: RefServer) -> None:
    spec = LoadSpec(url=refserver.url + "/hello", connections=1, max_requests=20, cpus=[1])
    place = AgentPlace("agent-0", "n0", "host", "127.0.0.1", 1, [0, 1], "cpu")
    lost = replace(place, name="agent-1", node_id="n1", ip="127.0.0.2")
    load = finish(
        [
            AgentOutcome(place=place, spec=spec, result=run_load(spec)),
            AgentOutcome(place=lost, spec=spec, result=None, failure="the node died"),
        ]
    )
    doc = json.loads(json.dumps(load.agents_document()))  # JSON through and through
    ok, failed = doc["agents"]
    assert ok["status"] == "ok" and ok["requests"] == 20 and ok["cpus"] == [1]
    assert ok["result"]["requests"] == 20 and ok["node"] == "host (127.0.0.1)"
    assert failed == {
        "agent": "agent-1",
        "node": "host (127.0.0.2)",
        "node_id": "n1",
        "cpu_model": "cpu",
        "cpus": [1],
        "status": "failed",
        "failure_reason": "the node died",
        "connections": 1,
        "rate": None,
        "requests": None,
        "rps": None,
        "start_lateness_us": None,
        "schedule_lag_p99_us": None,
        "generator_cpu_s": None,
        "generator_bound": False,
        "result": None,
    }
    # The study's store rows hold the same fields.
    rows = [agent_row(7, a) for a in load.agents]
    assert [r.agent for r in rows] == ["agent-0", "agent-1"] and rows[0].iteration_id == 7
    assert rows[0].cpus_json == "[1]" and rows[0].requests == 20 and rows[0].status == "ok"
    assert json.loads(rows[0].result_json or "") == ok["result"]
    assert rows[1].failure_reason == "the node died" and rows[1].result_json is None


def test_the_study_agent_replaces_a_lost_agent(ray_cluster: str, refserver: RefServer) -> None:
    spec = LoadSpec(url=refserver.url + "/hello", connections=2, duration_s=2.0)
    with RayStudyAgent(2, ray_cluster) as agent:
        first = agent._pool_for(spec)
        threading.Timer(1.0, os.kill, (first.places[0].pid, signal.SIGKILL)).start()
        result = agent.run(spec)
        lost = agent.lost() or ""
        assert lost.startswith(f"agent-0 on {first.places[0].node}: ") and "died" in lost
        assert result.requests > 0  # agent-1's share, kept
        again = agent.run(spec.replace(duration_s=0.3))  # a fresh set of agents
        assert agent.lost() is None and again.requests > 0
        assert agent._pool is not first


_PRIORITY = (
    "import os\n"
    "from pywebbench.load.ray_agents import measuring_priority\n"
    "try:\n"
    "    measuring_priority()\n"
    "except RuntimeError as e:\n"
    "    print('refused:', e)\n"
    "print('nice', os.getpriority(os.PRIO_PROCESS, 0))\n"
)


def test_a_measuring_worker_goes_back_to_nice_zero() -> None:
    """Servers and engines started from a Ray worker inherit its niceness: measured at 15
    they would lose their core to any nice-0 neighbour, unlike the local executor's."""
    assert os.geteuid() == 0, "the suite runs as root (the brief's machine and CI)"
    proc = subprocess.run(
        [sys.executable, "-c", _PRIORITY],
        preexec_fn=lambda: os.nice(15),  # as Ray starts its workers (RAY_worker_niceness=15)
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "nice 0", proc.stdout + proc.stderr


def test_a_worker_that_may_not_lower_its_niceness_names_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(which: int, who: int, prio: int) -> None:
        raise PermissionError(13, "Permission denied")  # as for a user without CAP_SYS_NICE

    monkeypatch.setattr(os, "getpriority", lambda which, who: 15)
    monkeypatch.setattr(os, "setpriority", refuse)
    with pytest.raises(RuntimeError, match="runs at nice 15 .*RAY_worker_niceness=0"):
        measuring_priority()


def test_the_local_cluster_starts_its_workers_at_nice_zero(ray_cluster: str) -> None:
    import ray

    @ray.remote
    def niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, 0)

    assert ray.get([niceness.remote() for _ in range(2)], timeout=60) == [0, 0]


def test_the_study_agent_runs_a_sliced_plan_in_this_process(
    refserver: RefServer, refserver_1ms: RefServer
) -> None:
    """An interleaved group's load is one engine run whose slices follow each other: the
    study agent of ``--load-agents`` runs it here, outside any Ray session, every target
    loaded in every round."""
    plan = SlicePlan(
        load=LoadSpec(url=refserver.url + "/hello", connections=2, duration_s=1.0, cpus=[1]),
        targets=[refserver.url, refserver_1ms.url],
        slice_s=0.1,
        settle_s=0.05,
        rounds=2,
    )
    result = RayStudyAgent(2, None).run_sliced(plan, interval_s=0.1)
    assert sorted((s.round, s.target) for s in result.slices) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(s.requests > 0 for s in result.slices)
