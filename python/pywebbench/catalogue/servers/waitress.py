"""waitress (pure-Python WSGI server: one I/O loop thread + a pool of worker threads)."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter

#: waitress's connection_limit (its default, 100, throttles high-concurrency runs).
CONNECTION_LIMIT = 1000


class Waitress(BaseAdapter):
    name = "waitress"
    interface = WSGI
    description = "waitress: asyncore-style I/O loop plus --threads worker threads"
    notes = (
        "waitress floods stderr with 'Task queue depth' warnings under load (even with "
        "_quiet): the launcher silences the waitress.queue logger. connection_limit raised "
        "from 100 to 1000 so high-concurrency runs are not throttled by accept. Workers are "
        "processes forked by the launcher on one socket."
    )
    pins = {"modern": ("waitress==3.0.2",), "py39": ("waitress==3.0.2",)}
    launcher = "launch_waitress"
    # the launcher binds the socket and hands it to waitress.serve(sockets=...)
    unix_bind = "launcher --unix-socket PATH"
    settable = {
        "connection_limit": "connections waitress accepts at once (waitress's default 100; "
        "here 1000); past it new clients wait in the kernel's backlog",
    }

    def launcher_options(self, ctx: LaunchContext) -> dict[str, object]:
        return {"--connection-limit": ctx.options.get("connection_limit", CONNECTION_LIMIT)}

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="waitress (pre-forked by the launcher)",
            threads_used=True,
            event_loop="waitress wasyncore (select/poll)",
            http_parser="waitress (pure Python)",
            connection_limit=ctx.options.get("connection_limit", CONNECTION_LIMIT),
            queue_warnings="silenced",
        )


ADAPTER = Waitress()
