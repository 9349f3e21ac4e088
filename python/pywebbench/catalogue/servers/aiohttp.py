"""aiohttp's own web server running the native aiohttp app."""

from __future__ import annotations

from pywebbench.catalogue.base import LaunchContext
from pywebbench.catalogue.servers._native import NativeBase


class Aiohttp(NativeBase):
    name = "aiohttp"
    interface = "aiohttp"
    description = "aiohttp.web on asyncio, native handlers"
    notes = (
        "Workers: one socket bound, then forked processes. Threads are ignored (one event "
        "loop). aiohttp's C HTTP parser (llhttp) on CPython; on PyPy its pure-Python parser."
    )
    pins = {"modern": ("aiohttp==3.14.5",), "py39": ("aiohttp==3.13.5",)}

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="aiohttp.web (forked workers)" if ctx.workers > 1 else "aiohttp.web",
            threads_used=False,
            event_loop="asyncio",
            http_parser="pure Python" if ctx.interpreter.is_pypy else "llhttp (C)",
            keep_alive="on, 75 s idle timeout (aiohttp default)",
            backlog=1024,
        )


ADAPTER = Aiohttp()
