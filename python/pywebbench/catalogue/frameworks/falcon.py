"""The falcon framework: app module ``pwb_falcon``."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.frameworks._base import AppFramework


class Falcon(AppFramework):
    """Falcon's WSGI App, resource classes, resp.media for JSON."""

    name = "falcon"
    interface = WSGI
    app = "pwb_falcon:app"
    io_style = "blocking"
    description = "Falcon's WSGI App, resource classes, resp.media for JSON."
    pins = {"modern": ("falcon==4.4.0",), "py39": ("falcon==4.4.0",)}


FRAMEWORK = Falcon()
