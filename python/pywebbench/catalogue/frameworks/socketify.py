"""The socketify framework: app module ``pwb_native_socketify``."""

from __future__ import annotations

from pywebbench.catalogue.frameworks._base import AppFramework


class Socketify(AppFramework):
    """Native socketify (uWebSockets via cffi) app; coroutine handlers on its asyncio loop."""

    name = "socketify"
    interface = "socketify"
    app = "pwb_native_socketify"
    io_style = "async"
    system_packages = ("libpq5",)  # psycopg (async PostgreSQL client) loads libpq
    description = (
        "Native socketify (uWebSockets via cffi) app; coroutine handlers on its asyncio loop."
    )
    notes = (
        "Binds the given loopback host (listen(port) alone would bind 0.0.0.0). Threads "
        "are accepted but unused; workers fork before listening (SO_REUSEPORT)."
    )
    pins = {"modern": ("socketify==0.0.31",), "py39": ("socketify==0.0.31",)}


FRAMEWORK = Socketify()
