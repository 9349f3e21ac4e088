"""The host bench (run/bench.py) with a fake load agent and a fake bring-up: what it does when
part of a group cannot run."""

from __future__ import annotations

from pathlib import Path

from fake_bench import FakeAgent, fake_bench
from pwbtest import planned
from pywebbench import bringup
from pywebbench.bringup import StackFailure
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.run.runner import run_study
from pywebbench.store import CellStatus, Phase, Store
from pywebbench.study.config import resolve

CPYTHON = default_interpreters()[0].name


class _BrokenServices(bringup.Services):
    """Services that did not start (as a missing redis-server): their failure is kept for the
    workloads that need them."""

    def __enter__(self) -> _BrokenServices:
        self.failure = StackFailure(Phase.SERVICES, "starting redis failed: not found (fake)")
        return self


def test_a_workload_whose_service_failed_fails_alone_and_is_not_the_ready_path(
    tmp_path: Path,
) -> None:
    """Under ``server_scope = "stack"`` the redis cell comes first in its group; its service
    did not start, so it fails (phase services) and the server of the round is started and
    readied on the hello cell's path, which is measured as usual."""
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
    matrix = planned(config)
    assert [c.workload.name for c in matrix.cells] == ["redis", "hello"]
    bench = fake_bench(services=_BrokenServices)
    timeline = bench.timeline
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(
            config,
            matrix,
            store,
            results_dir=tmp_path,
            agent=FakeAgent(timeline),
            executor=bench.executor(),
        )
        cells = {c.workload: c for c in store.cells(outcome.run_id)}
    starts = [e for e in timeline.entries if e["entry"] == "start"]
    assert len(starts) == 2 and {e["ready"] for e in starts} == {"/hello"}
    assert cells["redis"].status == CellStatus.FAILED
    assert cells["redis"].failure_phase == Phase.SERVICES
    assert cells["hello"].status == CellStatus.OK
