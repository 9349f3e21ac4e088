"""How the catalogue finds its servers and frameworks: one module, one member.

Every public module of :mod:`pywebbench.catalogue.servers` defines ``ADAPTER`` (a
:class:`~pywebbench.catalogue.base.ServerAdapter` instance), every public module of
:mod:`pywebbench.catalogue.frameworks` defines ``FRAMEWORK`` (a
:class:`~pywebbench.catalogue.base.Framework` instance); modules whose name starts with ``_``
hold shared code. Nothing else registers them.

Plugins add members without editing pywebbench: :data:`PLUGINS_ENV` (``PYWEBBENCH_PLUGINS``)
names importable modules, comma-separated; each defines ``ADAPTER``, ``FRAMEWORK`` or both.
A name used twice, a plugin that does not import, or a module without its member is a
:class:`CatalogueError` (the CLI prints it on one line and exits with status 2).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Sequence
from types import ModuleType
from typing import TypeVar

from pywebbench.catalogue.base import ASGI, WSGI, Framework, ServerAdapter

#: Environment variable naming plugin modules (comma-separated) that add servers/frameworks.
PLUGINS_ENV = "PYWEBBENCH_PLUGINS"
#: The module attribute holding a server adapter, and the one holding a framework.
ADAPTER_ATTRIBUTE = "ADAPTER"
FRAMEWORK_ATTRIBUTE = "FRAMEWORK"

Member = TypeVar("Member", ServerAdapter, Framework)


class CatalogueError(Exception):
    """A catalogue member that cannot be registered (name clash, bad plugin module)."""


def plugin_names(value: str | None = None) -> list[str]:
    """Module names of :data:`PLUGINS_ENV` (or of ``value``), in order, without repeats."""
    raw = os.environ.get(PLUGINS_ENV, "") if value is None else value
    return list(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip()))


def import_plugin(name: str) -> ModuleType:
    """Import one plugin module; CatalogueError naming the variable if that fails or if it
    defines neither ``ADAPTER`` nor ``FRAMEWORK``."""
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the plugin's, say which
        raise CatalogueError(
            f"{PLUGINS_ENV}: cannot import {name!r}: {type(exc).__name__}: {exc}"
        ) from None
    if not any(hasattr(module, a) for a in (ADAPTER_ATTRIBUTE, FRAMEWORK_ATTRIBUTE)):
        raise CatalogueError(
            f"{PLUGINS_ENV}: module {name!r} defines neither {ADAPTER_ATTRIBUTE} nor "
            f"{FRAMEWORK_ATTRIBUTE}"
        )
    return module


def builtin_modules(package: str) -> list[ModuleType]:
    """The public modules of ``package`` (names not starting with ``_``), imported, by name."""
    pkg = importlib.import_module(package)
    names = sorted(i.name for i in pkgutil.iter_modules(pkg.__path__) if not i.name.startswith("_"))
    return [importlib.import_module(f"{package}.{n}") for n in names]


def interface_rank(interface: str) -> int:
    """Listing order of interfaces: WSGI, then ASGI, then native ones."""
    return {WSGI: 0, ASGI: 1}.get(interface, 2)


def discover(
    package: str,
    attribute: str,
    kind: type[Member],
    plugins: Sequence[str] | None = None,
) -> dict[str, Member]:
    """Name -> member for every module of ``package`` and every plugin module.

    ``plugins`` None reads :data:`PLUGINS_ENV`; a plugin without ``attribute`` adds nothing
    to this registry. Members are ordered by interface (WSGI, ASGI, native), then by name.
    """
    sources = [(m, True) for m in builtin_modules(package)]
    names = plugin_names() if plugins is None else list(plugins)
    sources += [(import_plugin(n), False) for n in names]
    found: dict[str, Member] = {}
    origin: dict[str, str] = {}
    label = "server" if kind is ServerAdapter else "framework"
    for module, required in sources:
        member = getattr(module, attribute, None)
        if member is None:
            if required:
                raise CatalogueError(f"{module.__name__} defines no {attribute}")
            continue
        where = module.__name__ if required else f"{PLUGINS_ENV} module {module.__name__!r}"
        if not isinstance(member, kind):
            raise CatalogueError(f"{where}: {attribute} is not a {kind.__name__} instance")
        name = getattr(member, "name", "")
        if not isinstance(name, str) or not name:
            raise CatalogueError(f"{where}: {attribute} has no name")
        if name in found:
            raise CatalogueError(
                f"{where}: {label} name {name!r} is already taken by {origin[name]}"
            )
        found[name] = member
        origin[name] = module.__name__
    ordered = sorted(found.values(), key=lambda m: (interface_rank(m.interface), m.name))
    return {m.name: m for m in ordered}
