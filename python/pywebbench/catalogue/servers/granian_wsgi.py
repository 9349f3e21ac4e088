"""granian (Rust HTTP server, hyper + tokio) hosting a WSGI app on blocking threads."""

from __future__ import annotations

from typing import ClassVar

from pywebbench.catalogue.base import WSGI, Interpreter, LaunchCommand, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter, backlog, listen_args

GRANIAN_PINS: dict[str, tuple[str, ...]] = {
    "modern": ("granian==2.8.7",),
    "py39": ("granian==2.5.7",),
}
#: granian 2.8 publishes no CPython 3.13t wheel (it has 3.14t ones) and its source build
#: fetches a git dependency, impossible offline; 2.7.9 is the newest with a cp313t wheel.
GRANIAN_313T = ("granian==2.7.9",)


class GranianBase(BaseAdapter):
    """granian's CLI: HTTP/1.1 only (HTTP/2 only for h2c cells), websockets off (on for ws
    cells), one Rust runtime thread per worker, access log off. ``--blocking-threads`` is the
    number of Python threads running the app."""

    granian_interface: ClassVar[str]
    unix_bind = "--uds PATH"
    h2c = "--http 2"

    def requirements(self, interpreter: Interpreter) -> list[str]:
        if interpreter.free_threaded and interpreter.minor == "3.13":
            return list(GRANIAN_313T)
        return super().requirements(interpreter)

    def unavailable(self, interpreter: Interpreter) -> str | None:
        if interpreter.free_threaded and interpreter.gil == "1":
            return (
                "granian's free-threaded build refuses to start with the GIL on "
                '(PYTHON_GIL=1: "Cannot run a free-threaded Granian build with GIL enabled")'
            )
        return super().unavailable(interpreter)

    def uses_threads(self) -> bool:
        return self.granian_interface == "wsgi"

    def loop(self, ctx: LaunchContext) -> str:
        return "asyncio"

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        return LaunchCommand(
            [
                str(ctx.bin / "granian"),
                "--interface",
                self.granian_interface,
                *listen_args(ctx),
                "--workers",
                str(ctx.workers),
                "--blocking-threads",
                str(ctx.threads if self.uses_threads() else 1),
                "--runtime-threads",
                "1",
                "--loop",
                self.loop(ctx),
                "--http",
                "2" if ctx.protocol == "h2c" else "1",
                "--ws" if ctx.protocol == "ws" else "--no-ws",
                "--backlog",
                str(backlog()),
                "--log-level",
                "warning",
                "--no-access-log",
                ctx.app,
            ]
        )

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class=f"granian {self.granian_interface} (Rust hyper/tokio)",
            threads_used=self.uses_threads(),
            event_loop=self.loop(ctx) if not self.uses_threads() else "tokio (Rust) for I/O",
            http_parser="hyper (Rust), HTTP/1.1 only (HTTP/2 only in h2c cells)",
            keep_alive="on (granian default)",
            runtime_threads=1,
        )


class GranianWSGI(GranianBase):
    name = "granian-wsgi"
    interface = WSGI
    granian_interface = "wsgi"
    description = "granian, WSGI interface: Rust I/O, the app on --threads blocking threads"
    notes = (
        "On PyPy (granian 2.5.7, cpyext) memory grows quickly under load (over 1 GB in 15 s "
        "measured here) and throughput drops run after run."
    )
    pins = GRANIAN_PINS


ADAPTER = GranianWSGI()
