"""WebSocket (protocol ws) against real servers on loopback: hypercorn (with wsproto) serving
a tiny ASGI echo app (tests/load/ws_echo_app.py), on both I/O backends, closed and open loop,
64 B and 4 KiB messages whose echoes the engine checks byte for byte; a 404 on the upgrade,
a server that corrupts its echoes and one that closes mid-frame, each classified; and the
flags of ``pywebbench load`` for it.

The hypercorn server runs in its own session pinned to core 0 and is stopped (process group)
at teardown, which checks its process group is empty; the mid-frame server is a thread here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from pwbtest import GEN_CPUS
from pywebbench.commands.load import command
from pywebbench.load import LoadResult, LoadSpec, run_load

HERE = Path(__file__).parent
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, p: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f"hypercorn exited with {p.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"hypercorn did not listen on port {port}")


def _group_alive(pgid: int, wait_s: float = 3.0) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    """hypercorn serving the echo app on core 0: its ws:// base URL."""
    port = _free_port()
    hypercorn = str(Path(sys.executable).parent / "hypercorn")
    argv = [hypercorn, "--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
    p = subprocess.Popen(
        ["taskset", "-c", "0", *argv, "ws_echo_app:app"],
        cwd=HERE,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, p)
        yield f"ws://127.0.0.1:{port}"
    finally:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=5)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        assert not _group_alive(p.pid), "hypercorn's process group left behind"


@pytest.fixture
def mid_frame() -> Iterator[str]:
    """A server (a thread here) that accepts the upgrade, then answers each connection's
    first message with half of its echo frame and closes: its ws:// URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            key = next(
                line.split(b":", 1)[1].strip()
                for line in data.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key:")
            )
            accept = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest())
            conn.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
            )
            if not conn.recv(4096):  # the first message (64 bytes: one read)
                return
            conn.sendall(bytes([0x82, 64]) + b"x" * 32)  # half of a 64-byte echo
            time.sleep(0.05)

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept_loop, daemon=True)
    t.start()
    try:
        yield f"ws://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        t.join(timeout=5)
        listener.close()


def _spec(url: str, **fields: object) -> LoadSpec:
    base: dict[str, object] = {
        "url": url,
        "protocol": "ws",
        "connections": 4,
        "duration_s": 1.0,
        "timeout_s": 5.0,
        "cpus": GEN_CPUS,
    }
    return LoadSpec(**{**base, **fields})  # type: ignore[arg-type]


def _errors(r: LoadResult) -> dict[str, int]:
    return {name: e.count for name, e in r.error_classes.items()}


@pytest.mark.parametrize("io", ["epoll", "uring"])
@pytest.mark.parametrize("size", [64, 4096])
def test_closed_loop_echoes_round_trip_intact(echo: str, io: str, size: int) -> None:
    r = run_load(_spec(f"{echo}/ws", io=io, message_bytes=size))
    assert r.io == io
    # Every echo was compared byte for byte with its message: no ws_echo_mismatch.
    assert _errors(r) == {}
    # 9,779-11,182 echoes in the second measured (both sizes and backends; this project's
    # 2-core VM, 5 Dec 2026); 2.9x slower (docs/contributing.md, "Timing bounds in the
    # suite") is 3,370, and 200 is 17x under that: missed only by a stall of most of the
    # second, where the host steals in slices of milliseconds (issue 52).
    assert r.requests > 200, r.requests
    assert r.status_counts == {}
    assert r.bytes_out > r.requests * size
    ws = r.websocket
    assert ws is not None and ws.message_bytes == size
    assert ws.handshakes == 4 and ws.handshake_time.summary.count == 4
    assert r.connections.established == 4


@pytest.mark.parametrize(("io", "size"), [("epoll", 64), ("uring", 4096)])
def test_open_loop_sends_messages_at_the_rate(echo: str, io: str, size: int) -> None:
    """300 messages/s for a second over 8 connections. Exact: the 300 sends scheduled in the
    second (at k / 300 s, k = 0..299) are offered, each echoed, in flight or unsent at the
    end. Timed: at most half a second of them (150) unfinished, which needs the echo server
    or the generator stood still for the last half second: at 50% steal, the host's whole
    take in one block, where it takes it in slices of milliseconds
    (tests/load/test_rate_phases.py, module docstring)."""
    r = run_load(_spec(f"{echo}/ws", io=io, message_bytes=size, rate=300.0, connections=8))
    assert _errors(r) == {}
    assert r.mode == "open"
    ol = r.open_loop
    assert ol is not None and ol.offered_rate == 300.0
    assert ol.offered == 300
    unfinished = r.connections.in_flight_at_end + ol.unsent_at_end
    assert r.requests + unfinished == ol.offered, (r.requests, r.connections, ol)
    assert unfinished <= 300 * 0.5, (r.requests, r.connections, ol)
    assert r.service_time is not None


def test_a_connection_per_message_measures_the_handshake_rate(echo: str) -> None:
    r = run_load(_spec(f"{echo}/ws", keepalive=False, max_requests=100, duration_s=10.0))
    assert _errors(r) == {}
    assert r.requests == 100
    ws = r.websocket
    assert ws is not None
    assert 100 <= ws.handshakes <= 104  # one per message, and per connection at the end
    assert ws.handshake_rate > 0


def test_never_reading_ws_clients_run_beside_the_load(echo: str) -> None:
    # The fault kind ws-no-read (docs/faults.md) goes to the load's path; hypercorn keeps
    # the connections (and takes their messages) while the measured echoes stay intact.
    faults = [{"kind": "ws-no-read", "connections": 3, "interval_ms": 20}]
    r = run_load(_spec(f"{echo}/ws", faults=faults, duration_s=0.6))
    assert _errors(r) == {}
    # 6,613 echoes in the 0.6 s measured, beside the never-reading clients (5 Dec 2026);
    # 2.9x slower is 2,280, and 100 is 22x under that (docs/contributing.md, "Timing bounds
    # in the suite"; issue 52).
    assert r.requests > 100
    assert r.faults is not None
    kr = r.faults["kinds"]["ws-no-read"]
    assert kr["attempts"] >= 3
    assert sum(kr["outcomes"].values()) == kr["attempts"], kr
    # One 16-KiB message a connection after its upgrade clears this; a 20-ms interval
    # schedules 90 in the 0.6 s, and 1,524,924 bytes (93 messages) were measured: at 2.9x
    # slower the server still takes 31.
    assert kr["bytes_sent"] > 3 * 16 * 1024, kr
    assert kr["bytes_received"] < kr["attempts"] * 300, kr  # the 101s, nothing after them


def test_requests_per_connection_counts_echoes(echo: str) -> None:
    spec = _spec(f"{echo}/ws", requests_per_connection=5, max_requests=60, duration_s=10.0)
    r = run_load(spec)
    assert _errors(r) == {}
    assert r.requests == 60
    assert r.connections.requests_per_connection.max == 5
    assert r.websocket is not None and 12 <= r.websocket.handshakes <= 16


def test_a_corrupted_echo_is_caught(echo: str) -> None:
    r = run_load(_spec(f"{echo}/corrupt", connections=1, max_requests=50, duration_s=10.0))
    assert r.requests == 50
    assert _errors(r) == {"ws_echo_mismatch": 50}


def test_a_404_on_the_upgrade_is_one_clear_line(echo: str) -> None:
    res = CliRunner().invoke(command, [f"{echo}/nope", "-c", "2", "-d", "0.5", "-q"])
    assert res.exit_code == 1, res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("error: ws_handshake_rejected: "), last
    assert "404" in last and "expected 101" in last, last
    r = run_load(_spec(f"{echo}/nope", max_requests=10, duration_s=10.0))
    assert set(_errors(r)) == {"ws_handshake_rejected"}
    assert r.requests == 0


def test_a_server_closing_mid_frame_is_classified(mid_frame: str) -> None:
    r = run_load(_spec(f"{mid_frame}/", connections=1, max_requests=3, duration_s=10.0))
    assert r.requests == 0
    e = r.error_classes["ws_closed"]
    assert e.count == 3
    assert "mid-frame (32 of 64 echo bytes received)" in e.example, e.example


def test_the_cli_selects_ws_from_the_url_and_writes_its_figures(echo: str) -> None:
    res = CliRunner().invoke(
        command,
        [f"{echo}/ws", "--message-bytes", "4096", "-c", "4", "-d", "0.5", "-q", "--json", "-"],
    )
    assert res.exit_code == 0, res.output
    text = res.stdout
    doc = json.loads(text[text.index("{") :])
    assert doc["spec"]["protocol"] == "ws"
    assert doc["spec"]["message_bytes"] == 4096
    assert doc["websocket"]["handshakes"] == 4
    assert doc["error_classes"] == {}
    summary = res.stderr
    assert "msg/s" in summary and "Round trip" in summary and "Handshakes" in summary


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--message-bytes", "100"], "--message-bytes"),  # an http:// URL
        (["--protocol", "h2c", "--url-is-ws"], "URL"),
        (["--url-is-ws", "--streams", "2"], "--streams"),
        (["--url-is-ws", "--message-bytes", str(32 << 20)], "--message-bytes"),
        (["--url-is-ws", "-m", "POST"], "--method"),
        (["--url-is-ws", "--expect-status", "200"], "--expect-status"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args: list[str], flag: str) -> None:
    url = "ws://127.0.0.1:9/ws" if "--url-is-ws" in args else "http://127.0.0.1:9/"
    res = CliRunner().invoke(command, [url, *(a for a in args if a != "--url-is-ws")])
    assert res.exit_code == 2, res.output
    assert f"Error: {flag}: " in res.output, res.output
