"""`RefServer` as a process: readiness, pinning, clean stop with no orphan (even when its
parent dies), 5,000 idle keep-alive connections, the CLI and the Python/Rust contract."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from pywebbench import _engine
from pywebbench.cli import cli
from pywebbench.launch.process import group_members
from pywebbench.refserver import MODES, RefServer, RefServerConfig, RefServerError
from refserver_wire import connect, get, read_response


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (its parent reaps it).
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_python_config_mirrors_rust() -> None:
    rust = json.loads(_engine.refserver_config_defaults())
    py = RefServerConfig().to_dict()
    assert py == rust, "RefServerConfig defaults drifted from the Rust struct"
    assert tuple(_engine.refserver_modes()) == MODES
    with pytest.raises(ValueError, match="host"):
        RefServerConfig(host="192.0.2.1").validate()
    with pytest.raises(ValueError, match="stall_every_s"):
        RefServerConfig(stall_ms=10).validate()


def test_context_manager_pins_serves_and_leaves_nothing_behind() -> None:
    with RefServer(cpus=[0]) as srv:
        pid = srv.pid
        assert srv.url == f"http://127.0.0.1:{srv.port}"
        assert get(srv.port, "/")[1] == b"Hello, World!"
        allowed = [
            line.split(":", 1)[1].strip()
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("Cpus_allowed_list")
        ]
        assert allowed == ["0"]
        assert os.getpgid(pid) == pid  # its own process group
        assert srv.stats()["threads"] == 1
    assert not _alive(pid)
    assert group_members(pid) == []
    assert srv.returncode == 0  # it exited on SIGTERM by itself, not by SIGKILL
    assert not srv.running


def test_stop_kills_a_server_that_does_not_answer_sigterm() -> None:
    """A stopped (SIGSTOP) server cannot act on SIGTERM: after ``stop_timeout`` the whole
    group is SIGKILLed and nothing is left, not even the server's log."""
    srv = RefServer(stop_timeout=0.3).start()
    pid = srv.pid
    log = srv._log_path
    assert log is not None and log.exists()
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    srv.stop()
    # The 0.3-s wait is a timer (only late), then SIGKILL and a reap: 0.3 s and a few ms on
    # this project's 2-core VM (5 Dec 2026). 5 s is exceeded only by 4.7 s of holds in that
    # window, where the host steals in slices of milliseconds (docs/contributing.md): far
    # rarer than 1 in 10,000, and it tells a kill after stop_timeout from the server's own
    # 5-s default (issue 52).
    assert time.monotonic() - t0 < 5
    assert srv.returncode == -signal.SIGKILL
    assert group_members(pid) == []
    assert not log.exists()


def test_library_does_not_import_the_command() -> None:
    """The refserver library is imported by its command, never the reverse (no cycle)."""
    code = (
        "import sys, pywebbench.refserver\n"
        "print(sorted(m for m in sys.modules if m.startswith('pywebbench.commands')"
        " or m in ('click', 'pywebbench.cli')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "[]"


def test_start_failure_is_reported_and_cleaned_up() -> None:
    with RefServer() as first:
        with pytest.raises(RefServerError, match="Address already in use"):
            RefServer(port=first.port).start()
    with pytest.raises(ValueError, match="delay_ms"):
        RefServer(delay_ms=-1).start()


def test_child_exits_when_its_parent_dies(tmp_path: Path) -> None:
    """Neither the refserver nor its log (in the system's temp directory) outlives a parent
    that exits without cleaning up."""
    code = (
        "import os, sys\n"
        "from pywebbench.refserver import RefServer\n"
        "s = RefServer().start()\n"
        "print(s.pid, flush=True)\n"
        "os._exit(0)\n"  # no clean-up: like a crash or SIGKILL
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    child = int(out.stdout.strip())
    deadline = time.monotonic() + 5
    while (_alive(child) or any(tmp_path.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(child)
    if alive:
        os.killpg(child, signal.SIGKILL)
    assert not alive, "the refserver outlived its parent"
    assert list(tmp_path.iterdir()) == [], "the refserver's log outlived its parent"


def test_holds_5000_idle_keepalive_connections() -> None:
    n = 5000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1000), hard))
    socks = []
    with RefServer(cpus=[0]) as srv:
        try:
            for _ in range(n):
                socks.append(connect(srv.port, timeout=10))
            # Every connection is used once, then left idle.
            for s in socks:
                s.sendall(b"GET / HTTP/1.1\r\n\r\n")
            buf = bytearray()
            for s in socks:
                buf.clear()
                assert read_response(s, buf)[1] == b"Hello, World!"
            time.sleep(0.3)
            st = srv.stats()
            assert st["connections_open"] == n + 1
            assert st["requests"] == n
            rss_kb = int(
                next(
                    line.split()[1]
                    for line in Path(f"/proc/{srv.pid}/status").read_text().splitlines()
                    if line.startswith("VmRSS")
                )
            )
            assert rss_kb < 120_000, f"refserver RSS {rss_kb} kB with {n} idle connections"
            # Still alive and served, idle ones included.
            for s in socks[:: n // 10]:
                s.sendall(b"GET /hello HTTP/1.1\r\n\r\n")
                assert read_response(s, bytearray())[1] == b"Hello, World!"
        finally:
            for s in socks:
                s.close()


def test_cli_help_teaches_and_bad_flags_fail_clearly() -> None:
    runner = CliRunner()
    res = runner.invoke(cli, ["refserver", "--help-all"])
    assert res.exit_code == 0
    for needle in ("--delay-ms", "--stall-every-s", "/misbehave/MODE", "generator ceiling", "load"):
        assert needle in res.output, needle
    res = runner.invoke(cli, ["refserver", "--host", "8.8.8.8"])
    assert res.exit_code != 0 and "--host" in res.output and "loopback" in res.output
    res = runner.invoke(cli, ["refserver", "--stall-ms", "100"])
    assert res.exit_code != 0 and "--stall-" in res.output
    res = runner.invoke(cli, ["refserver", "--mode", "explode"])
    assert res.exit_code != 0 and "--mode" in res.output
    res = runner.invoke(cli, ["refserver", "--cpus", "x"])
    assert res.exit_code != 0 and "--cpus" in res.output


def test_module_entry_prints_port_and_stops_on_sigint() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pywebbench", "refserver", "--port", "0", "--delay-ms", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        assert get(port, "/")[1] == b"Hello, World!"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_config_replace_and_json_round_trip() -> None:
    cfg = RefServerConfig(delay_ms=1.5, mode="drip", cpus=[0, 1])
    assert cfg.resolved_threads() == 2
    again = RefServerConfig.from_json(cfg.to_json())
    assert dataclasses.replace(again, threads=None) == cfg
    with pytest.raises(ValueError, match="delay_msec"):
        RefServerConfig.from_json('{"delay_msec": 1}')


def test_two_threads_pinned_one_per_cpu() -> None:
    with RefServer(cpus=[0, 1]) as srv:
        for _ in range(20):
            assert get(srv.port, "/")[1] == b"Hello, World!"
        st = srv.stats()
        assert st["threads"] == 2 and st["requests"] == 20
        pins = {}
        for task in Path(f"/proc/{srv.pid}/task").iterdir():
            name = (task / "comm").read_text().strip()
            if name.startswith("refserver-"):
                status = (task / "status").read_text().splitlines()
                pins[name] = next(
                    s.split(":", 1)[1].strip() for s in status if s.startswith("Cpus_allowed_list")
                )
        assert pins == {"refserver-0": "0", "refserver-1": "1"}


def _rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(s.split()[1] for s in status if s.startswith("VmRSS")))


def test_memory_stays_bounded_against_clients_that_never_read() -> None:
    """Pipelined floods (responses of 16 KB each) from 40 clients that never read."""
    flood = b"GET /?size=16000 HTTP/1.1\r\n\r\n" * 2000
    with RefServer(cpus=[0]) as srv:
        base = _rss_kb(srv.pid)
        socks = [connect(srv.port) for _ in range(40)]
        try:
            for s in socks:
                s.setblocking(False)
            sent = 0
            t_end = time.monotonic() + 1.5
            while time.monotonic() < t_end:
                for s in socks:
                    try:
                        sent += s.send(flood)
                    except BlockingIOError:
                        pass
            grown = _rss_kb(srv.pid) - base
            # The clients pushed tens of MB: on this project's 2-core VM (5 Dec 2026) the
            # first 20 MiB went in 4 ms and 173 MB in the 1.5 s, so the floor is missed only
            # if this thread was held for nearly all of the 1.5 s, far rarer than 1 in 10,000
            # (docs/contributing.md; issue 52).
            assert sent > 20 << 20, sent
            assert grown < 20_000, f"RSS grew {grown} kB"  # ~0.5 MB per client at most
            assert srv.stats()["requests"] > 0
        finally:
            for s in socks:
                s.close()
