"""The aiohttp framework: app module ``pwb_native_aiohttp``."""

from __future__ import annotations

from pywebbench.catalogue.frameworks._base import AppFramework


class Aiohttp(AppFramework):
    """Native aiohttp web application on aiohttp's own server."""

    name = "aiohttp"
    interface = "aiohttp"
    app = "pwb_native_aiohttp"
    io_style = "async"
    system_packages = ("libpq5",)  # psycopg (async PostgreSQL client) loads libpq
    description = "Native aiohttp web application on aiohttp's own server."
    notes = "Threads are accepted but unused; workers are forked after binding one shared socket."
    pins = {"modern": ("aiohttp==3.14.5",), "py39": ("aiohttp==3.13.5",)}


FRAMEWORK = Aiohttp()
