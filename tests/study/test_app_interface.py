"""A user's app whose interface is not given (no ``--interface``): planning reads files only,
on WSGI and ASGI servers alike; the interface is detected at bring-up
(``bringup.with_interfaces_detected``), which drops the other servers' cells with a
reason, and an app that cannot be imported is a one-line error (exit status 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner
from pwbtest import planned
from pywebbench.bringup import with_interfaces_detected
from pywebbench.catalogue.base import ASGI, WSGI
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.catalogue.servers import ADAPTERS
from pywebbench.commands.run import command
from pywebbench.study.config import resolve

CPYTHON = default_interpreters()[0].name
SERVERS = ["waitress", "uvicorn-h11"]  # one WSGI server, one ASGI server

#: A WSGI app whose import leaves a mark beside it (planning must not import it).
APP = """
from pathlib import Path

Path(__file__).with_name("imported").write_text("yes")


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""


def _project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "web.py").write_text(APP)
    return folder


def _study(project: Path, servers: list[str] | None = None) -> dict[str, Any]:
    return {
        "matrix": {"interpreters": [CPYTHON], "servers": servers or []},
        "app": {"app": "web:app", "paths": ["/"], "project": str(project)},
    }


def test_planning_imports_nothing_and_plans_both_interfaces(tmp_path: Path) -> None:
    project = _project(tmp_path)
    matrix = planned(resolve(_study(project, SERVERS)))
    assert [app.interface for app in matrix.apps] == [""]
    assert {c.variant.stack.server.name for c in matrix.cells} == set(SERVERS)
    assert not (project / "imported").exists()


def test_the_known_interface_skips_the_other_servers_with_a_reason(tmp_path: Path) -> None:
    matrix = planned(resolve(_study(_project(tmp_path))))  # every WSGI and ASGI server
    matrix.apps[0].interface = ASGI  # as bring-up found it
    served = matrix.servable()
    assert served.cells and all(c.variant.stack.server.interface == ASGI for c in served.cells)
    assert [c.ordinal for c in served.cells] == list(range(len(served.cells)))
    assert (f"{CPYTHON}/waitress/app-web.app", "waitress cannot serve an ASGI app") in (
        served.skipped
    )
    wsgi = {name for name, a in ADAPTERS.items() if a.interface == WSGI}
    assert not [n for n, _ in served.unavailable if n.split("/")[-2] in wsgi]
    assert [v.key for v in served.variants] == list(
        dict.fromkeys(c.variant.key for c in served.cells)
    )


def test_bring_up_detects_the_interface_and_keeps_its_servers(tmp_path: Path) -> None:
    project = _project(tmp_path)
    matrix = with_interfaces_detected(planned(resolve(_study(project, SERVERS))))
    assert [app.interface for app in matrix.apps] == [WSGI]
    assert {c.variant.stack.server.name for c in matrix.cells} == {"waitress"}
    assert matrix.skipped == [
        (f"{CPYTHON}/uvicorn-h11/app-web.app", "uvicorn-h11 cannot serve a WSGI app")
    ]
    assert (project / "imported").exists()  # detection imported it


def test_an_app_that_cannot_be_imported_is_one_line_and_exit_2(tmp_path: Path) -> None:
    project = _project(tmp_path)
    results = tmp_path / "res"
    args = ["--app", "web:nope", "--project", str(project), "--python", CPYTHON,
            "--server", "waitress", "--results-dir", str(results), "--no-report"]  # fmt: skip
    dry = CliRunner().invoke(command, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "app-web.nope: detected when the run starts" in dry.output
    assert not (project / "imported").exists()  # a dry run imports nothing
    res = CliRunner().invoke(command, args)
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: app: --app web:nope: cannot import web:nope: AttributeError")
    assert not results.exists()  # nothing written
