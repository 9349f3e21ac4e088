"""Every server adapter, started for real: CPython, and PyPy for every adapter declared
compatible. Each stack is provisioned with :func:`pywebbench.provision.venv.provision` (cached
under ``$PWB_CACHE_DIR``: the same venvs ``pywebbench verify`` uses), started with
:func:`pywebbench.launch.start_server` with 2 workers x 2 threads pinned to CPU 0, asked for
``/hello`` over one keep-alive connection, stopped, and its process group checked empty in
``/proc``.
"""

from __future__ import annotations

import http.client
import os
import time
import warnings
from pathlib import Path

import pytest
from pywebbench.catalogue.base import ASGI, WSGI, Interpreter
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.catalogue.servers import ADAPTERS
from pywebbench.catalogue.stacks import make_stack
from pywebbench.launch import LaunchError, RunningServer, group_members, start_server
from pywebbench.launch.process import tail
from pywebbench.provision.venv import ProvisionedEnv, ProvisionError, provision

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
HELLO = b"Hello, World!"
WORKERS, THREADS = 2, 2


def _interpreters() -> list[Interpreter]:
    found = default_interpreters()
    if IN_CI and not any(i.is_pypy for i in found):
        raise AssertionError("CI: pypy3 is missing (Debian package pypy3)")
    return found


INTERPRETERS = _interpreters()


def framework_for(interface: str):
    """The built-in hello-capable framework of an interface: raw WSGI/ASGI, or the native
    framework sharing a native server's interface."""
    if interface == WSGI:
        return FRAMEWORKS["raw-wsgi"]
    if interface == ASGI:
        return FRAMEWORKS["raw-asgi"]
    matches = [f for f in FRAMEWORKS.values() if f.interface == interface]
    assert len(matches) == 1, f"one native framework expected for {interface}: {matches}"
    return matches[0]


CASES = [
    pytest.param(interp, adapter, id=f"{interp.name}-{adapter.name}")
    for interp in INTERPRETERS
    for adapter in ADAPTERS.values()
    if adapter.unavailable(interp) is None
]

_ENVS: dict[str, ProvisionedEnv] = {}


def env_for(stack) -> ProvisionedEnv:
    """Provision (or reuse) a stack's venv; a failure fails the test with uv's reason."""
    key = stack.env_key()
    if key not in _ENVS:
        try:
            _ENVS[key] = provision(stack)
        except ProvisionError as exc:
            pytest.fail(f"provisioning {stack.name} failed: {exc.reason} (log: {exc.log_path})")
    return _ENVS[key]


def affinity(pid: int) -> str | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


class Stalled(Exception):
    """A request got no answer within the client's timeout."""

    def __init__(self, index: int) -> None:
        super().__init__(f"request {index} got no answer within {TIMEOUT_S:g} s")


#: A hello answered on loopback takes milliseconds (a quarter of them under 30 ms is
#: asserted below), tens at 2.9x slower (a 1.45x slower core at 50% steal,
#: docs/contributing.md): 10 s without an answer needs 10 s of holds, where the host steals
#: in slices of milliseconds: far rarer than 1 in 10,000 (issue 52).
TIMEOUT_S = 10.0


def get_hello(host: str, port: int, n: int) -> tuple[list[http.client.HTTPResponse], list[float]]:
    """``n`` GET /hello on one connection (http.client reconnects if the server closes).
    Raises :class:`Stalled` naming the request that timed out."""
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    responses, times = [], []
    try:
        for index in range(n):
            t0 = time.perf_counter()
            try:
                conn.request("GET", "/hello")  # (a reconnect when the server closed)
                resp = conn.getresponse()
                resp.body = resp.read()  # type: ignore[attr-defined]
            except TimeoutError as exc:
                raise Stalled(index) from exc
            times.append(time.perf_counter() - t0)
            responses.append(resp)
            if resp.will_close:
                conn.close()
    finally:
        conn.close()
    return responses, times


def server_log(server: RunningServer) -> str:
    """The tail of a server's own log, for a failure's message."""
    return tail(server.group.log_path) if server.group.log_path else ""


@pytest.mark.parametrize(("interp", "adapter"), CASES)
def test_hello(interp: Interpreter, adapter, tmp_path: Path) -> None:
    stack = make_stack(interp, adapter, framework_for(adapter.interface))
    env = env_for(stack)
    try:
        server = start_server(
            stack, env, cpus=[0], workers=WORKERS, threads=THREADS, log_dir=tmp_path
        )
    except LaunchError as exc:
        pytest.fail(str(exc))
    pgid = server.pgid
    try:
        members = server.members()
        assert len(members) >= WORKERS, f"expected >= {WORKERS} processes, got {members}"
        assert {affinity(p) for p in members} <= {"0", None}, "not pinned to CPU 0"
        try:
            responses, times = get_hello(server.host, server.port, 30)
        except (OSError, http.client.HTTPException) as broken:
            pytest.fail(f"{broken!r}\nlog:\n{server_log(server)}")
        except Stalled as stall:
            # Seen once in CI (pypy3.9 hypercorn): one keep-alive request unanswered for
            # 10 s, never reproduced in 27 local runs, idle or with both cores busy. A fresh
            # connection tells a stalled connection from a dead server; either way the
            # failure carries the server's own log.
            log = server_log(server)
            try:
                retry = get_hello(server.host, server.port, 30)
            except (Stalled, OSError, http.client.HTTPException) as again:
                pytest.fail(f"{stall}; again on a fresh connection: {again!r}\nlog:\n{log}")
            warnings.warn(
                f"{stack.name}: {stall}; a fresh connection answered 30 of 30\nlog:\n{log}",
                stacklevel=1,
            )
            responses, times = retry
        first = responses[0]
        assert first.status == 200, (first.status, first.body)
        assert first.body == HELLO
        assert all(r.status == 200 and r.body == HELLO for r in responses)
        # No Nagle/delayed-ACK stall (~40 ms per request) on keep-alive connections. Such a
        # stall delays every request, so the fastest quarter shows it; a host that steals
        # delays some requests, and would need to delay 19 of the 25 by 30 ms to fail this:
        # 19 holds of 30 ms in a row, where the host takes at most half the cores in slices
        # of milliseconds (docs/contributing.md), far rarer than 1 in 10,000 (issue 52).
        kept = sorted(times[5:])
        assert kept[len(kept) // 4] < 0.030, f"latencies {[round(t, 4) for t in times]}"
        # The adapter's header flags are what the server really does (verify relies on them).
        assert (first.getheader("Server") is not None) == adapter.sends_server_header, dict(
            first.getheaders()
        )
        assert (first.getheader("Date") is not None) == adapter.sends_date_header, dict(
            first.getheaders()
        )
        settings = server.settings
        assert settings["workers"] == WORKERS and settings["access_log"] is False
        assert settings["threads"] in (1, THREADS)
        assert settings["threads_ignored"] == (settings["threads"] == 1)
        assert server.alive()
    finally:
        server.stop()
    assert not server.alive()
    assert group_members(pgid) == [], f"processes of group {pgid} left after stop"
    log = server.log_path.read_bytes()
    assert len(log) < 200_000, f"server log grew to {len(log)} bytes (access log on?)"


DJANGO_ON_UWSGI = [
    pytest.param(interp, id=interp.name)
    for interp in INTERPRETERS
    if ADAPTERS["uwsgi"].unavailable(interp) is None
    and FRAMEWORKS["django"].unavailable(interp) is None
]


@pytest.mark.parametrize("interp", DJANGO_ON_UWSGI)
def test_django_on_uwsgi(interp: Interpreter, tmp_path: Path) -> None:
    """Regression: Django sets no Content-Length by itself and uWSGI's HTTP/1.1 socket neither
    chunks nor closes, so every response ended only at uWSGI's 4 s socket timeout and the
    server never looked ready. The app now sets Content-Length (404s included)."""
    from pywebbench.catalogue.workloads import WORKLOADS
    from pywebbench.verify import verify

    adapter = ADAPTERS["uwsgi"]
    stack = make_stack(interp, adapter, FRAMEWORKS["django"])
    env = env_for(stack)
    try:
        server = start_server(stack, env, cpus=[0], log_dir=tmp_path, start_timeout_s=30)
    except LaunchError as exc:
        pytest.fail(str(exc))
    with server:
        for name in ("hello", "json"):
            report = verify(server.base_url, WORKLOADS[name], expect_date_header=False)
            assert report.ok, report.summary()
        conn = http.client.HTTPConnection(server.host, server.port, timeout=2)
        try:
            for path in ("/no-such-page", "/hello"):
                conn.request("GET", path)
                resp = conn.getresponse()
                assert resp.getheader("Content-Length") == str(len(resp.read())), path
        finally:
            conn.close()
    assert group_members(server.pgid) == []
