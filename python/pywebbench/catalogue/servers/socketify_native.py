"""socketify's own App (uWebSockets) running the native socketify app."""

from __future__ import annotations

from pywebbench.catalogue.base import LaunchContext
from pywebbench.catalogue.servers._base import CFFI_313T
from pywebbench.catalogue.servers._native import NativeBase


class SocketifyNative(NativeBase):
    name = "socketify-native"
    interface = "socketify"
    free_threaded_unavailable = {"3.13": f"socketify {CFFI_313T}"}
    description = "socketify App: uWebSockets (C++) via cffi, native handlers"
    notes = (
        "The app binds the loopback host explicitly (AppListenOptions). Workers are forks, "
        "each listening on the port (SO_REUSEPORT). Threads are ignored. The fastest Python "
        "option on PyPy here (cffi, no cpyext)."
    )
    pins = {"modern": ("socketify==0.0.31",), "py39": ("socketify==0.0.31",)}

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="socketify App (forked workers)" if ctx.workers > 1 else "socketify App",
            threads_used=False,
            event_loop="uWebSockets loop (libuv) + asyncio",
            http_parser="uWebSockets (C++)",
            backlog=None,
        )


ADAPTER = SocketifyNative()
