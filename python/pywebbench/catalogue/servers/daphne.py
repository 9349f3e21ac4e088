"""daphne (Django Channels' ASGI server, Twisted on the asyncio reactor)."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI, LaunchContext
from pywebbench.catalogue.servers._base import CFFI_313T, BaseAdapter


class Daphne(BaseAdapter):
    name = "daphne"
    interface = ASGI
    free_threaded_unavailable = {"3.13": f"daphne (Twisted's TLS stack) {CFFI_313T}"}
    description = "daphne: Twisted's HTTP server on the asyncio reactor"
    notes = (
        "daphne has no worker processes: launch_daphne.py binds the socket and forks "
        "--workers daphne processes on it (daphne --fd). Threads are ignored. On PyPy "
        "cryptography must come from a wheel (43.0.3, binary-only) and twisted is pinned to "
        "25.5.0, else the resolver backtracks to daphne 2.3.0 or builds cryptography (fails). "
        "daphne sends no Date header."
    )
    sends_date_header = False
    websocket = "autobahn (built in)"
    pins = {
        "modern": ("daphne==4.2.3",),
        "py39": ("daphne==4.2.3", "twisted==25.5.0", "cryptography==43.0.3"),
    }

    launcher = "launch_daphne"

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="daphne (pre-forked by the launcher)",
            threads_used=False,
            event_loop="twisted asyncioreactor",
            http_parser="twisted.web.http (pure Python)",
            keep_alive="on (twisted default)",
            tcp_nodelay=True,
        )


ADAPTER = Daphne()
