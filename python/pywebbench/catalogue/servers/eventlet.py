"""eventlet.wsgi (pure-Python WSGI server on eventlet's hub, green threads)."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter

#: Green threads per process (eventlet.wsgi's max_size), recorded in the settings.
MAX_GREENTHREADS = 1024


class Eventlet(BaseAdapter):
    name = "eventlet"
    interface = WSGI
    free_threaded_unavailable = {
        "3.13": "eventlet needs greenlet, and greenlet 3.5.6 does not compile against "
        "free-threaded CPython 3.13 ('_PyCriticalSection_SuspendAll' was not declared)"
    }
    description = "eventlet.wsgi.server, monkey-patched stdlib, a green thread per connection"
    notes = (
        "Threads are ignored (green threads, at most 1024 per process). eventlet is in "
        "maintenance mode and prints a deprecation warning at start. eventlet.wsgi sends no "
        "Server header."
    )
    sends_server_header = False
    pins = {"modern": ("eventlet==0.41.3",), "py39": ("eventlet==0.40.4",)}
    launcher = "launch_eventlet"

    def launcher_options(self, ctx: LaunchContext) -> dict[str, object]:
        return {"--max-greenthreads": MAX_GREENTHREADS}

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="eventlet.wsgi (pre-forked by the launcher)",
            threads_used=False,
            event_loop="eventlet hub (epolls)",
            http_parser="eventlet.wsgi (pure Python)",
            monkey_patched=True,
            max_greenthreads=MAX_GREENTHREADS,
            tcp_nodelay=True,
        )


ADAPTER = Eventlet()
