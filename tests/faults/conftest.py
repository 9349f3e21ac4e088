"""Real servers for the robustness tests: one provisioned venv (gunicorn, waitress, uvicorn)
on the running CPython, each server started in its own process group and stopped by group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import pywebbench
from pywebbench.catalogue.base import WSGI, Framework, Interpreter, ServerAdapter, Stack
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.provision.services import free_port
from pywebbench.provision.venv import ProvisionedEnv, provision

APPS = Path(pywebbench.__file__).parent / "inside" / "apps"
PINS = ("gunicorn==27.0.1", "waitress==3.0.2", "uvicorn==0.54.0")


class FaultTestServers(ServerAdapter):
    """Not a catalogue adapter: the three servers these tests compare."""

    __test__ = False
    name = "pwb-fault-test-servers"
    interface = WSGI

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return list(PINS)


class NoFramework(Framework):
    """Not a catalogue framework: the raw apps need nothing installed."""

    name = "pwb-fault-test-raw"
    interface = WSGI
    app = ""
    workloads = frozenset()

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return []


@pytest.fixture(scope="session")
def fault_env() -> ProvisionedEnv:
    """The venv with the servers (cached by provisioning across runs)."""
    cpython = [i for i in default_interpreters() if not i.is_pypy]
    assert cpython, "no CPython interpreter found"
    interp = cpython[0]
    server, fw = FaultTestServers(), NoFramework()
    return provision(Stack(interp, server, fw, tuple(server.requirements(interp))))


SERVERS = {
    # One sync worker: one connection at a time.
    "gunicorn-sync-1": lambda port: [
        "-m", "gunicorn", "-w", "1", "-k", "sync", "-b", f"127.0.0.1:{port}",
        "--log-level", "warning", "pwb_raw_wsgi:app",
    ],
    # Two threads behind waitress's asyncore loop.
    "waitress-2": lambda port: [
        "-m", "waitress", "--host=127.0.0.1", f"--port={port}", "--threads=2",
        "pwb_raw_wsgi:app",
    ],
    # One asyncio event loop (h11).
    "uvicorn": lambda port: [
        "-m", "uvicorn", "pwb_raw_asgi:app", "--host", "127.0.0.1", "--port", str(port),
        "--no-access-log", "--log-level", "warning", "--loop", "asyncio", "--http", "h11",
    ],
}  # fmt: skip


class Served:
    """A running server: its URL and process group."""

    def __init__(self, name: str, url: str, proc: subprocess.Popen[bytes], log: Path):
        self.name, self.url, self.proc, self.log = name, url, proc, log

    def alive(self) -> bool:
        """True while the server's main process runs."""
        return self.proc.poll() is None


@contextlib.contextmanager
def serve(env: ProvisionedEnv, name: str, log_dir: Path) -> Iterator[Served]:
    """Starts server ``name`` pinned to CPU 0 on a free port; stops its whole group."""
    port = free_port()
    argv = ["taskset", "-c", "0", str(env.python), *SERVERS[name](port)]
    log = log_dir / f"{name}-{port}.log"
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("PWB_")}
    child_env.update(PYTHONPATH=str(APPS), PYTHONUNBUFFERED="1")
    if "PWB_TEST_MARK" in os.environ:
        child_env["PWB_TEST_MARK"] = os.environ["PWB_TEST_MARK"]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            argv, cwd=APPS, env=child_env, stdout=fh, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/hello", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{name} did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield Served(name, url, proc, log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        # Reap any worker left in the group.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def start_server_for_faults():
    """The :func:`serve` context manager, for tests (conftest modules are not importable)."""
    return serve
