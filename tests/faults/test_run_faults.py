"""`pywebbench run --faults`: the runner's fault phase and what it stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.catalogue.workloads import HttpRequest
from pywebbench.load import LocalAgent
from pywebbench.refserver import RefServer
from pywebbench.run import loadio
from pywebbench.run.config import resolve
from pywebbench.run.runner import StudyRunner
from pywebbench.store import Store

PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")


def test_fault_phase_of_the_runner_against_the_reference_server() -> None:
    """The runner's own fault phase (real engine, real fault clients, reference server)."""
    config = resolve(None, {"load": {"duration_s": 1.0, "faults": "slowloris=4,smuggle=1"}})
    assert config.load.faults == "slowloris=4,smuggle=1"
    events = SimpleNamespace(phases=[])
    events.phase = events.phases.append
    runner = SimpleNamespace(
        config=config,
        events=events,
        generator_cpus=[1],
        agent=LocalAgent(),
        _progress=lambda snap: None,
    )
    cell = SimpleNamespace(
        variant=SimpleNamespace(key="refserver"),
        request=HttpRequest("GET", "/hello"),
        concurrency=8,
        rate=None,
    )
    with RefServer(cpus=[0]) as srv:
        server = SimpleNamespace(base_url=srv.url, alive=lambda: True)
        spec = loadio.build_spec(
            srv.url, cell.request, connections=8, duration_s=1.0, timeout_s=2.0, cpus=[1]
        )
        clean = runner.agent.run(spec)
        rob = StudyRunner._fault_phase(runner, cell, server, clean)  # type: ignore[arg-type]
    assert events.phases == ["faults refserver: slowloris=4,smuggle=1"]
    json.dumps(rob)  # stored as JSON in the cell's flags
    assert rob["mix"] == "slowloris=4,smuggle=1"
    assert rob["survived"] and rob["answered_after"]
    assert rob["clean_rps"] > 100 and rob["faulted_rps"] > 100
    assert rob["malformed"] == {"smuggle": "rejected"} and rob["malformed_accepted"] == []
    assert rob["score"] > 50
    assert rob["report"]["kinds"]["slow-headers"]["attempts"] >= 4


def test_run_with_faults_end_to_end(tmp_path: Path) -> None:
    """`pywebbench run --faults` on one real stack: the robustness lands in the store."""
    results = tmp_path / "res"
    cpython = default_interpreters()[0].name
    proc = subprocess.run(
        [PYWEBBENCH, "run", "--server", "uvicorn-h11", "--framework", "raw-asgi",
         "--workload", "hello", "--python", cpython, "-d", "1", "--warmup-duration", "0.5",
         "-c", "16", "--replicates", "1", "--faults", "slowloris=8,bad-request-line=1",
         "--no-report", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    cells = [c for c in study.cells if c.status == "ok"]
    assert cells, [(c.key, c.failure_reason) for c in study.cells]
    rob = cells[0].flags["robustness"]
    assert rob["mix"] == "slowloris=8,bad-request-line=1"
    assert rob["survived"] and 0 <= rob["score"] <= 100
    assert rob["malformed"]["bad-request-line"] in {"rejected", "closed"}
    assert rob["report"]["kinds"]["slow-headers"]["attempts"] >= 8
