"""granian (Rust HTTP server) hosting an ASGI app on a Python event loop."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI, LaunchContext
from pywebbench.catalogue.servers.granian_wsgi import GRANIAN_PINS, GranianBase


class GranianASGI(GranianBase):
    name = "granian-asgi"
    interface = ASGI
    granian_interface = "asgi"
    websocket = "--ws (Rust)"
    description = "granian, ASGI interface: Rust I/O, the app on uvloop (asyncio on PyPy)"
    notes = (
        "Threads are ignored (one event loop per worker). uvloop on CPython 3.10+, asyncio on "
        "Python 3.9/PyPy (uvloop does not import on PyPy). On PyPy memory grows quickly under "
        "load (cpyext)."
    )
    pins = {
        "modern": (*GRANIAN_PINS["modern"], "uvloop==0.23.0"),
        "py39": GRANIAN_PINS["py39"],
    }

    def loop(self, ctx: LaunchContext) -> str:
        reqs = self.requirements(ctx.interpreter)
        return "uvloop" if any(r.startswith("uvloop") for r in reqs) else "asyncio"


ADAPTER = GranianASGI()
