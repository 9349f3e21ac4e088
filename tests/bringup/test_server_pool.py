"""The bring-up's launch options and its server pool (bringup.py), without starting a stack:
``bringup.start`` and ``bringup.stop`` are replaced by recorders, so what is asserted is what
the pool asks for (log directories, ready path, options) and that it stops every process it
started, whatever ends its block. tests/run/test_interleaved.py and tests/ab run real servers
through the same pool."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pwbtest import planned
from pywebbench import bringup
from pywebbench.study.config import resolve
from pywebbench.study.matrix import CellPlan


def _cell(server: str = "waitress", **matrix: Any) -> tuple[Any, CellPlan]:
    config = resolve(
        None,
        {
            "matrix": {
                "interpreters": ["cpython3.11"],
                "servers": [server],
                "frameworks": ["raw-wsgi"],
                "workloads": ["redis"],
                **matrix,
            },
            "timeouts": {"start_s": 33},
        },
        profile="quick",
    )
    (cell,) = planned(config).cells
    return config, cell


def test_launch_options_carry_the_variant_the_study_and_the_services(tmp_path: Path) -> None:
    services = bringup.Services([], tmp_path)
    services.env = {"PWB_REDIS_URL": "redis://127.0.0.1:1/0"}
    config, cell = _cell("gunicorn-gthread", worker_max_requests=[1000])
    options = bringup.launch_options(
        cell.variant,
        log_dir=tmp_path,
        cpus=[0],
        services=services,
        bind="unix",
        protocol="h2c",
        config=config,
    )
    assert options.app_env == {"PWB_REDIS_URL": "redis://127.0.0.1:1/0"}
    assert options.max_requests == 1000 == cell.variant.max_requests
    assert options.start_timeout_s == 33
    assert (options.bind, options.protocol, options.threads) == ("unix", "h2c", 4)
    config, cell = _cell(server_options={"waitress": {"connection_limit": 500}})
    options = bringup.launch_options(cell.variant, log_dir=tmp_path, config=config)
    assert options.server_options == {"connection_limit": 500}
    # without a study (verify): the defaults, the services' environment all the same
    bare = bringup.launch_options(cell.variant, log_dir=tmp_path, services=services)
    assert bare.start_timeout_s == bringup.LaunchOptions(tmp_path).start_timeout_s
    assert bare.server_options == {} and bare.app_env == services.env


class Recorded(SimpleNamespace):
    """A started process as the pool sees it."""


class Launched(list[tuple[Recorded, Any, str]]):
    """Every process the pool started (with its options and ready path), its ``stopped``
    set when the pool stops it; a process named ``stuck`` raises when stopped. ``steps``
    are the pool's start and stop."""

    steps: bringup.BringUp


@pytest.fixture
def launched() -> Launched:
    """The fake processes of a pool built with ``steps=launched.steps``."""
    started = Launched()

    def start(stack: Any, env: Any, options: Any, ready: str) -> Recorded:
        server = Recorded(name=env, stopped=False)
        started.append((server, options, ready))
        return server

    def stop(server: Recorded) -> float:
        server.stopped = True
        if server.name == "stuck":
            raise RuntimeError("process group survived SIGKILL")
        return 0.0

    started.steps = bringup.BringUp(start=cast(Any, start), stop=cast(Any, stop))
    return started


def test_the_pool_starts_each_process_in_its_own_log_directory_and_stops_them_all(
    tmp_path: Path, launched: Launched
) -> None:
    _, cell = _cell()
    options = bringup.launch_options(cell.variant, log_dir=tmp_path / "stack")
    with pytest.raises(ValueError, match="measuring failed"):
        with bringup.ServerPool(
            lambda c: (cast(Any, "env"), options), steps=launched.steps
        ) as pool:
            for k in range(3):
                pool.start(cell, k)
            pool.stop(cast(Any, launched[0][0]))  # one leaves early
            assert len(pool.running) == 2
            raise ValueError("measuring failed")
    assert [o.log_dir for _, o, _ in launched] == [
        tmp_path / "stack" / f"process-{k}" for k in range(3)
    ]
    assert {ready for _, _, ready in launched} == {"/redis"}
    assert all(server.stopped for server, _, _ in launched)
    assert not pool.running


def test_a_process_that_will_not_stop_does_not_keep_the_others_up(
    tmp_path: Path, launched: Launched
) -> None:
    _, cell = _cell()
    options = bringup.launch_options(cell.variant, log_dir=tmp_path)
    envs = iter(["a", "stuck", "b"])
    pool = bringup.ServerPool(lambda c: (cast(Any, next(envs)), options), steps=launched.steps)
    for k in range(3):
        pool.start(cell, k)
    with pytest.raises(RuntimeError, match="survived SIGKILL"):
        pool.close()
    assert all(server.stopped for server, _, _ in launched)
    assert not pool.running


def test_a_process_whose_stop_failed_stays_in_the_pool_for_close(
    tmp_path: Path, launched: Launched
) -> None:
    """A member stopped early (over its memory budget, say) whose stop raises is not lost:
    the pool's close tries it again with the rest."""
    _, cell = _cell()
    options = bringup.launch_options(cell.variant, log_dir=tmp_path)
    envs = iter(["stuck", "a"])
    pool = bringup.ServerPool(lambda c: (cast(Any, next(envs)), options), steps=launched.steps)
    stuck, other = pool.start(cell, 0), pool.start(cell, 1)
    with pytest.raises(RuntimeError, match="survived SIGKILL"):
        pool.stop(stuck)
    assert pool.running == [stuck, other]
    with pytest.raises(RuntimeError, match="survived SIGKILL"):
        pool.close()
    assert other.stopped and not pool.running


def test_the_pool_stops_its_processes_at_once(tmp_path: Path) -> None:
    """Each stop waits for its process group to exit; a group's 48 processes waited one
    after another between two groups of a study. Here every stop waits at a barrier for all
    the others: stopped one after another, the first would wait in vain."""
    import threading

    n = 6
    barrier = threading.Barrier(n, timeout=5.0)
    stopped: list[str] = []

    def start(stack: Any, env: Any, options: Any, ready: str) -> Recorded:
        return Recorded(name=env)

    def stop(server: Recorded) -> float:
        barrier.wait()  # raises BrokenBarrierError unless all n stop together
        stopped.append(server.name)
        return 0.0

    _, cell = _cell()
    options = bringup.launch_options(cell.variant, log_dir=tmp_path)
    envs = iter(str(k) for k in range(n))
    steps = bringup.BringUp(start=cast(Any, start), stop=cast(Any, stop))
    with bringup.ServerPool(lambda c: (cast(Any, next(envs)), options), steps=steps) as pool:
        for k in range(n):
            pool.start(cell, k)
    assert sorted(stopped) == [str(k) for k in range(n)] and not pool.running
