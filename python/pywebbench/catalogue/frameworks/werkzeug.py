"""The werkzeug framework: app module ``pwb_werkzeug``."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.frameworks._base import AppFramework


class Werkzeug(AppFramework):
    """Plain Werkzeug: Map/Rule routing, Request/Response wrappers."""

    name = "werkzeug"
    interface = WSGI
    app = "pwb_werkzeug:app"
    io_style = "blocking"
    description = "Plain Werkzeug: Map/Rule routing, Request/Response wrappers."
    pins = {"modern": ("werkzeug==3.1.9",), "py39": ("werkzeug==3.1.9",)}


FRAMEWORK = Werkzeug()
