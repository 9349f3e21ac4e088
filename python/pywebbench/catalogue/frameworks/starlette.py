"""The starlette framework: app module ``pwb_starlette``."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI
from pywebbench.catalogue.frameworks._base import AppFramework
from pywebbench.catalogue.workloads import HTTP_WORKLOADS, WS_WORKLOADS


class Starlette(AppFramework):
    """Starlette routes, Response and JSONResponse."""

    name = "starlette"
    interface = ASGI
    app = "pwb_starlette:app"
    workloads = HTTP_WORKLOADS | WS_WORKLOADS  # ws-echo too (docs/websocket.md)
    io_style = "async"
    system_packages = ("libpq5",)  # psycopg (async PostgreSQL client) loads libpq
    description = "Starlette routes, Response and JSONResponse."
    notes = "Starlette 1.x needs Python >= 3.10: Python 3.9 / PyPy get 0.49."
    pins = {"modern": ("starlette==1.10.0",), "py39": ("starlette==0.49.3",)}


FRAMEWORK = Starlette()
