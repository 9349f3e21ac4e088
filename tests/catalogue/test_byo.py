"""Bring-your-own app: flags validated, WSGI/ASGI detected by importing it in a real venv."""

from __future__ import annotations

from pathlib import Path

import pytest
from pywebbench.catalogue.base import ASGI, WSGI
from pywebbench.catalogue.byo import UserFramework, parse_requirements, user_framework

HTTPBIN = "httpbin==0.10.4"  # a WSGI app (Flask) from PyPI, not part of this repo


@pytest.fixture(scope="module")
def httpbin_requirements(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("byo") / "requirements.txt"
    path.write_text(f"# the app under test\n{HTTPBIN}  # pinned\n")
    return path


def test_detects_wsgi_app_from_pypi(httpbin_requirements: Path) -> None:
    fw = user_framework(
        "httpbin:app", None, httpbin_requirements, None, ["/get", "/status/418"], None, None
    )
    assert isinstance(fw, UserFramework)
    assert fw.interface == WSGI
    assert fw.requirements(None) == [HTTPBIN]  # type: ignore[arg-type]
    assert fw.workloads == {"path:/get", "path:/status/418"}
    assert fw.user_workloads["path:/get"].request().path == "/get"


def test_detects_asgi_app_in_project(tmp_path: Path) -> None:
    (tmp_path / "myasgi.py").write_text(
        "async def app(scope, receive, send):\n"
        "    await send({'type': 'http.response.start', 'status': 200, 'headers': []})\n"
        "    await send({'type': 'http.response.body', 'body': b'ok'})\n"
        "class Wrapped:\n"
        "    def __call__(self, scope, receive, send):\n"
        "        return app(scope, receive, send)\n"
        "wrapped = Wrapped()\n"
        "def wsgi(environ, start_response):\n"
        "    return [b'']\n"
    )
    for spec, expected in (("myasgi:app", ASGI), ("myasgi:wrapped", ASGI), ("myasgi:wsgi", WSGI)):
        fw = user_framework(spec, None, None, tmp_path, [], None, None)
        assert fw.interface == expected, spec
        assert fw.app_dir == tmp_path.resolve()
        assert fw.workloads == {"path:/"}


def test_bad_values_name_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--app 'nocolon'"):
        user_framework("nocolon", "wsgi", None, None, [], None, None)
    with pytest.raises(ValueError, match="--path 'x'"):
        user_framework("m:app", "wsgi", None, None, ["x"], None, None)
    with pytest.raises(ValueError, match="--interface 'rsgi'"):
        user_framework("m:app", "rsgi", None, None, [], None, None)
    with pytest.raises(ValueError, match="--requirements .*no such file"):
        user_framework("m:app", "wsgi", tmp_path / "nope.txt", None, [], None, None)
    with pytest.raises(ValueError, match="--expect-status 42"):
        user_framework("m:app", "wsgi", None, None, [], 42, None)
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="--app m:nope: cannot import m:nope: AttributeError"):
        user_framework("m:nope", None, None, tmp_path, [], None, None)
    with pytest.raises(ValueError, match="not callable.*--interface"):
        user_framework("m:x", None, None, tmp_path, [], None, None)


def test_parse_requirements(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("six==1.16.0\n")
    (tmp_path / "pkg").mkdir()
    req = tmp_path / "req.txt"
    req.write_text("-r base.txt\n\n# c\nbottle==0.13.4 # inline\n-e pkg\n")
    reqs, steps = parse_requirements(req)
    assert reqs == ["six==1.16.0", "bottle==0.13.4"]
    assert steps[0].flags == ("-e", str((tmp_path / "pkg").resolve()))
    req.write_text("--index-url https://example.org/simple\n")
    with pytest.raises(ValueError, match="--requirements .*req.txt:1: option '--index-url'"):
        parse_requirements(req)
