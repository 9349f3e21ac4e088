"""gunicorn with its gthread worker: processes x threads, keep-alive."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import KEEPALIVE_S, backlog
from pywebbench.catalogue.servers._gunicorn import GUNICORN_PINS, GunicornBase


class GunicornGthread(GunicornBase):
    name = "gunicorn-gthread"
    interface = WSGI
    worker_class = "gthread"
    description = "gunicorn, gthread worker: pre-forked processes, each with a thread pool"
    notes = "Keep-alive connections are parked in a selector and handed to the thread pool."
    pins = GUNICORN_PINS

    def gunicorn_args(self, ctx: LaunchContext) -> list[str]:
        return ["--threads", str(ctx.threads)]

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="gthread",
            threads_used=True,
            event_loop="selectors (connection parking)",
            http_parser="gunicorn (pure Python)",
            keep_alive=f"on, {KEEPALIVE_S} s idle timeout",
            backlog=backlog(),
            tcp_nodelay=True,
        )


ADAPTER = GunicornGthread()
