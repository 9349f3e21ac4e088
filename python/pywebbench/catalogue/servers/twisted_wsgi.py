"""Twisted Web's WSGIResource: the reactor does I/O, the app runs on its thread pool."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter, backlog


class TwistedWSGI(BaseAdapter):
    name = "twisted-wsgi"
    interface = WSGI
    description = "Twisted Web WSGIResource: epoll reactor for I/O, --threads pool for the app"
    notes = "Threads = the reactor's thread pool size. Access log off (Site.log disabled)."
    pins = {"modern": ("twisted==26.10.0",), "py39": ("twisted==26.4.0",)}
    launcher = "launch_twisted"

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="twisted.web (pre-forked by the launcher)",
            threads_used=True,
            event_loop="twisted epollreactor",
            http_parser="twisted.web.http (pure Python)",
            keep_alive="on",
            backlog=backlog(),
            tcp_nodelay=True,
        )


ADAPTER = TwistedWSGI()
