"""The two sides of an A/B (BASE and CHANGE): what differs, parsed from ``--base``/``--change``,
made into a one-cell study each, and git revisions checked out for the time of the run.

A side is either a project (a directory, or a git revision of ``--repo`` checked out with
``git worktree``) or settings ``KEY=VALUE[,KEY=VALUE]`` with the keys of :data:`SIDE_KEYS`
(``python=cpython3.12``, ``server=granian-wsgi``, ``requirements=reqs-new.txt``). Everything a
side does not set comes from the shared flags.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pywebbench.bringup import with_interfaces_detected
from pywebbench.catalogue.interpreters import InterpreterError, select
from pywebbench.provision.pythons import install_request
from pywebbench.study.config import ConfigError, StudyConfig, check, resolve
from pywebbench.study.matrix import CellPlan, expand

#: What a side may set, and the shared flag each one overrides.
SIDE_KEYS = ("python", "server", "framework", "project", "requirements")


class SideError(ValueError):
    """Bad input naming the flag, e.g. ``--change: 'v9' is neither a directory nor a
    revision of .``; the command prints it on one line and exits 2."""


@dataclass(frozen=True)
class Side:
    """One side as given: its flag (``--base``/``--change``) and its settings."""

    flag: str
    text: str
    settings: Mapping[str, str]

    @property
    def role(self) -> str:
        """``base`` or ``change``."""
        return self.flag.lstrip("-")


def parse_side(flag: str, text: str) -> Side:
    """``--base v1.2`` (a project) or ``--base python=cpython3.11,server=waitress``."""
    text = text.strip()
    if not text:
        raise SideError(f"{flag}: empty")
    if "=" not in text:
        return Side(flag, text, {"project": text})
    settings: dict[str, str] = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if key not in SIDE_KEYS or not value:
            raise SideError(
                f"{flag}: {part.strip()!r}: expected KEY=VALUE with KEY one of "
                + ", ".join(SIDE_KEYS)
            )
        settings[key] = value
    return Side(flag, text, settings)


def git_revision(repo: Path, rev: str) -> str | None:
    """The commit ``rev`` names in ``repo`` (full hash), or None."""
    if shutil.which("git") is None:
        return None
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


@dataclass(frozen=True)
class Project:
    """Where a side's project is: a directory, and the commit it was checked out from."""

    path: Path
    commit: str | None = None


def locate_project(flag: str, value: str, repo: Path) -> Project:
    """A directory as is; otherwise a git revision of ``repo`` (checked out later)."""
    path = Path(value).expanduser()
    if path.is_dir():
        return Project(path.resolve())
    commit = git_revision(repo, value)
    if commit is None:
        raise SideError(f"{flag}: {value!r} is neither a directory nor a revision of {repo}")
    return Project(Path(repo).resolve(), commit)


@contextmanager
def checked_out(project: Project, workdir: Path) -> Iterator[Path]:
    """The project's directory; a commit is checked out with ``git worktree add`` into
    ``workdir`` for the time of the block and removed after."""
    if project.commit is None:
        yield project.path
        return
    workdir.mkdir(parents=True, exist_ok=True)
    # absolute: the server starts in a directory of its own, and imports the app from here
    where = Path(tempfile.mkdtemp(prefix=f"ab-{project.commit[:10]}-", dir=workdir.resolve()))
    git = ["git", "-C", str(project.path)]
    subprocess.run(
        [*git, "worktree", "add", "--detach", str(where), project.commit],
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        yield where
    finally:
        subprocess.run(
            [*git, "worktree", "remove", "--force", str(where)], capture_output=True, timeout=120
        )
        shutil.rmtree(where, ignore_errors=True)


def side_overrides(shared: Mapping[str, Any], side: Side, project: Path | None) -> dict[str, Any]:
    """The study overrides of one side: the shared ones with the side's settings on top."""
    out: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in shared.items()}
    matrix = dict(out.get("matrix", {}))
    for key, axis in (
        ("python", "interpreters"),
        ("server", "servers"),
        ("framework", "frameworks"),
    ):
        if key in side.settings:
            matrix[axis] = [side.settings[key]]
    out["matrix"] = matrix
    if "app" in out:
        app = dict(out["app"])
        if project is not None:
            app["project"] = str(project)
        if "requirements" in side.settings:
            app["requirements"] = side.settings["requirements"]
        out["app"] = app
    elif project is not None or "requirements" in side.settings:
        raise SideError(f"{side.flag}: a project or requirements need --app")
    return out


@dataclass(frozen=True)
class SideStudy:
    """A side made into a one-cell study."""

    side: Side
    config: StudyConfig
    cell: CellPlan


def side_study(side: Side, overrides: Mapping[str, Any]) -> SideStudy:
    """Resolve and expand a side's study, its interpreters resolved first (probed, a
    requested version installed) and its app's interface detected (a virtualenv, an
    import); SideError unless it is exactly one runnable cell."""
    try:
        config = resolve(None, dict(overrides), profile="quick")
        check(config)
        interpreters = select(config.matrix.interpreters, install=install_request)
        planned = expand(config, interpreters)
    except InterpreterError as exc:
        raise SideError(f"{side.flag}: matrix.interpreters: {exc}") from None
    except (ConfigError, ValueError) as exc:
        raise SideError(f"{side.flag}: {exc}") from None
    try:
        matrix = with_interfaces_detected(planned)
    except ValueError as exc:  # the app cannot be imported, or its interface told
        raise SideError(f"{side.flag}: app: {exc}") from None
    if not matrix.cells:
        why = "; ".join(f"{name}: {reason}" for name, reason in matrix.unavailable)
        raise SideError(f"{side.flag}: no stack can run ({why or 'nothing selected'})")
    if len(matrix.cells) > 1:
        labels = ", ".join(c.label for c in matrix.cells[:4])
        raise SideError(
            f"{side.flag}: ab compares one cell, this side has {len(matrix.cells)} ({labels}"
            f"{', ...' if len(matrix.cells) > 4 else ''}): pick one python, server, framework, "
            "workload (or one --path) and one --connections"
        )
    return SideStudy(side, config, matrix.cells[0])
