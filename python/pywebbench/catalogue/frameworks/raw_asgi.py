"""The raw-asgi framework: app module ``pwb_raw_asgi``."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI
from pywebbench.catalogue.frameworks._base import AppFramework
from pywebbench.catalogue.workloads import HTTP_WORKLOADS, WS_WORKLOADS


class RawAsgi(AppFramework):
    """A bare ASGI 3 callable (with lifespan): routing by scope['path'], no framework."""

    name = "raw-asgi"
    interface = ASGI
    app = "pwb_raw_asgi:app"
    workloads = HTTP_WORKLOADS | WS_WORKLOADS  # ws-echo too (docs/websocket.md)
    io_style = "async"
    system_packages = ("libpq5",)  # psycopg (async PostgreSQL client) loads libpq
    description = "A bare ASGI 3 callable (with lifespan): routing by scope['path'], no framework."
    pins = {"modern": (), "py39": ()}


FRAMEWORK = RawAsgi()
