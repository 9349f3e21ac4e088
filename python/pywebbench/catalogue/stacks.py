"""Stack planning: which interpreter x server x framework combinations exist, and which can run.

:func:`plan` pairs every interpreter with every server and every framework of the same
interface (a native server such as tornado's only with its own native framework) and declares,
without installing anything, why a combination cannot run: the adapter's or framework's own
``unavailable()`` answer, or this module's table of known incompatibilities of a combination
(measured on Debian's PyPy 3.9, see docs/catalogue.md).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from pywebbench.catalogue.base import ASGI, WSGI, Framework, Interpreter, ServerAdapter, Stack
from pywebbench.catalogue.registry import Member
from pywebbench.catalogue.workloads import Workload

if TYPE_CHECKING:
    from pywebbench.catalogue.workloads import Workload

# Packages that cannot be used on an implementation, with the reason (measured here, PyPy
# 7.3.11 / Python 3.9). A stack whose requirements name one of them is declared unavailable.
KNOWN_INCOMPATIBLE: dict[str, dict[str, str]] = {
    "pypy": {
        "uvloop": "uvloop builds on PyPy but fails to import (undefined symbol "
        "PyContext_CopyCurrent)",
        "orjson": "orjson has no PyPy wheels and its PyO3 source build needs PyPy >= 3.11",
        "msgspec": "msgspec has no PyPy support (its C extension uses CPython internals)",
        "litestar": "litestar needs msgspec, which has no PyPy support",
        "robyn": "robyn has no PyPy wheels; its sdists fail to build (PyO3 needs PyPy >= 3.11)",
        "pyuwsgi": "pyuwsgi does not compile against PyPy's cpyext (no Py_NewInterpreter)",
        "ujson": "ujson does not import on PyPy 3.9 here",
    },
}


def requirement_name(spec: str) -> str:
    """The normalised distribution name of a requirement specifier (``Foo_Bar[x]>=1``: foo-bar),
    or "" if ``spec`` is not one (a URL, a path)."""
    try:
        return canonicalize_name(Requirement(spec).name)
    except InvalidRequirement:
        return ""


@dataclass(frozen=True)
class Candidate:
    """One interpreter x server x framework combination, runnable or not (with the reason)."""

    interpreter: Interpreter
    server: ServerAdapter
    framework: Framework
    stack: Stack | None  # None when unavailable
    unavailable: str | None  # the declared reason, or None
    workloads: tuple[str, ...]  # workloads of the selection this framework implements

    @property
    def name(self) -> str:
        return f"{self.interpreter.name}/{self.server.name}/{self.framework.name}"

    @property
    def available(self) -> bool:
        return self.unavailable is None


def stack_requirements(
    interpreter: Interpreter, server: ServerAdapter, framework: Framework
) -> tuple[str, ...]:
    """The union of the framework's and the server's requirements, in order, without repeats."""
    reqs = list(framework.requirements(interpreter)) + list(server.requirements(interpreter))
    return tuple(dict.fromkeys(r.strip() for r in reqs if r.strip()))


def known_incompatibility(interpreter: Interpreter, requirements: Iterable[str]) -> str | None:
    """The reason a set of requirements cannot work on ``interpreter``, from the table."""
    table = KNOWN_INCOMPATIBLE.get(interpreter.implementation, {})
    for spec in requirements:
        reason = table.get(requirement_name(spec))
        if reason:
            return f"{reason} ({interpreter.name})"
    return None


def make_stack(interpreter: Interpreter, server: ServerAdapter, framework: Framework) -> Stack:
    """The :class:`Stack` of a combination (no availability check)."""
    return Stack(interpreter, server, framework, stack_requirements(interpreter, server, framework))


def _why_not(interpreter: Interpreter, server: ServerAdapter, framework: Framework) -> str | None:
    reason = server.unavailable(interpreter)
    if reason:
        return f"{server.name}: {reason}"
    reason = framework.unavailable(interpreter)
    if reason:
        return f"{framework.name}: {reason}"
    try:
        reqs = stack_requirements(interpreter, server, framework)
    except NotImplementedError:
        return "no requirements declared"
    steps = server.extra_installs(interpreter) + framework.extra_installs(interpreter)
    return known_incompatibility(
        interpreter, list(reqs) + [r for s in steps for r in s.requirements]
    )


_Entry = TypeVar("_Entry", ServerAdapter, Framework)


def _resolve(
    items: Iterable[str | Member] | None, registry: Callable[[], dict[str, Member]], flag: str
) -> list[Member]:
    if items is None:
        return list(registry().values())
    out: list[Member] = []
    names: list[str] = []
    for item in items:
        if isinstance(item, str):
            names.append(item)
        else:
            out.append(item)
    if names:
        reg = registry()
        out += [reg[n] for n in select_names(names, reg, flag)]
    return out


def plan(
    interpreters: Sequence[Interpreter],
    servers: Iterable[str | ServerAdapter] | None = None,
    frameworks: Iterable[str | Framework] | None = None,
    workloads: Iterable[str] | None = None,
) -> list[Candidate]:
    """Every interpreter x server x framework whose interfaces match, with availability; a
    user's app whose interface is not known yet ("") goes with every WSGI and ASGI server.

    ``servers``/``frameworks``: names (globs allowed), instances (e.g. a user's framework from
    :func:`pywebbench.provision.user_app.user_framework`), or None for the whole catalogue.
    ``workloads``: names to restrict to (None = all); a framework implementing none of them is
    declared unavailable for that reason.
    """
    server_list: list[ServerAdapter] = _resolve(servers, _adapters, "--server")
    framework_list: list[Framework] = _resolve(frameworks, _frameworks, "--framework")
    wanted: list[str] | None = None
    if workloads is not None:
        wanted = select_names(list(workloads), _workloads(), "--workload")
    out: list[Candidate] = []
    for interp in interpreters:
        for server in server_list:
            for fw in framework_list:
                if server.interface != fw.interface and not (
                    fw.interface == "" and server.interface in (WSGI, ASGI)
                ):
                    continue
                names = _workload_order(fw) if wanted is None else wanted
                wl = tuple(w for w in names if w in fw.workloads)
                reason = _why_not(interp, server, fw)
                if reason is None and not wl:
                    reason = f"{fw.name} implements none of the workloads {', '.join(names)}"
                stack = make_stack(interp, server, fw) if reason is None else None
                out.append(Candidate(interp, server, fw, stack, reason, wl))
    return out


def _workload_order(fw: Framework) -> list[str]:
    """The framework's workloads in the registry's order (hello first), a user's in its own."""
    user = list(getattr(fw, "user_workloads", {}))
    if user:
        return user
    known = [w for w in _workloads() if w in fw.workloads]
    return known + sorted(set(fw.workloads) - set(known))


def select_names(patterns: Sequence[str], registry: Iterable[str], flag: str) -> list[str]:
    """Names of ``registry`` matching comma lists and globs; ValueError naming ``flag`` if a
    pattern matches nothing (listing the valid names). Order follows the patterns (a study
    runs ``--workload json,hello`` json first), a glob's matches in ``registry`` order."""
    valid = list(registry)
    chosen: dict[str, None] = {}
    for raw in patterns:
        for pattern in (p.strip() for p in raw.split(",")):
            if not pattern:
                continue
            hits = [n for n in valid if fnmatch.fnmatchcase(n, pattern)]
            if not hits:
                raise ValueError(
                    f"{flag} {pattern!r} matches nothing; valid: {', '.join(valid) or 'none'}"
                )
            chosen.update(dict.fromkeys(hits))
    return list(chosen)


def _adapters() -> dict[str, ServerAdapter]:
    from pywebbench.catalogue.servers import ADAPTERS

    return ADAPTERS


def _frameworks() -> dict[str, Framework]:
    from pywebbench.catalogue.frameworks import FRAMEWORKS

    return FRAMEWORKS


def _workloads() -> dict[str, Workload]:
    from pywebbench.catalogue.workloads import WORKLOADS

    return WORKLOADS
