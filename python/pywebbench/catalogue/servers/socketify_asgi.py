"""socketify (uWebSockets via cffi) hosting an ASGI app."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI
from pywebbench.catalogue.servers.socketify_wsgi import SocketifyBase


class SocketifyASGI(SocketifyBase):
    name = "socketify-asgi"
    interface = ASGI
    socketify_interface = "asgi"
    description = "socketify ASGI bridge: uWebSockets I/O, the app on an asyncio loop"
    notes = (
        "socketify's listen(port) binds 0.0.0.0: the launcher passes AppListenOptions with "
        "the loopback host. Threads are ignored."
    )


ADAPTER = SocketifyASGI()
