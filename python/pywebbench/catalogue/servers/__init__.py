"""Server adapters, one per module. ``ADAPTERS`` maps each adapter's name to an instance.

Adding a server: write a module with a :class:`~pywebbench.catalogue.servers._base.BaseAdapter`
subclass (pins per interpreter generation, ``command()``, ``settings()``, ``notes``) and add
it to the list below. docs/servers.md describes every adapter.
"""

from __future__ import annotations

from pywebbench.catalogue.base import ServerAdapter
from pywebbench.catalogue.servers.aiohttp import Aiohttp
from pywebbench.catalogue.servers.bjoern import Bjoern
from pywebbench.catalogue.servers.cheroot import Cheroot
from pywebbench.catalogue.servers.daphne import Daphne
from pywebbench.catalogue.servers.eventlet import Eventlet
from pywebbench.catalogue.servers.gevent_pywsgi import GeventPywsgi
from pywebbench.catalogue.servers.granian_asgi import GranianASGI
from pywebbench.catalogue.servers.granian_wsgi import GranianWSGI
from pywebbench.catalogue.servers.gunicorn_gevent import GunicornGevent
from pywebbench.catalogue.servers.gunicorn_gthread import GunicornGthread
from pywebbench.catalogue.servers.gunicorn_sync import GunicornSync
from pywebbench.catalogue.servers.gunicorn_uvicorn import GunicornUvicorn
from pywebbench.catalogue.servers.hypercorn import Hypercorn
from pywebbench.catalogue.servers.meinheld import Meinheld
from pywebbench.catalogue.servers.socketify_asgi import SocketifyASGI
from pywebbench.catalogue.servers.socketify_native import SocketifyNative
from pywebbench.catalogue.servers.socketify_wsgi import SocketifyWSGI
from pywebbench.catalogue.servers.tornado import Tornado
from pywebbench.catalogue.servers.twisted_wsgi import TwistedWSGI
from pywebbench.catalogue.servers.uvicorn_h11 import UvicornH11
from pywebbench.catalogue.servers.uvicorn_uvloop import UvicornUvloop
from pywebbench.catalogue.servers.uwsgi import UWSGI
from pywebbench.catalogue.servers.waitress import Waitress

_ALL: list[ServerAdapter] = [
    # WSGI
    GunicornSync(),
    GunicornGthread(),
    GunicornGevent(),
    UWSGI(),
    GranianWSGI(),
    Waitress(),
    Bjoern(),
    Cheroot(),
    Meinheld(),
    GeventPywsgi(),
    Eventlet(),
    TwistedWSGI(),
    SocketifyWSGI(),
    # ASGI
    UvicornUvloop(),
    UvicornH11(),
    GunicornUvicorn(),
    GranianASGI(),
    Hypercorn(),
    Daphne(),
    SocketifyASGI(),
    # native
    Tornado(),
    Aiohttp(),
    SocketifyNative(),
]

ADAPTERS: dict[str, ServerAdapter] = {a.name: a for a in _ALL}

__all__ = ["ADAPTERS"]
