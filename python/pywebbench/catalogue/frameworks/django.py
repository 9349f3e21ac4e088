"""The django framework: app module ``pwb_django``."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.frameworks._base import AppFramework


class Django(AppFramework):
    """Django with no middleware and no ORM (as TechEmpower's django test), JsonResponse."""

    name = "django"
    interface = WSGI
    app = "pwb_django:app"
    io_style = "blocking"
    description = (
        "Django with no middleware and no ORM (as TechEmpower's django test), JsonResponse."
    )
    notes = "Django 5.x needs Python >= 3.10: Python 3.9 / PyPy get Django 4.2 LTS."
    pins = {"modern": ("django==5.2.19",), "py39": ("django==4.2.30",)}


FRAMEWORK = Django()
