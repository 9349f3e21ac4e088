"""The raw-wsgi framework: app module ``pwb_raw_wsgi``."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.frameworks._base import AppFramework


class RawWsgi(AppFramework):
    """A bare WSGI callable: routing by PATH_INFO, no framework."""

    name = "raw-wsgi"
    interface = WSGI
    app = "pwb_raw_wsgi:app"
    io_style = "blocking"
    description = "A bare WSGI callable: routing by PATH_INFO, no framework."
    pins = {"modern": (), "py39": ()}


FRAMEWORK = RawWsgi()
