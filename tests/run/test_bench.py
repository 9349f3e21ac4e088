"""The host bench (run/bench.py) with a fake load agent and a fake bring-up: what it does when
part of a group cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_bench import FakeAgent, fake_bench
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.run.runner import run_study
from pywebbench.store import CellStatus, Phase, Store
from pywebbench.study.config import resolve
from pywebbench.study.matrix import expand

CPYTHON = default_interpreters()[0].name


class _BrokenServices:
    """Services that do not start (as a missing redis-server)."""

    def __enter__(self) -> dict[str, str]:
        raise OSError("redis-server: not found (fake)")

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_workload_whose_service_failed_fails_alone_and_is_not_the_ready_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``server_scope = "stack"`` the redis cell comes first in its group; its service
    did not start, so it fails (phase services) and the server of the round is started and
    readied on the hello cell's path, which is measured as usual."""
    monkeypatch.setattr(
        "pywebbench.provision.services.start_services", lambda names, workdir: _BrokenServices()
    )
    config = resolve(
        {
            "matrix": {
                "interpreters": [CPYTHON],
                "servers": ["gunicorn-gthread"],
                "frameworks": ["raw-wsgi"],
                "workloads": ["redis", "hello"],
            },
            "load": {
                "server_scope": "stack",
                "replicates": 2,
                "warmup": "fixed",
                "warmup_iterations": 0,
                "duration_s": 0.5,
            },
            "cpus": {"server": [0], "generator": [1]},
            "report": False,
        }
    )
    matrix = expand(config)
    assert [c.workload.name for c in matrix.cells] == ["redis", "hello"]
    with fake_bench(monkeypatch) as timeline, Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(config, matrix, store, results_dir=tmp_path, agent=FakeAgent(timeline))
        cells = {c.workload: c for c in store.cells(outcome.run_id)}
    starts = [e for e in timeline.entries if e["entry"] == "start"]
    assert len(starts) == 2 and {e["ready"] for e in starts} == {"/hello"}
    assert cells["redis"].status == CellStatus.FAILED
    assert cells["redis"].failure_phase == Phase.SERVICES
    assert cells["hello"].status == CellStatus.OK
