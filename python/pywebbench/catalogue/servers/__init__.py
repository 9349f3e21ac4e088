"""Server adapters, one per module: each public module defines ``ADAPTER``.

``ADAPTERS`` maps each adapter's name to its instance: the modules of this package plus the
plugin modules named by ``PYWEBBENCH_PLUGINS`` (see :mod:`pywebbench.catalogue.registry`), found
on first use. Adding a server is one module here (docs/contributing.md); docs/servers.md
describes every adapter.
"""

from __future__ import annotations

import functools

from pywebbench.catalogue.base import ServerAdapter
from pywebbench.catalogue.registry import ADAPTER_ATTRIBUTE, discover


@functools.cache
def adapters() -> dict[str, ServerAdapter]:
    """Name -> adapter, built-in and plugins (CatalogueError on a clash or a bad plugin)."""
    return discover(__name__, ADAPTER_ATTRIBUTE, ServerAdapter)


def __getattr__(name: str) -> dict[str, ServerAdapter]:
    if name == "ADAPTERS":
        return adapters()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ADAPTERS", "adapters"]
