"""Fixtures for the load engine tests: reference servers (separate processes, core 0), small
HTTP/1.1 servers on unix sockets (threads of the test process: the reference server listens
on TCP only), and the two-node local Ray cluster of the Ray tests.

The generator runs in the test process; where CPU placement matters it is pinned to core 1.
Every server is started by a fixture and stopped (its whole process group) at teardown.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pwbtest import UnixHttpServer, marked_processes
from pywebbench.refserver import RefServer

SERVER_CPUS = [0]


@pytest.fixture(scope="session")
def refserver() -> Iterator[RefServer]:
    """A plain reference server (no delay), pinned to core 0."""
    with RefServer(cpus=SERVER_CPUS) as srv:
        yield srv


@pytest.fixture(scope="session")
def refserver_1ms() -> Iterator[RefServer]:
    """A reference server answering every request after a fixed 1 ms delay."""
    with RefServer(cpus=SERVER_CPUS, delay_ms=1.0) as srv:
        yield srv


@pytest.fixture(scope="session")
def refserver_stall() -> Iterator[RefServer]:
    """A reference server that freezes for 300 ms every 2 s."""
    with RefServer(cpus=SERVER_CPUS, stall_ms=300.0, stall_every_s=2.0) as srv:
        yield srv


@pytest.fixture()
def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def unix_servers(tmp_path: Path) -> Iterator[Callable[[str], UnixHttpServer]]:
    """Start :class:`UnixHttpServer` s on sockets under ``tmp_path`` (``unix_servers(name)``),
    each served by a thread of the test process; all stopped after the test."""
    started: list[tuple[UnixHttpServer, threading.Thread]] = []

    def start(name: str) -> UnixHttpServer:
        srv = UnixHttpServer(str(tmp_path / name))
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
        t.start()
        started.append((srv, t))
        return srv

    yield start
    for srv, t in started:
        srv.shutdown()
        srv.server_close()
        t.join(5)


@pytest.fixture()
def unix_server(unix_servers: Callable[[str], UnixHttpServer]) -> str:
    """A keep-alive HTTP/1.1 server on a unix socket; its socket's path."""
    return unix_servers("app.sock").path


RAY_MARK = "PWB_RAY_CLUSTER_MARK"


class _RayCluster:
    """A two-node local Ray cluster (``ray.cluster_utils.Cluster``: two raylets on this
    machine, 2 CPUs each), the test process connected to it. Ray starts slowly, so it is
    started once for every test that uses it and stopped after the last of them; its
    processes carry a marker in their environment, and stopping checks that none is left."""

    def __init__(self) -> None:
        self.cluster: Any = None
        self.address = ""
        self.mark = ""

    def start(self) -> str:
        import ray
        from pywebbench.load.ray_agents import local_ray_env
        from ray.cluster_utils import Cluster

        if self.cluster is not None:
            return self.address
        self.mark = uuid.uuid4().hex
        # Inherited by the Ray processes started here and by everything they start (workers,
        # the servers of their tasks), not by this process's other children.
        os.environ[RAY_MARK] = self.mark
        local_ray_env()
        try:
            for attempt in range(2):  # a busy machine can miss Ray's 15 s agent start once
                self.cluster = Cluster()
                try:
                    self.cluster.add_node(num_cpus=2, include_dashboard=False)
                    self.cluster.add_node(num_cpus=2)
                    self.cluster.wait_for_nodes()
                    break
                except Exception:
                    self.cluster.shutdown()
                    if attempt:
                        self.cluster = None
                        raise
        finally:
            os.environ.pop(RAY_MARK, None)
        ray.init(address=self.cluster.address, log_to_driver=False)
        self.address = self.cluster.address
        return self.address

    def stop(self) -> None:
        import ray

        if self.cluster is None:
            return
        cluster, self.cluster = self.cluster, None
        ray.shutdown()
        cluster.shutdown()
        # shutdown() signals Ray's processes and returns; on a host that steals up to 50% of
        # the cores they may take a moment to exit. Poll up to 10 s, as the session's census
        # does (tests/conftest.py), before calling one left behind (issue 52).
        deadline = time.monotonic() + 10.0
        left = marked_processes(RAY_MARK, self.mark)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = marked_processes(RAY_MARK, self.mark)
        assert not left, f"Ray processes left behind: {left}"


_CLUSTER = _RayCluster()
_LAST_USER: list[str] = []


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """The address of the shared two-node local Ray cluster (see :class:`_RayCluster`)."""
    yield _CLUSTER.start()
    _CLUSTER.stop()


def pytest_collection_finish(session: pytest.Session) -> None:
    users = [i.nodeid for i in session.items if "ray_cluster" in getattr(i, "fixturenames", ())]
    _LAST_USER[:] = users[-1:]


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _LAST_USER and item.nodeid == _LAST_USER[0]:
        _CLUSTER.stop()  # the rest of the session runs without Ray
