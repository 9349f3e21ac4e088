"""hypercorn (ASGI, h11/h2 parsers in pure Python) on asyncio."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI, LaunchCommand, LaunchContext
from pywebbench.catalogue.servers._base import KEEPALIVE_S, BaseAdapter, backlog, listen_address


class Hypercorn(BaseAdapter):
    name = "hypercorn"
    interface = ASGI
    description = "hypercorn with its asyncio worker (h11 for HTTP/1.1, h2 for h2c)"
    notes = (
        "Threads are ignored (one event loop per worker). The asyncio worker on every "
        "interpreter (its uvloop worker adds little and does not run on PyPy). hypercorn's "
        "default backlog is 100; we set 2048 like everywhere else."
    )
    pins = {"modern": ("hypercorn==0.18.0",), "py39": ("hypercorn==0.17.3",)}
    # Its --max-requests-jitter flag sets the jitter to max_requests (0.17-0.18), so it is
    # never passed: the jitter stays 0.
    max_requests_flag = "--max-requests"
    unix_bind = "--bind unix:PATH"
    h2c = "always on (prior knowledge, h2)"
    websocket = "wsproto (built in)"

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        return LaunchCommand(
            [
                str(ctx.bin / "hypercorn"),
                "--bind",
                listen_address(ctx),
                "--workers",
                str(ctx.workers),
                "--worker-class",
                "asyncio",
                "--backlog",
                str(backlog()),
                "--keep-alive",
                str(KEEPALIVE_S),
                "--graceful-timeout",
                "3",
                "--log-level",
                "warning",
                "--error-logfile",
                "-",
                *self.max_requests_args(ctx),
                ctx.app,
            ]
        )

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="asyncio",
            threads_used=False,
            event_loop="asyncio",
            http_parser="h11 (pure Python; h2 in h2c cells)",
            keep_alive=f"on, {KEEPALIVE_S} s idle timeout",
        )


ADAPTER = Hypercorn()
