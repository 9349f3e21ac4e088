"""The pyramid framework: app module ``pwb_pyramid``."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.frameworks._base import AppFramework


class Pyramid(AppFramework):
    """Pyramid (WebOb), Configurator routes and the json renderer."""

    name = "pyramid"
    interface = WSGI
    app = "pwb_pyramid:app"
    io_style = "blocking"
    # Pyramid 2.0.2 (the newest for Python 3.9) imports pkg_resources, which setuptools >= 81
    # no longer ships.
    description = "Pyramid (WebOb), Configurator routes and the json renderer."
    pins = {"modern": ("pyramid==2.1",), "py39": ("pyramid==2.0.2", "setuptools==80.10.2")}


FRAMEWORK = Pyramid()
