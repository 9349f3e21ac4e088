"""gunicorn with its gevent worker: greenlets, monkey-patched stdlib."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import CFFI_313T, KEEPALIVE_S
from pywebbench.catalogue.servers._gunicorn import GunicornBase

WORKER_CONNECTIONS = 1000


class GunicornGevent(GunicornBase):
    name = "gunicorn-gevent"
    interface = WSGI
    free_threaded_unavailable = {"3.13": f"gevent {CFFI_313T}"}
    worker_class = "gevent"
    description = "gunicorn, gevent worker: pre-forked processes, a greenlet per connection"
    notes = (
        "Threads are ignored (greenlets; up to 1000 connections per worker). The worker "
        "monkey-patches the stdlib, so blocking apps yield on I/O and sleep. gevent builds "
        "from source on PyPy (about a minute, once)."
    )
    pins = {
        # The [gevent] extra brings what gunicorn's gevent worker imports (packaging on 27).
        "modern": ("gunicorn[gevent]==27.0.1", "gevent==26.9.0"),
        "py39": ("gunicorn[gevent]==23.0.0", "gevent==26.7.0"),
    }

    def gunicorn_args(self, ctx: LaunchContext) -> list[str]:
        return ["--worker-connections", str(WORKER_CONNECTIONS)]

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="gevent",
            threads_used=False,
            event_loop="gevent (libev/libuv hub)",
            http_parser="gunicorn (pure Python)",
            keep_alive=f"on, {KEEPALIVE_S} s idle timeout",
            worker_connections=WORKER_CONNECTIONS,
            monkey_patched=True,
            tcp_nodelay=True,
        )


ADAPTER = GunicornGevent()
