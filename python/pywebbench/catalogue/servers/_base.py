"""What the built-in server adapters share: pins per interpreter generation, launcher scripts,
the fairness manifest.

Two pin sets, as for frameworks: ``py39`` holds the newest versions that install on Python 3.9
(Debian's PyPy 3.9 and CPython 3.9), ``modern`` the current releases for Python 3.10+. A
``pypy`` set, where present, replaces ``py39`` on PyPy. Every pin is exact so a stack's
virtualenv (and its cache key) is reproducible. Versions are the ones measured installing
and running here (docs/servers.md).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import ClassVar, Literal

from pywebbench.catalogue.base import (
    LAUNCHERS_DIR,
    Interpreter,
    LaunchCommand,
    LaunchContext,
    ServerAdapter,
    free_threaded_reason,
)

MIN_PYTHON = (3, 9)
#: Listen backlog asked of every server that lets us set it (capped by net.core.somaxconn).
BACKLOG = 2048
#: Keep-alive idle timeout (seconds) set on servers that let us choose it.
KEEPALIVE_S = 5


@functools.lru_cache(maxsize=1)
def somaxconn() -> int:
    """The kernel's cap on listen backlogs (``net.core.somaxconn``), 4096 if unreadable."""
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text().strip())
    except (OSError, ValueError):
        return 4096


def backlog() -> int:
    """The backlog we ask for: :data:`BACKLOG`, capped by somaxconn (uWSGI refuses more)."""
    return min(BACKLOG, somaxconn())


_listen_backlog = backlog  # for methods whose ``backlog`` parameter hides the function
#: ``manifest(backlog="listen")``: the backlog pywebbench asks of every server.
OurBacklog = Literal["listen"]


def launcher_path(module: str) -> Path:
    """The file of launcher module ``module`` (``launch_waitress``) in ``inside/launchers``."""
    return LAUNCHERS_DIR / f"{module}.py"


def hostport(host: str, port: int) -> str:
    """``host:port`` with IPv6 hosts in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen_address(ctx: LaunchContext, unix_scheme: str = "unix:") -> str:
    """Where the server listens, as one value: ``host:port``, or the unix socket's path
    after ``unix_scheme`` (gunicorn and hypercorn take ``unix:PATH``, uWSGI the bare path)."""
    if ctx.unix_socket is not None:
        return f"{unix_scheme}{ctx.unix_socket}"
    return hostport(ctx.host, ctx.port)


def listen_args(ctx: LaunchContext, uds_flag: str = "--uds") -> list[str]:
    """Where the server listens, as flags: ``--host H --port P``, or ``uds_flag PATH``."""
    if ctx.unix_socket is not None:
        return [uds_flag, str(ctx.unix_socket)]
    return ["--host", ctx.host, "--port", str(ctx.port)]


class BaseAdapter(ServerAdapter):
    """Pins per generation, the Python floor, PyPy availability, the manifest helper.

    Class attributes beyond the contract (read with ``getattr`` by other stages):

    - ``max_workers``: None, or the most worker processes the server can run;
    - ``sends_server_header`` / ``sends_date_header``: whether the server adds those headers
      to an app's response itself (measured here); verification warns instead of failing
      when a server cannot add them;
    - ``pypy_unavailable``: the reason it cannot run on PyPy, or None;
    - ``free_threaded_unavailable``: per CPython version ("3.13"), the reason it cannot run
      on that version's free-threaded build (measured: benchmarks/free_threaded_catalogue.py;
      a version not listed was not found to fail);
    - ``fatal_log_patterns``: log lines meaning the start failed although the process runs
      (the launcher then stops waiting for readiness).

    Servers started from Python name their launcher module in ``launcher`` (a file of
    ``pywebbench/inside/launchers``, run by the stack's Python with the common launcher command
    line plus :meth:`launcher_options`); :meth:`command` then needs no override. The common
    command line carries ``--unix-socket PATH`` when the server binds a unix socket: an
    adapter whose launcher honours it says so with ``unix_bind``.
    """

    pins: ClassVar[dict[str, tuple[str, ...]]] = {"modern": (), "py39": ()}
    pypy_unavailable: ClassVar[str | None] = None
    free_threaded_unavailable: ClassVar[dict[str, str]] = {}
    max_workers: ClassVar[int | None] = None
    fatal_log_patterns: ClassVar[tuple[str, ...]] = ()
    sends_server_header: ClassVar[bool] = True
    sends_date_header: ClassVar[bool] = True
    launcher: ClassVar[str | None] = None

    def requirements(self, interpreter: Interpreter) -> list[str]:
        if interpreter.is_pypy and "pypy" in self.pins:
            return list(self.pins["pypy"])
        return list(self.pins[interpreter.generation])

    def unavailable(self, interpreter: Interpreter) -> str | None:
        major, minor = (int(x) for x in interpreter.minor.split(".")[:2])
        if (major, minor) < MIN_PYTHON:
            return (
                f"pywebbench's server pins need Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]}, "
                f"{interpreter.name} is {interpreter.version}"
            )
        if interpreter.is_pypy and self.pypy_unavailable:
            return self.pypy_unavailable
        return free_threaded_reason(self.free_threaded_unavailable, interpreter)

    # -- helpers for subclasses ------------------------------------------------------------

    def manifest(
        self,
        ctx: LaunchContext,
        *,
        worker_class: str,
        threads_used: bool,
        event_loop: str | None,
        http_parser: str,
        keep_alive: str = "on",
        backlog: int | None | OurBacklog = "listen",
        **extra: object,
    ) -> dict[str, object]:
        """The fairness manifest. ``threads_used`` False means the server serves each
        worker's requests on one thread (event loop, greenlets, or one request at a time):
        the requested threads are ignored and that is recorded. ``backlog`` "listen": the
        listen backlog pywebbench asks of every server (:func:`backlog`)."""
        if backlog == "listen":
            backlog = _listen_backlog()
        threads = ctx.threads if threads_used else 1
        if threads_used:
            model = f"{ctx.workers} process(es) x {threads} thread(s)"
        else:
            model = f"{ctx.workers} process(es), one request-serving thread each"
        out: dict[str, object] = {
            "server": self.name,
            "interface": self.interface,
            "workers": ctx.workers,
            "threads": threads,
            "threads_requested": ctx.threads,
            "threads_ignored": (not threads_used) and ctx.threads > 1,
            "concurrency": model,
            "worker_class": worker_class,
            "event_loop": event_loop,
            "http_parser": http_parser,
            "keep_alive": keep_alive,
            "access_log": False,
            "backlog": backlog,
        }
        if ctx.max_requests:
            out["max_requests"] = ctx.max_requests  # workers recycled after this many
        out.update(extra)
        return out

    def launcher_options(self, ctx: LaunchContext) -> dict[str, object]:
        """Server-specific launcher flags (``{"--connection-limit": 1000}``): the one place
        such a value is set; the launcher declares the flag as required."""
        return {}

    def launcher_argv(self, ctx: LaunchContext) -> list[str]:
        """argv of this adapter's ``launcher`` run by the venv's Python: the common launcher
        command line, then :meth:`launcher_options`."""
        if self.launcher is None:
            raise NotImplementedError(f"{self.name} has no launcher")
        argv = [
            str(ctx.python),
            str(launcher_path(self.launcher)),
            "--app",
            ctx.app,
            "--host",
            ctx.host,
            "--port",
            str(ctx.port),
            "--workers",
            str(ctx.workers),
            "--threads",
            str(ctx.threads),
            "--backlog",
            str(backlog()),
        ]
        if ctx.unix_socket is not None:
            argv += ["--unix-socket", str(ctx.unix_socket)]
        for flag, value in self.launcher_options(ctx).items():
            argv += [flag, str(value)]
        return argv

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        """The launcher's command line (adapters without a launcher override this)."""
        return LaunchCommand(self.launcher_argv(ctx))

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        raise NotImplementedError


#: Measured on CPython 3.13.5t (benchmarks/free_threaded_catalogue.py): cffi 2.x refuses to
#: build there, and every package below needs it.
CFFI_313T = (
    'needs cffi, which refuses to build on free-threaded CPython 3.13 ("CFFI does not '
    'support the free-threaded build of CPython 3.13. Upgrade to free-threaded 3.14")'
)
