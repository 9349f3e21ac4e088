"""Start one stack's server as a pinned process group, wait until it answers, stop it cleanly.

>>> with start_server(stack, env, cpus=[0], log_dir=Path("logs")) as srv:  # doctest: +SKIP
...     print(srv.base_url, srv.cold_start_s, srv.settings)

The server runs in its own session (``setsid``) pinned to ``cpus`` (inherited by its workers),
with stdout+stderr appended to a log file. It listens on a loopback TCP port, or (``bind``
"unix") on a unix-domain socket in a private temporary directory removed when it stops.
Readiness is a connect and then an HTTP GET of ``ready_path`` that gets any HTTP response.
Stopping sends SIGTERM to the group, waits the adapter's ``stop_timeout_s``, then SIGKILLs the
group and reaps it (servers that ignore SIGTERM, like robyn, are handled by the second step).
If this process dies without stopping it (even by SIGKILL), a watchdog process does the same
(see :mod:`pywebbench.launch.process`).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import random
import re
import shutil
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pywebbench.bind import (
    BINDS,
    SOCKET_NAME,
    Bind,
    Target,
    can_bind_unix,
    cannot_bind_unix,
    http_connection,
    new_socket_dir,
    unix_base_url,
)
from pywebbench.catalogue.base import APPS_DIR, HOOKS_DIR, Interpreter, LaunchContext, Stack
from pywebbench.launch.process import ProcessGroup, tail
from pywebbench.protocol import (
    PROTOCOLS,
    cannot_speak_h2c,
    cannot_speak_websocket,
    probe_h2c,
    speaks_h2c,
    speaks_websocket,
)

__all__ = [
    "EnvLike",
    "LaunchError",
    "RunningServer",
    "default_app_dir",
    "free_port",
    "launch_env",
    "start_server",
]

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class EnvLike(Protocol):
    """What :func:`start_server` needs of a provisioned environment (``ProvisionedEnv``)."""

    @property
    def venv(self) -> Path: ...

    @property
    def python(self) -> Path: ...


class LaunchError(RuntimeError):
    """A server did not start: ``phase`` is "config", "spawn", "start" (it exited) or
    "ready" (it never answered); ``log_tail`` is the end of its log."""

    def __init__(self, phase: str, reason: str, log_tail: str = "", log_path: Path | None = None):
        self.phase = phase
        self.reason = reason
        self.log_tail = log_tail
        self.log_path = log_path
        msg = f"server {phase} failed: {reason}"
        if log_path is not None:
            msg += f" (log: {log_path})"
        if log_tail.strip():
            msg += "\n--- log tail ---\n" + log_tail.rstrip()
        super().__init__(msg)


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now.

    Chosen below the kernel's ephemeral range when possible: a port from that range can be
    the local port of a client connection (the load generator's) in TIME_WAIT, which a
    server that binds without SO_REUSEADDR (socketify) then fails to bind.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    lo, _hi = _ephemeral_range()
    if lo > 20_000:
        for _ in range(50):
            port = random.randrange(15_000, lo)
            with socket.socket(family, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def default_app_dir() -> Path:
    """The directory of the built-in framework apps (``pywebbench/inside/apps``)."""
    return APPS_DIR


def interpreter_env(interpreter: Interpreter, runtime_dir: Path) -> dict[str, str]:
    """What the server's interpreter is told: where to report its GIL state and, for a
    free-threaded build run with the GIL forced on or off (``cpython3.13t@gil1``),
    ``PYTHON_GIL``."""
    env = {"PWB_RUNTIME_DIR": str(runtime_dir)}
    if interpreter.gil:
        env["PYTHON_GIL"] = interpreter.gil
    return env


def launch_env(venv: Path, app_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server process: this process's environment without Python
    variables that would leak the orchestrator's interpreter into the stack's, plus the venv
    first on PATH, ``app_dir`` on PYTHONPATH, unbuffered output, then ``extra``. With
    ``PWB_VMPROF_DIR`` in ``extra`` (``--flamegraph`` on PyPy), the start-up hook that lets
    vmprof be switched on from outside comes first on PYTHONPATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CONDA", "UV_", "PYTEST_"))
        and k not in ("PIP_REQUIRE_VIRTUALENV", "__PYVENV_LAUNCHER__")
    }
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["PYTHONPATH"] = str(app_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    if env.get("PWB_VMPROF_DIR"):
        env["PYTHONPATH"] = f"{HOOKS_DIR}{os.pathsep}{app_dir}"
    return env


class RunningServer:
    """A started, answering server. Use as a context manager, or call :meth:`stop`."""

    def __init__(
        self,
        *,
        group: ProcessGroup,
        host: str,
        port: int,
        cold_start_s: float,
        settings: dict[str, Any],
        argv: list[str],
        stop_timeout_s: float,
        name: str,
        socket_dir: Path | None = None,
        runtime_dir: Path | None = None,
        protocol: str = "http1",
    ) -> None:
        self.group = group
        self.pid = group.pid
        self.pgid = group.pgid
        self.host = host
        self.port = port
        self.cold_start_s = cold_start_s
        self.settings = settings
        self.argv = argv
        self.stop_timeout_s = stop_timeout_s
        self.name = name
        #: The private directory of its unix socket (removed by :meth:`stop`), or None (TCP).
        self.socket_dir = socket_dir
        #: Where its app processes report their GIL state (``PWB_RUNTIME_DIR``), or None.
        self.runtime_dir = runtime_dir
        #: What it was asked to speak: "http1" or "h2c".
        self.protocol = protocol
        if group.log_path is None:
            raise ValueError("a server's process group must log to a file")
        self.log_path: Path = group.log_path

    def gil_enabled(self) -> bool | None:
        """Whether its app processes ran with the GIL (any of them: True), as they reported
        (``sys._is_gil_enabled()``); None when none reported (an app not built in)."""
        states = []
        for path in sorted(self.runtime_dir.glob("*.json")) if self.runtime_dir else []:
            try:
                states.append(bool(json.loads(path.read_text())["gil_enabled"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being rewritten, or not ours
        return any(states) if states else None

    @property
    def unix_socket(self) -> Path | None:
        """The unix socket it listens on, or None when it listens on ``host:port``."""
        return self.socket_dir / SOCKET_NAME if self.socket_dir is not None else None

    @property
    def base_url(self) -> str:
        """``http://host:port``, or ``unix:/path/to.sock:`` on a unix socket (the engine's
        URL form): append a request path to get a load spec's ``url``."""
        if self.unix_socket is not None:
            return unix_base_url(self.unix_socket)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def alive(self) -> bool:
        """True while the server's leader process runs."""
        return self.group.alive()

    def members(self) -> list[int]:
        """Live PIDs of the server's process group (master and workers)."""
        return self.group.members()

    def stop(self) -> None:
        """SIGTERM the group, wait ``stop_timeout_s``, SIGKILL the group, reap, remove the
        socket's directory. Idempotent."""
        self.group.stop(self.stop_timeout_s)
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<RunningServer {self.name} pid={self.pid} {self.base_url}>"


def _probe(target: Target, path: str, timeout: float) -> str | None:
    """None if an HTTP response came back, else why not (for the error message)."""
    conn = http_connection(target, timeout)
    try:
        conn.connect()
    except OSError as exc:
        conn.close()
        return f"connect: {exc}"
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        resp = conn.getresponse()
        resp.read()
        return None
    except (OSError, http.client.HTTPException) as exc:
        return f"GET {path}: {exc!r}"
    finally:
        conn.close()


_PORT_CLASH = re.compile(r"address already in use|failed to listen|errno 98", re.IGNORECASE)


def start_server(
    stack: Stack,
    env: EnvLike,
    *,
    port: int | None = None,
    cpus: Sequence[int] = (0,),
    workers: int = 1,
    threads: int = 1,
    app_env: Mapping[str, str] | None = None,
    app_dir: Path | None = None,
    app: str | None = None,
    log_dir: Path,
    ready_path: str = "/hello",
    start_timeout_s: float = 60.0,
    host: str = "127.0.0.1",
    max_requests: int = 0,
    server_options: Mapping[str, int] | None = None,
    bind: Bind = "tcp",
    wrapper: Sequence[str] = (),
    protocol: str = "http1",
) -> RunningServer:
    """Start ``stack``'s server in ``env`` and return once it answers HTTP.

    ``port`` None picks a free port (and retries on another if the server loses the race for
    it). ``bind`` "unix" listens on a unix socket instead, in a new private directory
    (adapters with a ``unix_bind``; :attr:`RunningServer.base_url` then names the socket).
    ``max_requests`` > 0 recycles each worker after that many requests (adapters with a
    ``max_requests_flag``). ``app`` defaults to the framework's app, ``app_dir`` to the
    framework's ``app_dir`` attribute if it has one (a plugin's or a user's), else the
    built-in apps. ``wrapper`` prefixes the server's command (a tool it runs under, such as
    valgrind). ``protocol`` "h2c" asks the server to serve HTTP/2 with prior knowledge
    (adapters with an ``h2c``); the readiness probe then speaks it. Raises
    :class:`LaunchError` (phase config/spawn/start/ready) with the end of the server's log.
    """
    if host not in LOOPBACK_HOSTS:
        raise LaunchError("config", f"host {host!r} is not a loopback address")
    if workers < 1 or threads < 1:
        raise LaunchError("config", f"workers ({workers}) and threads ({threads}) must be >= 1")
    adapter = stack.server
    max_workers = getattr(adapter, "max_workers", None)
    if max_workers is not None and workers > max_workers:
        raise LaunchError(
            "config",
            f"{adapter.name} runs at most {max_workers} worker process(es); "
            f"got --workers {workers}",
        )
    if max_requests and getattr(adapter, "max_requests_flag", None) is None:
        raise LaunchError("config", f"{adapter.name} has no worker recycling (max requests)")
    if bind not in BINDS:
        raise LaunchError("config", f"bind {bind!r}: expected one of {', '.join(BINDS)}")
    if bind == "unix" and not can_bind_unix(adapter):
        raise LaunchError("config", cannot_bind_unix(adapter))
    if protocol not in PROTOCOLS:
        raise LaunchError(
            "config", f"protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}"
        )
    if protocol == "h2c" and not speaks_h2c(adapter):
        raise LaunchError("config", cannot_speak_h2c(adapter))
    if protocol == "ws" and not speaks_websocket(adapter):
        raise LaunchError("config", cannot_speak_websocket(adapter))
    if app_dir is None:
        app_dir = getattr(stack.framework, "app_dir", None) or default_app_dir()
    app_dir = Path(app_dir)
    app = app or stack.framework.app
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    socket_dir = new_socket_dir() if bind == "unix" else None
    ctx = LaunchContext(
        interpreter=stack.interpreter,
        venv=Path(env.venv),
        app_dir=app_dir,
        app=app,
        host=host,
        port=port or 0,
        workers=workers,
        threads=threads,
        env=dict(app_env or {}),
        max_requests=max_requests,
        options=dict(server_options or {}),
        unix_socket=socket_dir / SOCKET_NAME if socket_dir is not None else None,
        protocol=protocol,
    )
    pick_port = port is None and socket_dir is None
    # socketify on PyPy was seen failing to listen on three fresh ports in a row, then
    # succeeding seconds later: retry on new ports, with a growing pause between attempts.
    attempts = 5 if pick_port else 1
    try:
        for attempt in range(attempts):
            if pick_port:
                if attempt:
                    time.sleep(0.5 * attempt)
                ctx = dataclasses.replace(ctx, port=free_port(host))
            try:
                return _start_once(stack, ctx, cpus, log_dir, ready_path, start_timeout_s, wrapper)
            except LaunchError as exc:  # lost the race for a free port: try another one
                clash = exc.phase == "start" and _PORT_CLASH.search(exc.log_tail)
                if not clash or attempt == attempts - 1:
                    raise
    except BaseException:
        if socket_dir is not None:
            shutil.rmtree(socket_dir, ignore_errors=True)
        raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _start_once(
    stack: Stack,
    ctx: LaunchContext,
    cpus: Sequence[int],
    log_dir: Path,
    ready_path: str,
    start_timeout_s: float,
    wrapper: Sequence[str] = (),
) -> RunningServer:
    adapter = stack.server
    try:
        cmd = adapter.command(ctx)
        if wrapper:
            cmd = dataclasses.replace(cmd, argv=[*wrapper, *cmd.argv])
        settings = dict(adapter.settings(ctx))
    except (ValueError, NotImplementedError) as exc:
        raise LaunchError("config", f"{adapter.name}: {exc}") from exc
    where = ctx.unix_socket.parent.name if ctx.unix_socket is not None else ctx.port
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{stack.name}-{where}")
    log_path = log_dir / f"server-{safe}.log"
    runtime_dir = log_dir / f"runtime-{safe}"  # each app process writes its GIL state here
    shutil.rmtree(runtime_dir, ignore_errors=True)
    runtime_dir.mkdir(parents=True)
    env = launch_env(
        ctx.venv,
        ctx.app_dir,
        {**ctx.env, **cmd.env, **interpreter_env(stack.interpreter, runtime_dir)},
    )
    with open(log_path, "ab") as fh:
        fh.write(f"# pywebbench: {' '.join(cmd.argv)}\n".encode())
    t0 = time.monotonic()
    try:
        group = ProcessGroup.start(
            cmd.argv,
            log_path=log_path,
            env=env,
            cwd=cmd.cwd or ctx.app_dir,
            cpus=cpus,
            orphan_grace_s=adapter.stop_timeout_s,
        )
    except (OSError, ValueError) as exc:
        raise LaunchError("spawn", f"cannot run {cmd.argv[0]}: {exc}", "", log_path) from exc
    deadline = t0 + start_timeout_s
    target = Target(ctx.host, ctx.port, str(ctx.unix_socket) if ctx.unix_socket else None)
    why: str | None = "no attempt"
    polls = 0
    fatal_patterns = tuple(getattr(adapter, "fatal_log_patterns", ()))
    try:
        while True:
            code = group.poll()
            if code is not None:
                raise LaunchError(
                    "start", f"{adapter.name} exited with code {code}", tail(log_path), log_path
                )
            why = (
                probe_h2c(target, ready_path, timeout=2.0)
                if ctx.protocol == "h2c"
                else _probe(target, ready_path, timeout=2.0)
            )
            if why is None:
                break
            polls += 1
            if polls % 10 == 0:  # every ~0.5 s: did it log a failure while still running?
                log_tail = tail(log_path)
                fatal = [p for p in fatal_patterns if p in log_tail]
                if _PORT_CLASH.search(log_tail) and why.startswith("connect"):
                    raise LaunchError(
                        "start",
                        f"{adapter.name} could not bind port {ctx.port}",
                        log_tail,
                        log_path,
                    )
                if fatal:
                    raise LaunchError(
                        "start", f"{adapter.name} failed to start: {fatal[0]!r}", log_tail, log_path
                    )
            if time.monotonic() >= deadline:
                raise LaunchError(
                    "ready",
                    f"{adapter.name} did not answer within {start_timeout_s:g} s ({why})",
                    tail(log_path),
                    log_path,
                )
            time.sleep(0.05)
    except BaseException:
        group.stop(adapter.stop_timeout_s)
        raise
    cold = time.monotonic() - t0
    settings.setdefault("cpus", list(cpus))
    return RunningServer(
        group=group,
        host=ctx.host,
        port=ctx.port,
        cold_start_s=cold,
        settings=settings,
        argv=cmd.argv,
        stop_timeout_s=adapter.stop_timeout_s,
        name=stack.name,
        socket_dir=ctx.unix_socket.parent if ctx.unix_socket is not None else None,
        runtime_dir=runtime_dir,
        protocol=ctx.protocol,
    )
