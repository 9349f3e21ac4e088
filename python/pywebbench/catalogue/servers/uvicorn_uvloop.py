"""uvicorn with uvloop and httptools (the fast configuration); CPython only."""

from __future__ import annotations

from typing import ClassVar

from pywebbench.catalogue.base import ASGI, LaunchCommand, LaunchContext
from pywebbench.catalogue.servers._base import (
    KEEPALIVE_S,
    BaseAdapter,
    backlog,
    launcher_path,
    listen_args,
)

#: uvicorn's WebSocket implementation (ws-echo): pure Python, on every interpreter.
WSPROTO = "wsproto==1.2.0"


class UvicornBase(BaseAdapter):
    """uvicorn's CLI (through launch_uvicorn.py, which sets TCP_NODELAY on the listening
    socket) with an explicit loop and HTTP implementation; access log off."""

    loop: ClassVar[str]
    http: ClassVar[str]
    # Takes uvicorn's own arguments (not the common launcher command line).
    launcher: ClassVar[str] = "launch_uvicorn"
    unix_bind = "--uds PATH"
    websocket = "wsproto (--ws wsproto)"

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        return LaunchCommand(
            [
                str(ctx.python),
                str(launcher_path(self.launcher)),
                ctx.app,
                *listen_args(ctx),
                "--workers",
                str(ctx.workers),
                "--loop",
                self.loop,
                "--http",
                self.http,
                "--ws",
                "wsproto",
                "--no-access-log",
                "--log-level",
                "warning",
                "--backlog",
                str(backlog()),
                "--timeout-keep-alive",
                str(KEEPALIVE_S),
                "--lifespan",
                "auto",
            ]
        )

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="uvicorn (multiprocess supervisor)" if ctx.workers > 1 else "uvicorn",
            threads_used=False,
            event_loop=self.loop,
            http_parser=self.http,
            websocket="wsproto (pure Python)",
            keep_alive=f"on, {KEEPALIVE_S} s idle timeout",
            tcp_nodelay="on the listening socket (uvicorn's multi-worker socket lacks it)",
        )


class UvicornUvloop(UvicornBase):
    name = "uvicorn-uvloop"
    interface = ASGI
    loop = "uvloop"
    http = "httptools"
    description = "uvicorn with uvloop and httptools"
    notes = (
        "Threads are ignored (one event loop per process). With --workers > 1 uvicorn's own "
        "socket leaves Nagle on (40 ms stalls per keep-alive response): launch_uvicorn.py "
        "sets TCP_NODELAY on it. Not on PyPy: uvloop builds there "
        "but fails to import (undefined symbol PyContext_CopyCurrent)."
    )
    pypy_unavailable = (
        "uvloop builds on PyPy but fails to import (undefined symbol PyContext_CopyCurrent); "
        "use uvicorn-h11 or gunicorn-uvicorn (asyncio + httptools) there"
    )
    pins = {
        "modern": ("uvicorn==0.54.0", "uvloop==0.23.0", "httptools==0.9.0", WSPROTO),
        "py39": ("uvicorn==0.39.0", "uvloop==0.22.1", "httptools==0.9.0", WSPROTO),
    }


ADAPTER = UvicornUvloop()
