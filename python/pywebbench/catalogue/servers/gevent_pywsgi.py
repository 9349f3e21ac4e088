"""gevent.pywsgi (pure-Python WSGI server on gevent's hub, a greenlet per connection)."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import CFFI_313T, BaseAdapter


class GeventPywsgi(BaseAdapter):
    name = "gevent-pywsgi"
    interface = WSGI
    free_threaded_unavailable = {"3.13": f"gevent {CFFI_313T}"}
    description = "gevent.pywsgi.WSGIServer, monkey-patched stdlib, a greenlet per connection"
    notes = (
        "pywsgi writes headers and body in two sends; without TCP_NODELAY each keep-alive "
        "request waits ~40 ms for the client's delayed ACK (1.5k rps measured here). The "
        "launcher sets TCP_NODELAY on every accepted connection (about 10k rps on CPython). "
        "Threads are ignored (greenlets). pywsgi sends no Server header. gevent builds from "
        "source on PyPy (about a minute, once)."
    )
    sends_server_header = False
    pins = {"modern": ("gevent==26.9.0",), "py39": ("gevent==26.7.0",)}
    launcher = "launch_gevent"

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="gevent.pywsgi (pre-forked by the launcher)",
            threads_used=False,
            event_loop="gevent hub",
            http_parser="gevent.pywsgi (pure Python)",
            monkey_patched=True,
            tcp_nodelay="on every accepted connection",
        )


ADAPTER = GeventPywsgi()
