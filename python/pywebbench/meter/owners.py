"""Who a sampled frame belongs to (:mod:`pywebbench.meter.breakdown`): the top-level modules of
a stack's server and framework packages, and the paths of its app."""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement

from pywebbench.catalogue.base import Stack
from pywebbench.meter.breakdown import normalize


def _names(requirements: list[str]) -> list[str]:
    out = []
    for text in requirements:
        try:
            out.append(normalize(Requirement(text).name))
        except InvalidRequirement:
            continue  # a URL or path requirement: no module name to match
    return out


def stack_packages(stack: Stack) -> dict[str, str]:
    """Top-level module -> "server" or "framework", from the stack's pinned requirements
    (the framework's include its workloads' clients; a package both pin is the server's)."""
    interp = stack.interpreter
    owners = dict.fromkeys(_names(stack.framework.requirements(interp)), "framework")
    owners.update(dict.fromkeys(_names(stack.server.requirements(interp)), "server"))
    return owners


def app_paths(stack: Stack) -> list[str]:
    """Paths whose files are the app's: a user's project directory (the catalogue's own apps
    are recognised by their folder, ``inside/apps``)."""
    project = getattr(stack.framework, "project", None)
    return [str(project)] if project else []
