"""Helpers for the framework tests: provisioned venvs, real services, real servers.

One virtualenv per interpreter holds every built-in framework (the union of their pinned
requirements, which also proves the pins are mutually consistent) plus two real servers:
waitress for WSGI apps and uvicorn (asyncio + h11, wsproto for ws-echo) for ASGI apps; the
native apps run their own servers. Venvs are provisioned by
:func:`pywebbench.provision.venv.provision` (cached under ``$PWB_CACHE_DIR``). Every server
is a :class:`pywebbench.launch.process.ProcessGroup`.
"""

from __future__ import annotations

import contextlib
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from pywebbench.catalogue.base import (
    APPS_DIR,
    ASGI,
    WSGI,
    Framework,
    Interpreter,
    ServerAdapter,
    Stack,
)
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.catalogue.servers.uvicorn_uvloop import WSPROTO
from pywebbench.launch.process import ProcessGroup, group_members, tail
from pywebbench.provision.services import free_port
from pywebbench.provision.venv import ProvisionedEnv, provision

APPS = APPS_DIR
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

RUNNER_PINS = {
    "modern": ("waitress==3.0.2", "uvicorn==0.54.0", WSPROTO),
    "py39": ("waitress==3.0.2", "uvicorn==0.39.0", WSPROTO),
}


class Url(str):
    """A base URL that also carries the server's process group id."""

    pgid: int


class TestRunners(ServerAdapter):
    """Not a catalogue adapter: installs waitress + uvicorn for these tests."""

    __test__ = False
    name = "pwb-test-runners"
    interface = WSGI

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return list(RUNNER_PINS[interpreter.generation])


class AllFrameworks(Framework):
    """Not a catalogue framework: the union of every built-in framework's requirements."""

    name = "pwb-test-all-frameworks"
    interface = WSGI
    app = ""
    workloads = frozenset()

    def requirements(self, interpreter: Interpreter) -> list[str]:
        pins: dict[str, str] = {}
        for fw in FRAMEWORKS.values():
            for spec in fw.requirements(interpreter):
                name = spec.split("==")[0].lower()
                if pins.setdefault(name, spec) != spec:
                    raise AssertionError(f"conflicting pins for {name}: {pins[name]} vs {spec}")
        return sorted(pins.values())


def interpreters() -> list[Interpreter]:
    found = default_interpreters()
    if IN_CI and not any(i.is_pypy for i in found):
        raise AssertionError("CI: pypy3 is missing (Debian package pypy3)")
    return found


def env_for(interpreter: Interpreter) -> ProvisionedEnv:
    server, fw = TestRunners(), AllFrameworks()
    reqs = tuple(server.requirements(interpreter) + fw.requirements(interpreter))
    return provision(Stack(interpreter, server, fw, reqs))


def server_argv(env: ProvisionedEnv, framework: Framework, port: int) -> list[str]:
    python = str(env.python)
    if framework.interface == WSGI:
        return [python, "-m", "waitress", "--host=127.0.0.1", f"--port={port}", "--threads=4",
                framework.app]  # fmt: skip
    if framework.interface == ASGI:
        return [python, "-m", "uvicorn", framework.app, "--host", "127.0.0.1", "--port",
                str(port), "--no-access-log", "--log-level", "warning", "--loop", "asyncio",
                "--http", "h11", "--ws", "wsproto"]  # fmt: skip
    module = framework.app.split(":")[0]
    return [python, str(APPS / f"{module}.py"), "--host", "127.0.0.1", "--port", str(port)]


@contextlib.contextmanager
def run_app(
    env: ProvisionedEnv,
    framework: Framework,
    log_dir: Path,
    app_env: Mapping[str, str] = {},  # noqa: B006 - read only
    extra_args: list[str] | None = None,
) -> Iterator[Url]:
    """Serve ``framework``'s app on a free loopback port; yield its base URL; stop the group.

    socketify now and then fails to bind a free port ("Failed to listen on port N"); its app
    then exits (``pwb_native_socketify``'s watchdog), and as the launcher does we retry on
    another port, twice."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("PWB_")}
    child_env.update(app_env, PYTHONPATH=str(APPS), PYTHONUNBUFFERED="1")
    for attempt in range(3):
        port = free_port()
        argv = server_argv(env, framework, port) + (extra_args or [])
        log_path = log_dir / f"{framework.name}-{port}.log"
        group = ProcessGroup.start(argv, log_path=log_path, env=child_env, cwd=APPS)
        url = Url(f"http://127.0.0.1:{port}")
        url.pgid = group.pgid
        try:
            if _wait_ready(group, url, log_path, framework.name, last_try=attempt == 2):
                break
        except BaseException:
            _stop(group, framework.name)
            raise
        _stop(group, framework.name)
    try:
        yield url
    finally:
        _stop(group, framework.name)


def _wait_ready(group: ProcessGroup, url: str, log_path: Path, name: str, last_try: bool) -> bool:
    """True once the app answers; False if it could not bind its port, whether it exited or
    not (unless ``last_try``); raises AssertionError if it exits otherwise or is not ready
    within 60 s."""
    deadline = time.monotonic() + 60
    while True:
        if group.poll() is not None:
            if not last_try and "failed to listen" in tail(log_path, 2000).lower():
                return False
            raise AssertionError(f"{name} exited: {tail(log_path, 2000)}")
        try:
            with urllib.request.urlopen(url + "/hello", timeout=2) as resp:
                resp.read()
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            if not last_try and "failed to listen" in tail(log_path, 2000).lower():
                return False
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} not ready: {tail(log_path, 2000)}") from None
            time.sleep(0.1)


def _stop(group: ProcessGroup, name: str) -> None:
    group.stop(10.0)  # SIGTERM, 10 s, SIGKILL; raises if a member survives
    assert not group_members(group.pgid), f"{name}: processes left behind"
