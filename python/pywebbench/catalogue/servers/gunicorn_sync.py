"""gunicorn with its sync worker: one request at a time per process, no keep-alive."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import backlog
from pywebbench.catalogue.servers._gunicorn import GUNICORN_PINS, GunicornBase


class GunicornSync(GunicornBase):
    name = "gunicorn-sync"
    interface = WSGI
    worker_class = "sync"
    description = "gunicorn, sync worker: pre-forked processes, one request at a time each"
    notes = (
        "Threads are ignored: gunicorn turns a sync worker with --threads > 1 into gthread, so "
        "--threads is never passed (use gunicorn-gthread). The sync worker closes the "
        "connection after every response (no keep-alive), so clients reconnect per request."
    )
    pins = GUNICORN_PINS

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="sync",
            threads_used=False,
            event_loop=None,
            http_parser="gunicorn (pure Python)",
            keep_alive="off (closes after every response)",
            backlog=backlog(),
            tcp_nodelay=True,
        )


ADAPTER = GunicornSync()
