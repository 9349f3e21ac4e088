"""pywebbench.launch with small real programs (no venv needed): readiness, failures with the
log tail, servers that ignore SIGTERM, pinning, that no process of a group survives, and a
server on a unix socket (``bind="unix"``)."""

from __future__ import annotations

import os
import signal
import stat
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from pywebbench.bind import SUN_PATH_MAX, http_connection, new_socket_dir, parse_base_url
from pywebbench.catalogue.base import (
    WSGI,
    Framework,
    Interpreter,
    LaunchCommand,
    LaunchContext,
    ServerAdapter,
    Stack,
)
from pywebbench.catalogue.servers import ADAPTERS
from pywebbench.catalogue.workloads import HttpRequest
from pywebbench.launch import LaunchError, free_port, group_members, start_server
from pywebbench.launch.process import ProcessGroup
from pywebbench.load import run_load
from pywebbench.load.spec import spec_for_request
from pywebbench.verify.httpclient import Client

PY = sys.executable
# A tiny HTTP server: argv = port, then flags. "ignore-term" ignores SIGTERM; "fork" starts a
# child process in the same group; "exit" exits at once with a message; "silent" never listens.
SERVER = textwrap.dedent(
    """
    import http.server, os, signal, sys, time
    port, flags = int(sys.argv[1]), sys.argv[2:]
    if "exit" in flags:
        print("boom: cannot start", flush=True)
        sys.exit(7)
    if "ignore-term" in flags:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "fork" in flags and os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
        os._exit(0)
    if "silent" in flags:
        time.sleep(600)
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clashed")
    if "clash-once" in flags and not os.path.exists(marker):
        open(marker, "w").close()
        print("RuntimeError: Failed to listen on port %d" % port, flush=True)
        time.sleep(600)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"Hello, World!"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


class Scripted(ServerAdapter):
    """A test adapter running SERVER with flags."""

    __test__ = False
    interface = WSGI

    def __init__(self, script: Path, *flags: str, stop_timeout_s: float = 5.0):
        self.name = "scripted-" + "-".join(flags or ("plain",))
        self.script = script
        self.flags = flags
        self.stop_timeout_s = stop_timeout_s

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return []

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        return LaunchCommand([PY, str(self.script), str(ctx.port), *self.flags])

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return {"workers": ctx.workers, "threads": ctx.threads, "access_log": False}


class NoFramework(Framework):
    name = "none"
    interface = WSGI
    app = "none:app"
    workloads = frozenset({"hello"})

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return []


INTERP = Interpreter("cpython-test", "cpython", "3.11.0", PY)
ENV = SimpleNamespace(venv=Path(sys.prefix), python=Path(PY))


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scripted") / "server.py"
    path.write_text(SERVER)
    return path


def stack(adapter: ServerAdapter) -> Stack:
    return Stack(INTERP, adapter, NoFramework(), ())


def test_ready_and_stop(script: Path, tmp_path: Path) -> None:
    called = time.monotonic()
    srv = start_server(stack(Scripted(script)), ENV, cpus=[0], log_dir=tmp_path)
    with srv:
        # the start's own time, within the time around the call: exact on any host
        assert srv.alive() and 0 < srv.cold_start_s <= time.monotonic() - called
        assert srv.base_url == f"http://127.0.0.1:{srv.port}"
        assert srv.settings["cpus"] == [0]
        status = Path(f"/proc/{srv.pid}/status").read_text()
        assert "Cpus_allowed_list:\t0\n" in status
        assert srv.log_path.exists() and "# pywebbench:" in srv.log_path.read_text()
        assert srv.group.watchdog is not None and srv.group.watchdog.poll() is None
    assert group_members(srv.pgid) == []
    assert srv.group.watchdog.returncode == 0, "stop() disarms the watchdog"
    srv.stop()  # idempotent


def test_sigterm_ignorer_is_killed(script: Path, tmp_path: Path) -> None:
    adapter = Scripted(script, "ignore-term", "fork", stop_timeout_s=0.5)
    srv = start_server(stack(adapter), ENV, log_dir=tmp_path)
    assert len(srv.members()) == 2  # the server and its forked child
    t0 = time.monotonic()
    srv.stop()
    # The 0.5-s SIGTERM wait is a timer (only late): over 0.4 s on any host. Then SIGKILL
    # and a reap: the test's call took 0.64 s on this project's 2-core VM (5 Dec 2026); 5 s
    # is exceeded only by 4.4 s of holds, where the host steals in slices of milliseconds
    # (docs/contributing.md): far rarer than 1 in 10,000 (issue 52).
    assert 0.4 < time.monotonic() - t0 < 5, "SIGTERM wait then SIGKILL"
    assert group_members(srv.pgid) == []
    assert srv.group.returncode == -signal.SIGKILL


def test_exit_at_start_reports_log_tail(script: Path, tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(LaunchError) as err:
        start_server(stack(Scripted(script, "exit")), ENV, port=port, log_dir=tmp_path)
    assert err.value.phase == "start"
    assert "exited with code 7" in err.value.reason
    assert "boom: cannot start" in err.value.log_tail
    assert "boom" in str(err.value)


def test_never_ready_times_out_and_cleans_up(script: Path, tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as err:
        start_server(
            stack(Scripted(script, "silent", "fork", stop_timeout_s=0.2)),
            ENV,
            log_dir=tmp_path,
            start_timeout_s=1.5,
        )
    assert err.value.phase == "ready"
    assert "did not answer within 1.5 s" in err.value.reason
    assert silent_servers() == [], "the server and its child must be gone"


def silent_servers() -> list[int]:
    """PIDs of live processes running this module's script with the "silent" flag."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"server.py" in cmd and b"silent" in cmd:
                found.append(int(entry))
    return found


def test_port_clash_is_retried_on_another_port(script: Path, tmp_path: Path) -> None:
    """A server that logs a bind failure but keeps running (socketify) is stopped at once and
    started again on another free port."""
    t0 = time.monotonic()
    adapter = Scripted(script, "clash-once", stop_timeout_s=0.2)
    with start_server(stack(adapter), ENV, log_dir=tmp_path) as srv:
        assert srv.alive()
    # Two starts of a small Python script and a 0.2-s stop between them: the whole test took
    # 1.1 s on this project's 2-core VM (5 Dec 2026), 3.3 s at 2.9x slower (a 1.45x slower
    # core at 50% steal, docs/contributing.md); 20 s is exceeded only by 16 s of holds: far
    # rarer than 1 in 10,000 (issue 52). It tells a retry from a wait for the 60-s start
    # timeout.
    assert time.monotonic() - t0 < 20
    logs = sorted(tmp_path.glob("server-*.log"))
    assert len(logs) == 2 and any("Failed to listen" in p.read_text() for p in logs)


def test_config_errors(script: Path, tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="not a loopback"):
        start_server(stack(Scripted(script)), ENV, host="0.0.0.0", log_dir=tmp_path)
    with pytest.raises(LaunchError, match="must be >= 1"):
        start_server(stack(Scripted(script)), ENV, workers=0, log_dir=tmp_path)
    with pytest.raises(LaunchError) as err:
        start_server(stack(Scripted(script)), ENV, cpus=[4096], log_dir=tmp_path)
    assert err.value.phase == "spawn"


def test_process_group_log_goes_to_file(tmp_path: Path) -> None:
    """A chatty child writes megabytes without blocking (file, not pipe)."""
    log = tmp_path / "chatty.log"
    code = "import sys\nfor i in range(200000): print('x' * 30)\n"
    with ProcessGroup.start([PY, "-c", code], log_path=log) as group:
        group.popen.wait(timeout=30)
    assert log.stat().st_size > 6_000_000
    assert group_members(group.pgid) == []


# Starts SERVER (argv[1], ignoring SIGTERM, with a forked child) from a thread that ends at
# once, the paths argv[3:] to remove if orphaned, prints the group id, then lives until killed.
ORPHAN_PARENT = textwrap.dedent(
    """
    import sys, threading, time
    from pywebbench.launch.process import ProcessGroup
    out = {}
    def start():
        out["g"] = ProcessGroup.start(
            [sys.executable, sys.argv[1], sys.argv[2], "ignore-term", "fork"],
            log_path=None, orphan_grace_s=0.5, orphan_paths=sys.argv[3:],
        )
    t = threading.Thread(target=start)
    t.start()
    t.join()
    print(out["g"].pgid, flush=True)
    time.sleep(120)
    """
)


def test_group_dies_with_a_sigkilled_parent(script: Path, tmp_path: Path) -> None:
    """A pywebbench killed by SIGKILL leaves no server behind, even one started from a thread
    that has since ended, that ignores SIGTERM and that has forked a child; then the paths the
    group was given to remove are gone."""
    import os
    import subprocess

    tree, log = tmp_path / "data", tmp_path / "server.log"
    (tree / "base").mkdir(parents=True)
    (tree / "base" / "file").write_text("x")
    log.write_text("x")
    parent = subprocess.Popen(
        [PY, "-c", ORPHAN_PARENT, str(script), str(free_port()), str(tree), str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    pgid = 0
    try:
        pgid = int(parent.stdout.readline())
        deadline = time.monotonic() + 20
        while len(group_members(pgid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the starting thread is long gone: the group must still run
        assert len(group_members(pgid)) == 2
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        t0 = time.monotonic()
        while group_members(pgid) and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert group_members(pgid) == [], "the server group outlived its parent"
        # The watchdog sees its parent die, sends SIGTERM, waits the 0.5-s grace (a timer)
        # in 50-ms polls, then SIGKILLs: ~0.6 s. 5 s is exceeded only by 4.4 s of holds,
        # where the host steals in slices of milliseconds (docs/contributing.md): far rarer
        # than 1 in 10,000 (issue 52).
        assert time.monotonic() - t0 < 5, "0.5 s grace, then SIGKILL"
        while (tree.exists() or log.exists()) and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert not tree.exists() and not log.exists(), "the group's paths outlived the parent"
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if pgid and group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_a_group_stopped_by_its_starter_keeps_its_paths(tmp_path: Path) -> None:
    """Paths to remove are the watchdog's business only when the starter died: a group the
    starter stops leaves them to the starter."""
    keep = tmp_path / "keep"
    keep.mkdir()
    group = ProcessGroup.start([PY, "-c", "pass"], log_path=None, orphan_paths=[keep])
    group.stop()
    assert group.watchdog is not None and group.watchdog.returncode == 0
    assert keep.is_dir()


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_registry_contract() -> None:
    """Every adapter: exact pins, notes, a manifest with the fairness fields, loopback only."""
    from pywebbench.catalogue.interpreters import default_interpreters

    required = {"workers", "threads", "threads_ignored", "worker_class", "event_loop"}
    required |= {"http_parser", "keep_alive", "access_log", "backlog", "concurrency"}
    for interp in default_interpreters():
        for name, adapter in ADAPTERS.items():
            assert adapter.name == name and adapter.notes and adapter.description
            if adapter.unavailable(interp):
                continue
            reqs = adapter.requirements(interp)
            assert reqs and all("==" in r for r in reqs), (name, reqs)
            ctx = LaunchContext(
                interpreter=interp,
                venv=Path("/nonexistent/venv"),
                app_dir=Path("/nonexistent/apps"),
                app="mod:app",
                host="127.0.0.1",
                port=12345,
                workers=3,
                threads=4,
            )
            settings = adapter.settings(ctx)
            assert required <= settings.keys(), (name, required - settings.keys())
            assert settings["access_log"] is False and settings["workers"] == 3
            argv = adapter.command(ctx).argv
            joined = " ".join(argv)
            assert "12345" in joined and "0.0.0.0" not in joined, (name, argv)


def test_worker_recycling_flags_follow_the_catalogue() -> None:
    """--worker-max-requests: an adapter with a ``max_requests_flag`` passes it (and records
    it in the manifest); any other refuses the setting instead of ignoring it."""
    import dataclasses

    from pywebbench.catalogue.interpreters import default_interpreters

    interp = default_interpreters()[0]
    base = LaunchContext(interp, Path("/nonexistent/venv"), Path("/x"), "mod:app", "127.0.0.1", 1)
    recycling = {name for name, a in ADAPTERS.items() if a.max_requests_flag}
    assert {"gunicorn-sync", "gunicorn-gthread", "uwsgi", "hypercorn"} <= recycling
    assert "granian-wsgi" not in recycling and "uvicorn-h11" not in recycling
    for name, adapter in ADAPTERS.items():
        if adapter.unavailable(interp):
            continue
        never = adapter.command(base).argv
        assert "--max-requests" not in never, name
        ctx = dataclasses.replace(base, max_requests=100)
        if name not in recycling:  # start_server refuses it with a config error
            with pytest.raises(ValueError, match="no worker recycling"):
                adapter.max_requests_args(ctx)
            continue
        argv = adapter.command(ctx).argv
        i = argv.index(str(adapter.max_requests_flag))
        assert argv[i + 1] == "100", (name, argv)
        assert adapter.settings(ctx)["max_requests"] == 100


# A tiny keep-alive HTTP/1.1 server on the unix socket argv[1]; "exit" exits at once instead.
UNIX_SERVER = textwrap.dedent(
    """
    import http.server, socketserver, sys
    if "exit" in sys.argv:
        print("boom", flush=True)
        sys.exit(3)
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            body = ("hello %s" % self.headers["Host"]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def address_string(self):
            return "unix"
        def log_message(self, *a):
            pass
    class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True
    S(sys.argv[1], H).serve_forever()
    """
)


class UnixScripted(ServerAdapter):
    """A test adapter running UNIX_SERVER on the context's unix socket."""

    __test__ = False
    interface = WSGI
    unix_bind = "argv[1] PATH"

    def __init__(self, script: Path, *flags: str) -> None:
        self.name = "unix-scripted"
        self.script = script
        self.flags = flags

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return []

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        return LaunchCommand([PY, str(self.script), str(ctx.unix_socket), *self.flags])


def test_a_unix_server_answers_verification_and_load_over_its_socket(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(UNIX_SERVER)
    srv = start_server(stack(UnixScripted(script)), ENV,
                       log_dir=tmp_path / "logs", bind="unix")  # fmt: skip
    with srv:
        path = srv.unix_socket
        assert path is not None and stat.S_ISSOCK(path.stat().st_mode)
        assert len(os.fsencode(path)) <= SUN_PATH_MAX
        assert srv.base_url == f"unix:{path}:"
        with Client(srv.base_url) as client:
            for _ in range(2):  # one keep-alive connection over the socket
                resp = client.send(HttpRequest("GET", "/hello"))
                assert (resp.status, resp.body) == (200, b"hello localhost")
        conn = http_connection(parse_base_url(srv.base_url), 5.0)
        conn.request("GET", "/")
        assert conn.getresponse().read() == b"hello localhost"
        conn.close()
        # a study's load spec: the socket apart from the url, whose query may hold ":/"
        request = HttpRequest("GET", "/hello?next=http://x/")
        spec = spec_for_request(
            srv.base_url, request, connections=2, duration_s=0.3, timeout_s=2.0, cpus=[]
        )
        assert (spec.url, spec.unix_socket) == ("http://localhost/hello?next=http://x/", str(path))
        result = run_load(spec)
        # 5,602-7,025 requests were measured in the 0.3 s (5 Dec 2026), 1,930 at 2.9x slower
        # (docs/contributing.md, "Timing bounds in the suite"): 10 is 190x under that.
        assert result.requests > 10 and result.errors == 0, result.error_classes
        assert result.status_counts == {"200": result.requests}
    assert group_members(srv.pgid) == []
    assert not path.parent.exists()  # the socket's directory went with the server


def test_a_failed_unix_start_leaves_no_socket_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "server.py"
    script.write_text(UNIX_SERVER)
    sockets = tmp_path / "t"
    sockets.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(sockets))
    probe = new_socket_dir()
    probe.rmdir()
    assert probe.parent == sockets  # socket directories are made there
    failing = stack(UnixScripted(script, "exit"))
    with pytest.raises(LaunchError) as err:
        start_server(failing, ENV, log_dir=tmp_path / "logs", bind="unix")
    assert err.value.phase == "start" and "boom" in err.value.log_tail
    assert list(sockets.iterdir()) == []
