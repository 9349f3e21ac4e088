"""socketify (uWebSockets via cffi) hosting a WSGI app."""

from __future__ import annotations

from typing import ClassVar

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import CFFI_313T, BaseAdapter

SOCKETIFY_PINS: dict[str, tuple[str, ...]] = {
    "modern": ("socketify==0.0.31",),
    "py39": ("socketify==0.0.31",),
}


class SocketifyBase(BaseAdapter):
    """socketify's WSGI/ASGI bridges, started by launch_socketify.py."""

    socketify_interface: ClassVar[str]
    pins = SOCKETIFY_PINS
    free_threaded_unavailable = {"3.13": f"socketify {CFFI_313T}"}
    launcher = "launch_socketify"

    def launcher_options(self, ctx: LaunchContext) -> dict[str, object]:
        return {"--interface": self.socketify_interface}

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class=f"socketify {self.socketify_interface.upper()} (forks with SO_REUSEPORT)",
            threads_used=False,
            event_loop="uWebSockets loop (libuv)"
            + (" + asyncio" if self.socketify_interface == "asgi" else ""),
            http_parser="uWebSockets (C++)",
            backlog=None,  # not configurable in socketify
            bind="explicit loopback (AppListenOptions); listen(port) alone binds 0.0.0.0",
        )


class SocketifyWSGI(SocketifyBase):
    name = "socketify-wsgi"
    interface = WSGI
    socketify_interface = "wsgi"
    description = "socketify WSGI bridge: uWebSockets I/O, the app on the loop thread"
    notes = (
        "socketify's listen(port) binds 0.0.0.0: the launcher passes AppListenOptions with "
        "the loopback host. Threads are ignored. Occasionally it fails to bind a free port "
        "('Failed to listen on port N'): the launcher exits then and the start is retried on "
        "another port."
    )


ADAPTER = SocketifyWSGI()
