"""Planning (``study.matrix.expand``) reads files only: the interpreters come resolved, and a
study that names a version to install, ``all`` and a user's app whose interface is not given
is planned without starting a process or opening a socket."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest
from pywebbench.catalogue.base import Interpreter
from pywebbench.study.config import resolve
from pywebbench.study.matrix import expand

#: Interpreters as resolution hands them to planning; nothing at these paths is ever run.
FREE_THREADED = Interpreter(
    "cpython3.13t", "cpython", "3.13.5", "/nowhere/bin/python3.13t", free_threaded=True
)
PYPY = Interpreter("pypy3.9", "pypy", "3.9.18", "/nowhere/bin/pypy3", build="PyPy 7.3.11")


def _no_process(*args: object, **kwargs: object) -> NoReturn:
    raise AssertionError(f"planning reached the world: {args[:1]!r}")


def test_planning_starts_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "web.py").write_text("def app(environ, start_response): ...\n")
    (project / "requirements.txt").write_text("flask==3.1.0\n")
    config = resolve(
        {
            "matrix": {"interpreters": ["3.13t", "all"], "servers": ["waitress", "uvicorn-h11"]},
            "app": {
                "app": "web:app",
                "paths": ["/", "/api"],
                "project": str(project),
                "requirements": str(project / "requirements.txt"),
            },
        }
    )
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"):
        monkeypatch.setattr(os, name, _no_process)
    monkeypatch.setattr(socket, "socket", _no_process)
    with pytest.raises(AssertionError, match="reached the world"):
        subprocess.run(["true"])  # the guard holds

    matrix = expand(config, [FREE_THREADED, PYPY])

    assert matrix.interpreters == [FREE_THREADED, PYPY]
    assert {c.variant.stack.interpreter for c in matrix.cells} <= {FREE_THREADED, PYPY}
    assert {c.variant.stack.server.name for c in matrix.cells} == {"waitress", "uvicorn-h11"}
    assert [app.interface for app in matrix.apps] == [""]  # detected at bring-up
    assert {c.request.path for c in matrix.cells} == {"/", "/api"}
    assert not (project / "__pycache__").exists()  # the app was not imported
