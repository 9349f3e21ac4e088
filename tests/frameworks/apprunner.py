"""Helpers for the framework tests: provisioned venvs, real services, real servers.

One virtualenv per interpreter holds every built-in framework (the union of their pinned
requirements, which also proves the pins are mutually consistent) plus two real servers:
waitress for WSGI apps and uvicorn (asyncio + h11) for ASGI apps; the native apps run their
own servers. Venvs are provisioned by :func:`pywebbench.provision.venv.provision` (cached under
``$PWB_CACHE_DIR``). Every server runs in its own process group and is stopped by group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pywebbench
from pywebbench.catalogue.base import ASGI, WSGI, Framework, Interpreter, ServerAdapter, Stack
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.frameworks._base import generation
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.provision.services import free_port
from pywebbench.provision.venv import ProvisionedEnv, provision

APPS = Path(pywebbench.__file__).parent / "apps"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

RUNNER_PINS = {
    "modern": ("waitress==3.0.2", "uvicorn==0.54.0"),
    "py39": ("waitress==3.0.2", "uvicorn==0.39.0"),
}


class Url(str):
    """A base URL that also carries the server's process group id."""

    pgid: int


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            rest = stat[stat.rfind(")") + 2 :].split()
            if rest[2] == str(pgid) and rest[0] not in ("Z", "X"):
                out.append(int(entry))
    return out


class TestRunners(ServerAdapter):
    """Not a catalogue adapter: installs waitress + uvicorn for these tests."""

    __test__ = False
    name = "pwb-test-runners"
    interface = WSGI

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return list(RUNNER_PINS[generation(interpreter)])


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
                "--http", "h11"]  # fmt: skip
    module = framework.app.split(":")[0]
    return [python, str(APPS / f"{module}.py"), "--host", "127.0.0.1", "--port", str(port)]


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


@contextlib.contextmanager
def run_app(
    env: ProvisionedEnv,
    framework: Framework,
    log_dir: Path,
    app_env: Mapping[str, str] = {},  # noqa: B006 - read only
    extra_args: list[str] | None = None,
) -> Iterator[Url]:
    """Serve ``framework``'s app on a free loopback port; yield its base URL; stop the group."""
    port = free_port()
    argv = server_argv(env, framework, port) + (extra_args or [])
    log_path = log_dir / f"{framework.name}-{port}.log"
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("PWB_")}
    child_env.update(app_env, PYTHONPATH=str(APPS), PYTHONUNBUFFERED="1")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, cwd=APPS, env=child_env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        url = Url(f"http://127.0.0.1:{port}")
        url.pgid = proc.pid
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"{framework.name} exited: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/hello", timeout=2) as resp:
                    resp.read()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{framework.name} not ready: {log_path.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield url
    finally:
        pgid = proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            proc.wait(timeout=5)
        deadline = time.monotonic() + 5
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        assert not _group_alive(pgid), f"{framework.name}: processes left in group {pgid}"
