"""The flask framework: app module ``pwb_flask``."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.frameworks._base import AppFramework


class Flask(AppFramework):
    """Flask (Werkzeug + Jinja2), jsonify for JSON."""

    name = "flask"
    interface = WSGI
    app = "pwb_flask:app"
    io_style = "blocking"
    description = "Flask (Werkzeug + Jinja2), jsonify for JSON."
    pins = {"modern": ("flask==3.1.3",), "py39": ("flask==3.1.3",)}


FRAMEWORK = Flask()
