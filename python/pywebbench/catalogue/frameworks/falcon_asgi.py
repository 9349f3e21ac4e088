"""The falcon-asgi framework: app module ``pwb_falcon_asgi``."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI
from pywebbench.catalogue.frameworks._base import AppFramework


class FalconAsgi(AppFramework):
    """Falcon's ASGI App (falcon.asgi), coroutine responders."""

    name = "falcon-asgi"
    interface = ASGI
    app = "pwb_falcon_asgi:app"
    io_style = "async"
    system_packages = ("libpq5",)  # psycopg (async PostgreSQL client) loads libpq
    description = "Falcon's ASGI App (falcon.asgi), coroutine responders."
    pins = {"modern": ("falcon==4.4.0",), "py39": ("falcon==4.4.0",)}


FRAMEWORK = FalconAsgi()
