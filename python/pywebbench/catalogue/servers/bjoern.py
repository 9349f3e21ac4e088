"""bjoern (C WSGI server on libev; one thread per process)."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter, backlog


class Bjoern(BaseAdapter):
    name = "bjoern"
    interface = WSGI
    description = "bjoern: libev event loop and a C HTTP parser, the app on the loop thread"
    notes = (
        "Builds from source: needs gcc and libev-dev. Threads are ignored (one thread). "
        "bjoern sends neither a Server nor a Date header. On PyPy (cpyext) memory grows to "
        "over 1 GB within 15 s of load here and throughput degrades run after run."
    )
    system_packages = ("libev-dev",)
    sends_server_header = False
    sends_date_header = False
    pins = {"modern": ("bjoern==3.2.2",), "py39": ("bjoern==3.2.2",)}
    launcher = "launch_bjoern"

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="bjoern (pre-forked by the launcher)",
            threads_used=False,
            event_loop="libev",
            http_parser="http-parser (C)",
            keep_alive="on",
            backlog=backlog(),
            tcp_nodelay=True,
        )


ADAPTER = Bjoern()
