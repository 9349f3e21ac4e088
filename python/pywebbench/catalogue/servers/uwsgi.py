"""uWSGI: the C server that embeds Python (CPython plugin, or its PyPy plugin on PyPy)."""

from __future__ import annotations

import glob
from pathlib import Path

from pywebbench.catalogue.base import WSGI, Interpreter, LaunchCommand, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter, backlog, listen_address


def pypy_paths(interpreter: Interpreter) -> tuple[Path, Path] | None:
    """(libpypy shared library, PyPy home) for uWSGI's PyPy plugin, or None if not found."""
    exe = Path(interpreter.path).resolve()
    libs = [exe.parent / f"libpypy{interpreter.minor}-c.so", exe.parent / "libpypy3-c.so"]
    libs += [Path(p) for p in sorted(glob.glob(f"/usr/lib/*/libpypy{interpreter.minor}-c.so"))]
    homes = [Path("/usr/lib/pypy3"), exe.parent.parent, Path(f"/usr/lib/pypy{interpreter.minor}")]
    lib = next((p for p in libs if p.is_file()), None)
    home = next((p for p in homes if p.is_dir()), None)
    return (lib, home) if lib is not None and home is not None else None


class UWSGI(BaseAdapter):
    name = "uwsgi"
    interface = WSGI
    free_threaded_unavailable = {
        "3.13": "uWSGI 2.0.31 compiles and starts on free-threaded CPython 3.13, but its worker "
        "answered no request within 60 s (benchmarks/free_threaded_catalogue.py)"
    }
    description = "uWSGI (pip package 'uwsgi', compiled on install): master + processes x threads"
    notes = (
        "Native HTTP/1.1 keep-alive socket (--http11-socket), --threads per process: with one "
        "thread a process serves one keep-alive connection at a time (the others wait), so "
        "give it threads >= connections / workers. Logging off (--disable-logging), "
        "--die-on-term so SIGTERM stops it (uWSGI 2.0 reloads on SIGTERM otherwise). Only the "
        "'uwsgi' package is used: 'pyuwsgi' installs a clashing uwsgi command. On PyPy its "
        "PyPy plugin loads libpypy (Debian: /usr/lib/x86_64-linux-gnu/libpypy3.9-c.so). "
        "uWSGI sends neither Server nor Date headers. Apps must send Content-Length: a "
        "response without it is neither chunked nor closed, so clients wait for uWSGI's 4 s "
        "socket timeout."
    )
    # The PyPy plugin logs an app import error and keeps running without an app.
    fatal_log_patterns = ("Exception ignored from cffi callback <function uwsgi_pypy_loader",)
    sends_server_header = False
    sends_date_header = False
    pins = {"modern": ("uwsgi==2.0.31",), "py39": ("uwsgi==2.0.31",)}
    max_requests_flag = "--max-requests"
    # uWSGI binds a unix socket when the address has no port
    unix_bind = "--http11-socket PATH"

    def max_requests_args(self, ctx: LaunchContext) -> list[str]:
        """``--max-requests N`` and ``--min-worker-lifetime 0``: uWSGI otherwise keeps a
        worker at least 10 s whatever its requests, so a short window would never recycle."""
        args = super().max_requests_args(ctx)
        return [*args, "--min-worker-lifetime", "0"] if args else []

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        argv = [str(ctx.bin / "uwsgi")]
        if ctx.interpreter.is_pypy:
            paths = pypy_paths(ctx.interpreter)
            if paths is None:
                raise ValueError(
                    "uWSGI's PyPy plugin needs libpypy<version>-c.so and the PyPy home "
                    "(Debian package pypy3-lib); not found next to "
                    f"{ctx.interpreter.path} or in /usr/lib"
                )
            lib, home = paths
            site = ctx.venv / "lib" / f"pypy{ctx.interpreter.minor}" / "site-packages"
            argv += [
                "--pypy-lib",
                str(lib),
                "--pypy-home",
                str(home),
                "--pypy-pp",
                str(ctx.app_dir),
                "--pypy-pp",
                str(site),
                "--pypy-wsgi",
                ctx.app,
            ]
        else:
            argv += [
                "--virtualenv",
                str(ctx.venv),
                "--pythonpath",
                str(ctx.app_dir),
                "--module",
                ctx.app,
                # Exit when the app does not import (the PyPy plugin registers no app in
                # uWSGI's table, so --need-app would always fail there).
                "--need-app",
            ]
        argv += [
            "--http11-socket",
            listen_address(ctx, unix_scheme=""),
            "--master",
            "--processes",
            str(ctx.workers),
            "--threads",
            str(ctx.threads),
            "--listen",
            str(backlog()),
            "--disable-logging",
            "--die-on-term",
            "--ignore-sigpipe",
            "--ignore-write-errors",
            "--disable-write-exception",
            *self.max_requests_args(ctx),
        ]
        return LaunchCommand(argv)

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="uWSGI prefork (master + processes x threads)",
            threads_used=True,
            event_loop=None,
            http_parser="uWSGI (C), --http11-socket",
            keep_alive="on (HTTP/1.1); one connection per thread at a time",
            plugin="pypy" if ctx.interpreter.is_pypy else "python (CPython)",
        )


ADAPTER = UWSGI()
