"""The bottle framework: app module ``pwb_bottle``."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.frameworks._base import AppFramework


class Bottle(AppFramework):
    """Bottle, single-module micro-framework; dicts become JSON."""

    name = "bottle"
    interface = WSGI
    app = "pwb_bottle:app"
    io_style = "blocking"
    description = "Bottle, single-module micro-framework; dicts become JSON."
    pins = {"modern": ("bottle==0.13.4",), "py39": ("bottle==0.13.4",)}


FRAMEWORK = Bottle()
