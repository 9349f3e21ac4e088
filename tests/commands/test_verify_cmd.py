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
