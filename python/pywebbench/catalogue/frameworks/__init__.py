"""Frameworks, one per module: each public module defines ``FRAMEWORK``.

``FRAMEWORKS`` maps the framework name (used in filters and reports) to its instance: the
modules of this package plus the plugin modules named by ``PYWEBBENCH_PLUGINS`` (see
:mod:`pywebbench.catalogue.registry`), found on first use. Each built-in framework's app lives
in ``pywebbench/inside/apps`` and implements every workload of
:mod:`pywebbench.catalogue.workloads` (see docs/workloads.md, docs/contributing.md).
"""

from __future__ import annotations

import functools

from pywebbench.catalogue.base import Framework
from pywebbench.catalogue.registry import FRAMEWORK_ATTRIBUTE, discover


@functools.cache
def frameworks() -> dict[str, Framework]:
    """Name -> framework, built-in and plugins (CatalogueError on a clash or a bad plugin)."""
    return discover(__name__, FRAMEWORK_ATTRIBUTE, Framework)


def get(name: str) -> Framework:
    """The framework called ``name``; ValueError listing the known ones otherwise."""
    known = frameworks()
    try:
        return known[name]
    except KeyError:
        raise ValueError(f"unknown framework {name!r} (known: {', '.join(known)})") from None


def __getattr__(name: str) -> dict[str, Framework]:
    if name == "FRAMEWORKS":
        return frameworks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FRAMEWORKS", "frameworks", "get"]
