"""Bring your own app: a user's WSGI/ASGI application as a framework of the catalogue.

``pywebbench verify --app mypkg.wsgi:application --requirements req.txt --path / --path /api``
turns the app into a :class:`UserFramework` whose "workloads" are the paths to request. It then
runs on every server of its interface like a built-in framework. Several project directories of
one app (``--project v1 --project v2``: versions, or twins of one app) are one framework each,
named after their directory (:func:`project_tags`).

This module only describes the app (:func:`parse_user_app` validates the flags, reading only
files). Telling WSGI from ASGI when ``--interface`` is not given needs a virtualenv: that is
:func:`pywebbench.provision.user_app.detect_interfaces`, at bring-up. Checking a path of the
running app is :func:`pywebbench.verify.user_app.check_path`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from pywebbench.catalogue.base import ASGI, WSGI, Framework, InstallStep, Interpreter
from pywebbench.catalogue.mix import MixEntry, MixFileError, load_mix
from pywebbench.catalogue.workloads import HttpRequest, Workload

__all__ = [
    "PATH_PREFIX",
    "UserFramework",
    "MIX_PREFIX",
    "UserWorkload",
    "mix_workload",
    "parse_requirements",
    "parse_user_app",
    "parse_user_apps",
    "project_tags",
    "user_workload",
]

_APP = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
PATH_PREFIX = "path:"
#: A mix's workload is named after its file: ``mix:mix.toml``.
MIX_PREFIX = "mix:"


@dataclass(frozen=True)
class UserWorkload(Workload):
    """``GET <path>`` of a user's app, with the user's expectations (status, body substring)."""

    path: str = "/"
    expect_status: int | None = None  # None: any 2xx
    expect_body: str | None = None  # substring the body must contain
    #: A traffic mix (docs/mix.md): the load draws each request from these entries, and
    #: verification requests each endpoint once; ``path`` is then "/" (the base URL).
    mix: tuple[MixEntry, ...] = field(default=(), compare=False, hash=False, repr=False)


def user_workload(path: str, expect_status: int | None, expect_body: str | None) -> UserWorkload:
    """The workload that requests ``path`` of a user's app."""
    return UserWorkload(
        name=f"{PATH_PREFIX}{path}",
        description=f"GET {path} of the user's app",
        _build=lambda _params: HttpRequest("GET", path),
        path=path,
        expect_status=expect_status,
        expect_body=expect_body,
    )


def mix_workload(mix_file: Path, entries: list[MixEntry]) -> UserWorkload:
    """The workload that loads a user's app with the mix of ``mix_file`` (its ``entries``):
    each endpoint's expected statuses are its entries'."""
    endpoints = len({e.name for e in entries})
    return UserWorkload(
        name=f"{MIX_PREFIX}{mix_file.name}",
        description=f"the mix {mix_file.name} ({len(entries)} requests, {endpoints} endpoints)",
        _build=lambda _params: HttpRequest("GET", "/"),
        mix=tuple(entries),
    )


class UserFramework(Framework):
    """A user's app (``module:callable``) with what it needs installed.

    Its name is ``app-<module.callable>``; with a ``tag`` (one of several project directories
    of the app in one study: the directory's name) ``app-<module.callable>@<tag>``, so each
    project is its own stack.
    """

    def __init__(
        self,
        app: str,
        interface: str,
        requirements: tuple[str, ...] = (),
        steps: tuple[InstallStep, ...] = (),
        project: Path | None = None,
        workloads: tuple[UserWorkload, ...] = (),
        tag: str | None = None,
    ) -> None:
        self.app = app
        self.interface = interface
        self.tag = tag
        self.name = "app-" + app.replace(":", ".") + (f"@{tag}" if tag else "")
        self._requirements = requirements
        self._steps = steps
        self.project = project
        self.user_workloads = {w.name: w for w in workloads}
        self.workloads = frozenset(self.user_workloads)

    @property
    def app_dir(self) -> Path | None:
        """The directory to put first on PYTHONPATH (the project), if any."""
        return self.project

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return list(self._requirements)

    def extra_installs(self, interpreter: Interpreter) -> list[InstallStep]:
        return list(self._steps)


def parse_requirements(
    path: Path, flag: str = "--requirements"
) -> tuple[list[str], list[InstallStep]]:
    """Requirement lines of a pip requirements file (``-r`` followed, ``-e`` as install steps).

    Plain lines go into the stack's requirements (so their content is part of the cache key).
    Other pip options are refused with a ValueError naming ``flag``.
    """
    reqs: list[str] = []
    steps: list[InstallStep] = []
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ", "-r", "--requirement=")):
            target = re.sub(r"^(-r|--requirement)[= ]?", "", line).strip()
            sub = (path.parent / target).resolve()
            more, more_steps = parse_requirements(sub, flag)
            reqs += more
            steps += more_steps
        elif line.startswith(("-e ", "--editable ", "--editable=")):
            target = re.sub(r"^(-e|--editable)[= ]?", "", line).strip()
            if "://" not in target and not target.startswith("git+"):
                target = str((path.parent / target).resolve())
            steps.append(InstallStep((), ("-e", target)))
        elif line.startswith("-"):
            raise ValueError(
                f"{flag} {path}:{lineno}: option {line.split()[0]!r} is not supported here; "
                "keep only requirement lines, -r and -e"
            )
        else:
            reqs.append(_requirement(line, f"{flag} {path}:{lineno}"))
    return reqs, steps


def _requirement(line: str, where: str) -> str:
    """``line`` if it is a requirement uv can install: a PEP 508 specifier (checked with
    ``packaging``), or a URL or local path as pip takes them; else a ValueError naming
    ``where``."""
    try:
        Requirement(line)
    except InvalidRequirement as exc:
        if "://" in line or line.startswith((".", "/", "~")):
            return line
        raise ValueError(f"{where}: {line!r} is not a requirement ({exc})") from None
    return line


def project_tags(projects: Sequence[Path]) -> list[tuple[Path, str | None]]:
    """Each project directory (resolved) with the tag of its framework's name: None for a single
    project (its name stays ``app-<module.callable>``, as stored studies have it), the
    directory's name when there are several.

    Raises ValueError naming ``--project`` when two have the same directory name, or one is
    given twice (twins of one app need two copies of it).
    """
    resolved = [Path(p).expanduser().resolve() for p in projects]
    if len(resolved) < 2:
        return [(p, None) for p in resolved]
    seen: dict[str, Path] = {}
    for p in resolved:
        other = seen.setdefault(p.name, p)
        if other is p:
            continue
        if other == p:
            raise ValueError(
                f"--project {p}: given twice; for twins of one app, copy it to a second "
                "directory with another name"
            )
        raise ValueError(
            f"--project: two projects named {p.name!r} ({other}, {p}); give them different "
            "directory names"
        )
    return [(p, p.name) for p in resolved]


def _is_installable(project: Path) -> bool:
    return any((project / f).exists() for f in ("pyproject.toml", "setup.py", "setup.cfg"))


def parse_user_app(
    app: str,
    interface: str | None,
    requirements: Path | None,
    project: Path | None,
    paths: list[str],
    expect_status: int | None,
    expect_body: str | None,
    mix: Path | None = None,
    tag: str | None = None,
    *,
    mix_entries: Sequence[MixEntry] | None = None,
) -> UserFramework:
    """The user's app as a framework, from the ``--app``/``--interface``/... flags; with
    ``mix`` (a mix file, docs/mix.md) its one workload is that mix instead of ``paths``, its
    requests read from the file unless ``mix_entries`` gives them (already read: a resumed
    run's, as the run read them when it started); ``tag`` names one of several projects
    (:func:`project_tags`).

    Raises ValueError naming the bad flag. With ``interface`` None the framework's
    ``interface`` is "" (not known yet): :func:`pywebbench.provision.user_app.user_framework`
    detects it.
    """
    if not _APP.match(app or ""):
        raise ValueError(
            f"--app {app!r}: expected module:callable, e.g. myproject.wsgi:application"
        )
    if interface is not None:
        interface = interface.lower()
        if interface not in (WSGI, ASGI):
            raise ValueError(f"--interface {interface!r}: choose wsgi or asgi")
    reqs: list[str] = []
    steps: list[InstallStep] = []
    if requirements is not None:
        requirements = Path(requirements).expanduser().resolve()
        if not requirements.is_file():
            raise ValueError(f"--requirements {requirements}: no such file")
        reqs, steps = parse_requirements(requirements)
    if project is not None:
        project = Path(project).expanduser().resolve()
        if not project.is_dir():
            raise ValueError(f"--project {project}: no such directory")
        if _is_installable(project):
            steps.append(InstallStep((), ("-e", str(project))))
    paths = list(paths) or ["/"]
    for p in paths:
        if not p.startswith("/"):
            raise ValueError(f"--path {p!r}: must start with '/' (e.g. /api/items?limit=5)")
    if expect_status is not None and not 100 <= expect_status <= 599:
        raise ValueError(f"--expect-status {expect_status}: not an HTTP status (100-599)")
    workloads = tuple(user_workload(p, expect_status, expect_body) for p in dict.fromkeys(paths))
    if mix is not None and mix_entries is not None:
        workloads = (mix_workload(mix, list(mix_entries)),)
    elif mix is not None:
        try:
            workloads = (mix_workload(mix, load_mix(mix)),)
        except MixFileError as exc:
            raise ValueError(f"--mix: {exc}") from None
    return UserFramework(
        app, interface or "", tuple(reqs), tuple(steps), project, workloads, tag=tag
    )


def parse_user_apps(
    app: str,
    interface: str | None,
    requirements: Path | None,
    projects: Sequence[Path],
    paths: list[str],
    expect_status: int | None,
    expect_body: str | None,
    *,
    mix: Path | None = None,
    mix_entries: Sequence[MixEntry] | None = None,
) -> list[UserFramework]:
    """The app as one framework per project directory (one with none), in order: with one
    project or none ``app-<module.callable>``, with several each named after its directory
    (``app-<module.callable>@<dirname>``, :func:`project_tags`), sharing the other flags
    (:func:`parse_user_app`). Nothing is built or imported: ``interface`` "" when not given.
    Raises ValueError naming the bad flag."""
    tagged: list[tuple[Path | None, str | None]] = [*project_tags(projects)] or [(None, None)]
    return [
        parse_user_app(
            app,
            interface,
            requirements,
            project,
            paths,
            expect_status,
            expect_body,
            mix,
            tag,
            mix_entries=mix_entries,
        )
        for project, tag in tagged
    ]
