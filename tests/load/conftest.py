"""Fixtures for the load engine tests: reference servers (separate processes, core 0).

The generator runs in the test process; where CPU placement matters it is pinned to core 1.
Every server is started by a fixture and stopped (its whole process group) at teardown.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
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
