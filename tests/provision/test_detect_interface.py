"""A user's app made ready: WSGI/ASGI detected by importing it in a real venv, as a process
group that leaves nothing behind and is bounded in time."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from pywebbench.catalogue.base import ASGI, WSGI
from pywebbench.catalogue.byo import UserFramework
from pywebbench.provision import user_app
from pywebbench.provision.user_app import user_framework

HTTPBIN = "httpbin==0.10.4"  # a WSGI app (Flask) from PyPI, not part of this repo


@pytest.fixture(autouse=True)
def no_orphans():
    """Nothing this test started may outlive it (the session's shared fixtures, started
    before it, are not its own)."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not left, f"processes left behind: {[p.cmdline() for p in left]}"


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
        "print('chatty import', flush=True)\n"
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


def test_declared_interface_needs_no_venv(tmp_path: Path, monkeypatch) -> None:
    def no_detection(*args: object, **kwargs: object) -> str:
        raise AssertionError("detection ran although --interface was given")

    monkeypatch.setattr(user_app, "detect_interface", no_detection)
    assert user_framework("m:app", "asgi", None, None, [], None, None).interface == ASGI


def test_detection_errors_name_the_flag(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="--app m:nope: cannot import m:nope: AttributeError"):
        user_framework("m:nope", None, None, tmp_path, [], None, None)
    with pytest.raises(ValueError, match="not callable.*--interface"):
        user_framework("m:x", None, None, tmp_path, [], None, None)


def test_detection_stops_what_the_import_started(tmp_path: Path, monkeypatch) -> None:
    """An app whose import starts a process, then hangs: detection gives up after its
    timeout with a one-line reason, and stops the whole group (the no_orphans guard)."""
    (tmp_path / "slow.py").write_text(
        "import subprocess, time\n"
        "subprocess.Popen(['sleep', '60'])\n"
        "time.sleep(60)\n"
        "def app(environ, start_response):\n"
        "    return [b'']\n"
    )
    monkeypatch.setattr(user_app, "DETECT_TIMEOUT_S", 2.0)
    with pytest.raises(ValueError, match="--app slow:app: importing it took over 2 s"):
        user_framework("slow:app", None, None, tmp_path, [], None, None)
