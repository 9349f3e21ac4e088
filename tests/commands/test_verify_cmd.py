"""`pywebbench verify` end to end: real venvs, real servers, exit codes and reasons."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner
from pwbmix import ENDPOINTS, project
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


# --------------------------------------------------------------------------- --mix


def _mix_args(folder: Path, mix_file: Path, *more: str) -> list[str]:
    return ["--app", "mixapp:app", "--interface", "wsgi", "--project", str(folder),
            "--mix", str(mix_file), *more]  # fmt: skip


def test_verify_mix_refuses_a_bad_file_or_a_flag_it_replaces_in_one_line(tmp_path: Path) -> None:
    """A bad mix file, or --mix with --path/--expect-status/--expect-body: one line on
    stderr naming the flag, exit status 2, before anything is imported or started."""
    folder, mix_file = project(tmp_path)
    cases = [
        (["--path", "/x"], "error: --mix and --path: the mix gives every path; give one"),
        (["--expect-status", "404"], "error: --mix and --expect-status: each request of the "
         "mix gives the statuses it expects (expect_status in the mix file); give one"),
        (["--expect-body", "ok"], "error: --mix and --expect-body: a mix's endpoints are "
         "checked by status only; give one"),
    ]  # fmt: skip
    for extra, line in cases:
        res = _verify(*_mix_args(folder, mix_file, *extra))
        assert res.exit_code == 2, res.output
        assert res.stderr.strip().splitlines() == [line]
    mix_file.write_text('[[request]]\nname = "a"\nweight = 0\npath = "/"\n')
    res = _verify(*_mix_args(folder, mix_file))
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines() == [
        f'error: --mix: {mix_file}: request 1 ("a"): weight: must be > 0, got 0'
    ]
    res = _verify(*_mix_args(folder, tmp_path / "none.toml"))
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert res.stderr.startswith(f"error: --mix: {tmp_path / 'none.toml'}: cannot read")
    res = _verify("--mix", str(mix_file))
    assert res.exit_code == 2 and "--mix only apply with --app" in res.output


def test_verify_mix_prints_a_line_per_endpoint(tmp_path: Path) -> None:
    """Each endpoint's check is its own outcome and line (fake bring-up steps: nothing is
    provisioned or started; the checks are what the engine's would say)."""
    from io import StringIO

    from pywebbench import bringup
    from pywebbench.catalogue.byo import parse_user_apps
    from pywebbench.catalogue.mix import load_mix
    from pywebbench.catalogue.stacks import plan
    from pywebbench.commands.verify import run_verification
    from pywebbench.load.mix import EndpointCheck, endpoint_entries
    from pywebbench.provision.venv import ProvisionedEnv
    from rich.console import Console

    folder, mix_file = project(tmp_path)
    started: list[str] = []

    class Server:
        base_url, cold_start_s = "http://127.0.0.1:9", 0.0

        def __enter__(self) -> Server:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def alive(self) -> bool:
            return True

    def provision(stack: Any, **_: Any) -> ProvisionedEnv:
        return ProvisionedEnv(Path("/v"), Path("/v/bin/python"), {}, "k", True, 0.0)

    def start(stack: Any, env: Any, options: Any, ready: str) -> Any:
        started.append(ready)
        return Server()

    def check(server: Any, stack: Any, workload: Any, *_: Any, **__: Any) -> bringup.Check:
        checks = [
            EndpointCheck(name, es[0].method, es[0].path, None)
            for name, es in endpoint_entries(workload.mix).items()
        ]
        checks[3] = dataclasses.replace(checks[3], problem="status 404, expected 200")
        return bringup.Check(workload.name, ["x"], endpoints=checks)

    fws = parse_user_apps("mixapp:app", "wsgi", None, [folder], [], None, None,
                          mix=mix_file, mix_entries=load_mix(mix_file))  # fmt: skip
    candidates = plan(default_interpreters()[:1], ["gunicorn-sync"], list(fws), None)
    out = StringIO()
    outcomes = run_verification(
        candidates,
        Console(file=out, width=200, highlight=False),
        tmp_path / "logs",
        steps=bringup.BringUp(provision=provision, start=start, check=check),
    )
    assert started == ["/"]
    said = " ".join(out.getvalue().split())
    assert (
        'PASS mix:mix.toml endpoint "GET /" (GET /) '
        'PASS mix:mix.toml endpoint "GET /items/{id}" (GET /items/1) '
        'PASS mix:mix.toml endpoint "POST /search" (POST /search) '
        'FAIL mix:mix.toml endpoint "GET /missing" (GET /missing): status 404, expected 200'
    ) in said
    assert [(o.endpoint, o.request, o.status, o.workload) for o in outcomes] == [
        ("GET /", "GET /", "pass", "mix:mix.toml"),
        ("GET /items/{id}", "GET /items/1", "pass", "mix:mix.toml"),
        ("POST /search", "POST /search", "pass", "mix:mix.toml"),
        ("GET /missing", "GET /missing", "fail", "mix:mix.toml"),
    ]


def test_verify_mix_checks_each_endpoint_of_the_running_app(tmp_path: Path) -> None:
    """On a real server (gunicorn-sync, the venv of tests/run/test_mix_study.py): every
    endpoint of the mix passes, one line each; an entry expecting what the app does not
    answer fails its endpoint, named, and only it."""
    folder, mix_file = project(tmp_path)
    args = [*_mix_args(folder, mix_file), "--server", "gunicorn-sync", "--json"]
    res = _verify(*args, "--log-dir", str(tmp_path / "logs"))
    assert res.exit_code == 0, res.output
    outcomes = json.loads(res.stdout)
    assert [(o["endpoint"], o["status"]) for o in outcomes] == [(e, "pass") for e in ENDPOINTS]
    said = " ".join(res.stderr.split())  # the console's lines, unwrapped
    assert said.count("PASS mix:mix.toml endpoint") == len(ENDPOINTS)
    assert "app mixapp:app: WSGI, the mix mix.toml (5 requests, 4 endpoints)" in said
    assert f"{len(ENDPOINTS)} passed, 0 failed" in said
    mix_file.write_text(mix_file.read_text().replace("expect_status = [404]", ""))
    res = _verify(*args, "--log-dir", str(tmp_path / "logs2"))
    assert res.exit_code == 1, res.output
    failed = [(o["endpoint"], o["reason"]) for o in json.loads(res.stdout) if o["status"] != "pass"]
    assert failed == [("GET /missing", "status 404, expected 200")]
    assert f"{len(ENDPOINTS) - 1} passed, 1 failed" in " ".join(res.stderr.split())
    assert (  # the console wraps long lines at spaces
        'FAIL mix:mix.toml endpoint "GET /missing" (GET /missing): status 404, expected 200'
        in " ".join(res.stderr.split())
    )
