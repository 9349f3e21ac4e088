"""The tornado framework: app module ``pwb_native_tornado``."""

from __future__ import annotations

from pywebbench.catalogue.frameworks._base import AppFramework


class Tornado(AppFramework):
    """Native tornado app on tornado's HTTPServer (coroutine handlers)."""

    name = "tornado"
    interface = "tornado"
    app = "pwb_native_tornado"
    io_style = "async"
    system_packages = ("libpq5",)  # psycopg (async PostgreSQL client) loads libpq
    description = "Native tornado app on tornado's HTTPServer (coroutine handlers)."
    notes = "Threads are accepted but unused; workers are forked after binding (fork_processes)."
    pins = {"modern": ("tornado==6.6.1",), "py39": ("tornado==6.5.10",)}


FRAMEWORK = Tornado()
