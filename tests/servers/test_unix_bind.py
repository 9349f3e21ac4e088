"""Unix-domain socket binds (``--bind unix``) below the runner: what each adapter's command line
says, the launcher's socket, base URLs of both kinds, the socket's private directory, and the
servers ``start_server`` refuses to bind one (a real start on a unix socket: test_launch.py)."""

from __future__ import annotations

import importlib.util
import socket
import stat
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from pywebbench.bind import (
    can_bind_unix,
    new_socket_dir,
    parse_base_url,
    unix_base_url,
)
from pywebbench.catalogue.base import (
    LAUNCHERS_DIR,
    Interpreter,
    LaunchContext,
    Stack,
)
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.catalogue.servers import ADAPTERS
from pywebbench.launch import LaunchError, start_server

ENV = SimpleNamespace(venv=Path(sys.prefix), python=Path(sys.executable))
SOCK = Path("/tmp/pwb-test/server.sock")
# The adapters that can listen on a unix socket, and how their argv says it.
UNIX_ARGV = {
    "gunicorn-sync": ["--bind", f"unix:{SOCK}"],
    "gunicorn-gthread": ["--bind", f"unix:{SOCK}"],
    "gunicorn-gevent": ["--bind", f"unix:{SOCK}"],
    "gunicorn-uvicorn": ["--bind", f"unix:{SOCK}"],
    "hypercorn": ["--bind", f"unix:{SOCK}"],
    "uwsgi": ["--http11-socket", str(SOCK)],
    "uvicorn-h11": ["--uds", str(SOCK)],
    "uvicorn-uvloop": ["--uds", str(SOCK)],
    "granian-wsgi": ["--uds", str(SOCK)],
    "granian-asgi": ["--uds", str(SOCK)],
    "waitress": ["--unix-socket", str(SOCK)],
}


def _context(interp: Interpreter, unix_socket: Path | None) -> LaunchContext:
    return LaunchContext(
        interp, Path("/nonexistent/venv"), Path("/x"), "mod:app", "127.0.0.1", 12345,
        unix_socket=unix_socket,
    )  # fmt: skip


def _contains(argv: list[str], part: list[str]) -> bool:
    return any(argv[i : i + len(part)] == part for i in range(len(argv)))


def test_the_catalogue_says_which_servers_bind_unix_and_their_argv_does() -> None:
    interp = default_interpreters()[0]
    assert {n for n, a in ADAPTERS.items() if can_bind_unix(a)} == set(UNIX_ARGV)
    for name, adapter in ADAPTERS.items():
        if adapter.unavailable(interp):
            continue
        tcp = adapter.command(_context(interp, None)).argv
        assert str(SOCK) not in " ".join(tcp) and "--unix-socket" not in tcp, (name, tcp)
        if name not in UNIX_ARGV:
            assert adapter.unix_bind is None, name
            continue
        argv = adapter.command(_context(interp, SOCK)).argv
        assert _contains(argv, UNIX_ARGV[name]), (name, argv)
        if name != "waitress":  # the launcher's common line still carries host and port
            assert "12345" not in " ".join(argv) and "--host" not in argv, (name, argv)


def test_the_launchers_socket_is_a_listening_unix_socket(tmp_path: Path) -> None:
    module_path = LAUNCHERS_DIR / "launch_common.py"
    spec = importlib.util.spec_from_file_location("launch_common", module_path)
    assert spec is not None and spec.loader is not None
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    args = common.parse_args("t", ["--app", "m:a", "--port", "1", "--unix-socket", "/s.sock"])
    assert args.unix_socket == "/s.sock"
    path = tmp_path / "l.sock"
    sock = common.bind_socket("127.0.0.1", 0, 16, str(path))
    try:
        assert sock.family == socket.AF_UNIX and stat.S_ISSOCK(path.stat().st_mode)
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))  # it listens
    finally:
        sock.close()


def test_base_urls_of_both_kinds_parse() -> None:
    unix = parse_base_url(unix_base_url("/run/app.sock"))
    assert (unix.unix_socket, unix.prefix, unix.host_header) == ("/run/app.sock", "", "localhost")
    assert parse_base_url("unix:/run/a:b.sock:/api/").unix_socket == "/run/a:b.sock"
    assert parse_base_url("unix:/run/a:b.sock:/api/").prefix == "/api"
    tcp = parse_base_url("http://[::1]:8000/x")
    assert (tcp.host, tcp.port, tcp.unix_socket) == ("::1", 8000, None)
    assert tcp.host_header == "[::1]:8000" and tcp.prefix == "/x"
    for bad in ("https://x:1", "unix::", "ftp://x"):
        with pytest.raises(ValueError, match="base_url"):
            parse_base_url(bad)


def test_a_socket_directory_is_private_and_short_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    made = new_socket_dir()
    try:
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    finally:
        made.rmdir()
    deep = Path(tempfile.gettempdir(), "pwb-deep-" + "d" * 90)
    deep.mkdir()
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(deep))
        made = new_socket_dir()
        made.rmdir()
        assert made.parent == Path("/tmp")  # the long directory would not fit sun_path
    finally:
        deep.rmdir()


def test_servers_that_cannot_bind_unix_are_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    interp = default_interpreters()[0]
    for name in ("bjoern", "socketify-wsgi", "daphne"):
        adapter = ADAPTERS[name]
        fw = next(f for f in FRAMEWORKS.values() if f.interface == adapter.interface)
        with pytest.raises(LaunchError) as err:
            start_server(Stack(interp, adapter, fw, ()), ENV, log_dir=tmp_path, bind="unix")
        assert err.value.phase == "config"
        assert f"{name} cannot bind a unix socket" in str(err.value)
    gunicorn = Stack(interp, ADAPTERS["gunicorn-sync"], FRAMEWORKS["raw-wsgi"], ())
    with pytest.raises(LaunchError, match="bind 'udp'"):
        start_server(gunicorn, ENV, log_dir=tmp_path, bind="udp")  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())  # no log, nothing started
