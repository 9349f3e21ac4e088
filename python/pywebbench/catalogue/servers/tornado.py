"""tornado's own HTTPServer running the native tornado app."""

from __future__ import annotations

from pywebbench.catalogue.base import Interpreter, LaunchContext
from pywebbench.catalogue.servers._native import NativeBase


class Tornado(NativeBase):
    name = "tornado"
    interface = "tornado"
    description = "tornado HTTPServer + IOLoop (asyncio), native handlers"
    notes = (
        "Workers: sockets bound first, then tornado.process.fork_processes. Threads are "
        "ignored (coroutine handlers on the IOLoop). tornado toggles TCP_NODELAY per response."
    )
    pins = {"modern": ("tornado==6.6.1",), "py39": ("tornado==6.5.10",)}

    def unavailable(self, interpreter: Interpreter) -> str | None:
        if not interpreter.is_pypy and interpreter.minor == "3.10":
            return "tornado 6.6.1 (the pin for Python 3.10+) needs Python >= 3.11"
        return super().unavailable(interpreter)

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="tornado.process.fork_processes" if ctx.workers > 1 else "tornado",
            threads_used=False,
            event_loop="asyncio (tornado IOLoop)",
            http_parser="tornado.http1connection (pure Python)",
            keep_alive="on",
            backlog=1024,
        )


ADAPTER = Tornado()
