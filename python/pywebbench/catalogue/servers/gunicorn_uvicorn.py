"""gunicorn managing uvicorn workers (the ``uvicorn-worker`` package): ASGI."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI, LaunchContext
from pywebbench.catalogue.servers._gunicorn import GUNICORN_PINS, GunicornBase
from pywebbench.catalogue.servers.uvicorn_uvloop import WSPROTO


class GunicornUvicorn(GunicornBase):
    name = "gunicorn-uvicorn"
    interface = ASGI
    worker_class = "uvicorn_worker.UvicornWorker"
    websocket = "wsproto (the uvicorn worker's ws auto)"
    description = "gunicorn's arbiter with uvicorn workers (uvloop + httptools where available)"
    notes = (
        "Threads are ignored (asyncio event loop). The worker picks uvloop + httptools when "
        "installed: on CPython 3.10+ both are; on Python 3.9 (PyPy) uvloop does not import, "
        "so it runs asyncio + httptools. uvicorn's keep-alive timeout (5 s) applies."
    )
    pins = {
        "modern": (
            *GUNICORN_PINS["modern"],
            "uvicorn-worker==0.4.0",
            "uvicorn==0.54.0",
            "uvloop==0.23.0",
            "httptools==0.9.0",
            WSPROTO,
        ),
        "py39": (
            *GUNICORN_PINS["py39"],
            "uvicorn-worker==0.4.0",
            "uvicorn==0.39.0",
            "httptools==0.9.0",
            WSPROTO,
        ),
    }

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        uvloop = any(r.startswith("uvloop") for r in self.requirements(ctx.interpreter))
        return self.manifest(
            ctx,
            worker_class="uvicorn_worker.UvicornWorker",
            threads_used=False,
            event_loop="uvloop" if uvloop else "asyncio",
            http_parser="httptools",
            keep_alive="on, 5 s idle timeout (uvicorn)",
        )


ADAPTER = GunicornUvicorn()
