"""uvicorn with the stdlib asyncio loop and the pure-Python h11 parser."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI
from pywebbench.catalogue.servers.uvicorn_uvloop import WSPROTO, UvicornBase


class UvicornH11(UvicornBase):
    name = "uvicorn-h11"
    interface = ASGI
    loop = "asyncio"
    http = "h11"
    description = "uvicorn with asyncio and h11 (pure Python; runs everywhere)"
    notes = (
        "Threads are ignored (one event loop per process). With --workers > 1 uvicorn's own "
        "socket leaves Nagle on (40 ms stalls per keep-alive response): launch_uvicorn.py "
        "sets TCP_NODELAY on it."
    )
    pins = {"modern": ("uvicorn==0.54.0", WSPROTO), "py39": ("uvicorn==0.39.0", WSPROTO)}


ADAPTER = UvicornH11()
