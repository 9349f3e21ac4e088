"""cheroot (CherryPy's WSGI server: a connection manager and a pool of threads)."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter, backlog


class Cheroot(BaseAdapter):
    name = "cheroot"
    interface = WSGI
    description = "cheroot: selector-based connection manager plus --threads worker threads"
    notes = (
        "With many keep-alive connections and few threads some clients time out (about 1 s "
        "p99 at 64 connections measured here): give it threads >= connections for fairness "
        "to this design."
    )
    pins = {"modern": ("cheroot==11.1.2",), "py39": ("cheroot==11.1.2",)}
    launcher = "launch_cheroot"

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="cheroot (pre-forked by the launcher)",
            threads_used=True,
            event_loop="selectors (connection manager)",
            http_parser="cheroot (pure Python)",
            keep_alive="on",
            backlog=backlog(),
        )


ADAPTER = Cheroot()
