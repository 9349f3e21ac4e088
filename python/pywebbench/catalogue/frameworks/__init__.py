"""Registry of the built-in frameworks: one module per framework.

``FRAMEWORKS`` maps the framework name (used in filters and reports) to an instance. Each
framework's app lives in ``pywebbench/apps`` and implements every workload of
:mod:`pywebbench.catalogue.workloads` (see ``docs/workloads.md``).
"""

from __future__ import annotations

from pywebbench.catalogue.base import Framework
from pywebbench.catalogue.frameworks.aiohttp import Aiohttp
from pywebbench.catalogue.frameworks.bottle import Bottle
from pywebbench.catalogue.frameworks.django import Django
from pywebbench.catalogue.frameworks.falcon import Falcon
from pywebbench.catalogue.frameworks.falcon_asgi import FalconAsgi
from pywebbench.catalogue.frameworks.fastapi import FastAPI
from pywebbench.catalogue.frameworks.flask import Flask
from pywebbench.catalogue.frameworks.pyramid import Pyramid
from pywebbench.catalogue.frameworks.raw_asgi import RawAsgi
from pywebbench.catalogue.frameworks.raw_wsgi import RawWsgi
from pywebbench.catalogue.frameworks.socketify import Socketify
from pywebbench.catalogue.frameworks.starlette import Starlette
from pywebbench.catalogue.frameworks.tornado import Tornado
from pywebbench.catalogue.frameworks.werkzeug import Werkzeug

FRAMEWORKS: dict[str, Framework] = {
    fw.name: fw
    for fw in (
        RawWsgi(),
        RawAsgi(),
        Flask(),
        Bottle(),
        Pyramid(),
        Django(),
        Falcon(),
        FalconAsgi(),
        Starlette(),
        FastAPI(),
        Werkzeug(),
        Tornado(),
        Aiohttp(),
        Socketify(),
    )
}


def get(name: str) -> Framework:
    """The framework called ``name``; ValueError listing the known ones otherwise."""
    try:
        return FRAMEWORKS[name]
    except KeyError:
        known = ", ".join(FRAMEWORKS)
        raise ValueError(f"unknown framework {name!r} (known: {known})") from None


__all__ = ["FRAMEWORKS", "get"]
