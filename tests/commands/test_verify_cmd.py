"""`pywebbench verify` end to end: real venvs, real servers, exit codes and reasons."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.cli import cli

WSGI_SERVER = "waitress"


@pytest.fixture(autouse=True)
def no_orphans():
    """No process the test started is left (the session's own, such as the zygote of
    tests/pwbtest.py, were there before it)."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not left, f"processes left behind: {[p.cmdline() for p in left]}"


def _verify(*args: str):
    this_cpython = default_interpreters()[0].name  # the CPython running the tests
    return CliRunner().invoke(cli, ["verify", "--python", this_cpython, *args])


def test_verify_builtin_framework_passes(tmp_path: Path) -> None:
    res = _verify(
        "--server",
        WSGI_SERVER,
        "--framework",
        "raw-wsgi",
        "--workload",
        "hello,json",
        "--log-dir",
        str(tmp_path),
        "--json",
    )
    assert res.exit_code == 0, res.output
    outcomes = json.loads(res.stdout)
    assert [(o["workload"], o["status"]) for o in outcomes] == [("hello", "pass"), ("json", "pass")]


@pytest.fixture(scope="module")
def httpbin_req(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("byo") / "req.txt"
    path.write_text("httpbin==0.10.4\n")
    return path


def _httpbin(req: Path, log_dir: Path, *more: str):
    """verify httpbin (a Flask app from PyPI, not part of this repo) on the WSGI server."""
    base = f"--app httpbin:app --requirements {req} --server {WSGI_SERVER} --log-dir {log_dir}"
    return _verify(*base.split(), *more)


def test_verify_byo_app_from_pypi(httpbin_req: Path, tmp_path: Path) -> None:
    res = _httpbin(
        httpbin_req, tmp_path, "--path", "/get", "--path", "/headers", "--expect-body", '"Host"'
    )
    assert res.exit_code == 0, res.output
    assert "app httpbin:app: WSGI" in res.output
    assert res.output.count("PASS") == 2


def test_verify_failure_names_the_reason(httpbin_req: Path, tmp_path: Path) -> None:
    res = _httpbin(httpbin_req, tmp_path, "--path", "/get", "--expect-status", "418")
    assert res.exit_code == 1, res.output
    assert "FAIL" in res.output
    assert "status 200, expected 418" in res.output


def test_verify_provision_failure(tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    req.write_text("flask==99.0.0\n")
    res = _verify(
        "--app",
        "flask:Flask",
        "--interface",
        "wsgi",
        "--requirements",
        str(req),
        "--server",
        WSGI_SERVER,
        "--log-dir",
        str(tmp_path),
    )
    assert res.exit_code == 1, res.output
    assert "FAIL" in res.output and "provision" in res.output
    assert "flask==99.0.0" in res.output


def test_verify_bad_values_exit_2() -> None:
    res = _verify("--server", "no-such-server")
    assert res.exit_code == 2 and "--server 'no-such-server' matches nothing" in res.output
    res = _verify("--path", "/x")
    assert res.exit_code == 2 and "--path only apply with --app" in res.output


_APP = """
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""
# The same app behind a WSGI middleware (a variant of it).
_MIDDLEWARE = """
def _wrap(inner):
    def app(environ, start_response):
        return inner(environ, start_response)
    return app

app = _wrap(app)
"""


def test_verify_two_projects_of_one_app(tmp_path: Path) -> None:
    """Two versions of one app (the second behind a middleware): each its own stack, its
    interface detected on its own, both verified on the same server (granian-wsgi: the venv
    is tests/run/test_e2e.py's raw-wsgi one, the app adding no requirement)."""
    for name, code in (("v1", _APP), ("v2", _APP + _MIDDLEWARE)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "web.py").write_text(code)
    res = _verify(
        *("--app", "web:app", "--project", str(tmp_path / "v1"), "--project", str(tmp_path / "v2")),
        *("--expect-body", "ok", "--server", "granian-wsgi", "--log-dir", str(tmp_path / "logs")),
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert "app app-web.app@v1: WSGI" in res.output and "app app-web.app@v2: WSGI" in res.output
    outcomes = json.loads(res.stdout)
    assert [(o["stack"].rpartition("/")[2], o["status"]) for o in outcomes] == [
        ("app-web.app@v1", "pass"),
        ("app-web.app@v2", "pass"),
    ]


def test_verify_two_projects_need_two_directory_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "app", tmp_path / "b" / "app"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    res = _verify(
        "--app", "web:app", "--interface", "wsgi", "--project", str(a), "--project", str(b)
    )
    assert res.exit_code == 2
    assert f"--project: two projects named 'app' ({a}, {b}); give them different" in res.output
