"""HTTP/2 cleartext (h2c, prior knowledge) against real servers on loopback: nginx with
``listen ... http2`` and hypercorn (a catalogue server), on both I/O backends, closed and open
loop, large bodies through flow control, GOAWAY at nginx's request limit, and an HTTP/1.1-only
server that must fail with one clear line.

The servers run in their own sessions, pinned to core 0, and are stopped (process group) at
teardown, which checks that their process groups are empty.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pywebbench
from pwbtest import GEN_CPUS, command
from pywebbench.load import LoadSpec, run_load

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
BIG_BYTES = 20 * 1024 * 1024  # over our 16 MiB receive windows: needs WINDOW_UPDATEs
HELLO = "Hello, World!"

# `user`: the worker reads big.bin from pytest's private temporary directory (ignored, with a
# warning, when the tests do not run as root).
NGINX_CONF = """\
user {user};
worker_processes 1;
daemon off;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{h2c} http2;
        location / {{ return 200 "{hello}"; }}
        location = /big {{ alias {prefix}/big.bin; }}
    }}
    server {{
        listen 127.0.0.1:{goaway} http2;
        keepalive_requests 50;
        location / {{ return 200 "{hello}"; }}
    }}
    server {{
        listen 127.0.0.1:{http1};
        location / {{ return 200 "{hello}"; }}
    }}
}}
"""

#: The catalogue's raw ASGI app (its ``/hello`` workload), served by hypercorn from its folder.
APPS = Path(pywebbench.__file__).parent / "inside" / "apps"


@dataclass(frozen=True)
class Servers:
    h2c: str
    goaway: str
    http1: str
    hypercorn: str
    big: Path


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports. All ``n`` are held until each is chosen: a port
    released at once can be handed out again by the next bind (a fresh-clone suite got the
    h2c server's port for the GOAWAY one, and nginx served both on one listener, the first
    server's: no GOAWAY, 0 reconnects)."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def _wait_listening(port: int, p: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f"{what} exited with {p.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port}")


def _stop(p: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _group_alive(pgid: int, wait_s: float = 3.0) -> bool:
    """Process group ``pgid`` still has a process after ``wait_s`` (exiting ones get time)."""
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
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """nginx (h2c, h2c closing after 50 requests, HTTP/1.1 only) and hypercorn, on core 0."""
    tmp = tmp_path_factory.mktemp("h2c")
    names = ("h2c", "goaway", "http1", "hypercorn")
    ports = dict(zip(names, _free_ports(len(names)), strict=True))
    big = tmp / "big.bin"
    big.write_bytes(os.urandom(BIG_BYTES))
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(prefix=tmp, hello=HELLO, user=_user(), **ports))
    hypercorn = str(Path(sys.executable).parent / "hypercorn")
    started: list[subprocess.Popen[bytes]] = []
    try:
        for argv, cwd, port, what in (
            ([NGINX, "-p", str(tmp), "-c", str(conf)], None, ports["h2c"], "nginx"),
            (
                [hypercorn, "--bind", f"127.0.0.1:{ports['hypercorn']}",
                 "--log-level", "warning", "pwb_raw_asgi:app"],
                APPS, ports["hypercorn"], "hypercorn",
            ),
        ):  # fmt: skip
            p = subprocess.Popen(
                ["taskset", "-c", "0", *argv],
                cwd=cwd,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started.append(p)
            _wait_listening(port, p, what)
        url = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        yield Servers(url["h2c"], url["goaway"], url["http1"], url["hypercorn"], big)
    finally:
        for p in started:
            _stop(p)
        left = [p.pid for p in started if _group_alive(p.pid)]
        assert not left, f"server process groups left behind: {left}"


def _spec(url: str, **fields: object) -> LoadSpec:
    base: dict[str, object] = {
        "url": url,
        "protocol": "h2c",
        "connections": 4,
        "streams": 8,
        "duration_s": 1.0,
        "timeout_s": 5.0,
        "cpus": GEN_CPUS,
        "expect_body": HELLO,
    }
    return LoadSpec(**{**base, **fields})  # type: ignore[arg-type]


def _errors(r: object) -> dict[str, int]:
    return {name: e.count for name, e in r.error_classes.items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_closed_loop_serves_over_every_connection(servers: Servers, io: str) -> None:
    """A second of closed loop against nginx: every answer a 200 with the body, over the 4
    connections, never more than their 4 x 8 streams in flight. Timed: more than 1,000
    requests. Ten runs on this 2-core VM beside other engineers' tests (5 Dec 2026) made
    63,431-163,126; falling to 1,000 takes a 63x slowdown, where the host's worst is 2.9x
    (1.45 / 0.5, docs/contributing.md), and a stall of the whole second, which steal in
    slices of milliseconds does not make. That every stream is used is exact, on a server
    that never answers: :func:`test_closed_loop_opens_every_stream_of_every_connection`."""
    r = run_load(_spec(f"{servers.h2c}/", io=io))
    assert r.io == io
    assert _errors(r) == {}
    assert r.requests > 1000
    assert r.status_counts == {"200": r.requests}
    assert r.connections.established == 4
    # at most 4 x 8 (a request issued but not yet written, behind a send in progress, is
    # not in flight)
    assert r.connections.in_flight_at_end <= 4 * 8, r.connections


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_closed_loop_opens_every_stream_of_every_connection(io: str) -> None:
    """A server that never answers: the closed loop opens all 8 streams on each of its 4
    connections, and all 32 requests are in flight when the second ends. Exact: nothing
    completes, so nothing is reissued behind a send in progress; the connects and the first
    writes take milliseconds of the second (a hold of the whole second is not seen,
    docs/contributing.md), and the 5-s timeout does not expire within it."""
    with MisbehavingH2Server("silent") as srv:
        r = run_load(_spec(srv.url, io=io, expect_body=None))
    assert _errors(r) == {}
    assert r.requests == 0
    assert r.connections.established == 4
    assert r.connections.in_flight_at_end == 4 * 8, r.connections


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_large_bodies_pass_flow_control(servers: Servers, io: str) -> None:
    spec = _spec(
        f"{servers.h2c}/big", io=io, connections=1, streams=3, max_requests=6,
        duration_s=30.0, timeout_s=20.0, expect_body=None,
    )  # fmt: skip
    r = run_load(spec)
    assert _errors(r) == {}
    assert r.requests == 6
    assert r.status_counts == {"200": 6}
    assert r.bytes_in >= 6 * BIG_BYTES


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_open_loop_spreads_sends_over_free_streams(servers: Servers, io: str) -> None:
    """2,000 sends/s for a second over 2 connections of 4 streams each. Exact: the 2,000
    sends scheduled in the second (at k / 2000 s, k = 0..1999) are offered, each completed,
    in flight or unsent at the end, and no more than the 2 x 4 streams are in flight. Timed:
    at most half a second of sends (1,000) unfinished, which needs nginx or the generator
    stood still for the last half second: at 50% steal, the host's whole take in one block,
    where it takes it in slices of milliseconds (tests/load/test_rate_phases.py, module
    docstring). Ten runs beside other engineers' tests left none unfinished."""
    r = run_load(_spec(f"{servers.h2c}/", io=io, connections=2, streams=4, rate=2000.0))
    assert _errors(r) == {}
    ol = r.open_loop
    assert ol is not None
    assert ol.offered == 2000
    unfinished = r.connections.in_flight_at_end + ol.unsent_at_end
    assert r.requests + unfinished == ol.offered, (r.requests, r.connections, ol)
    assert r.connections.in_flight_at_end <= 2 * 4, r.connections
    assert unfinished <= 2000 * 0.5, (r.requests, r.connections, ol)
    assert r.service_time is not None


def test_goaway_at_the_request_limit_reconnects_without_errors(servers: Servers) -> None:
    r = run_load(_spec(f"{servers.goaway}/", connections=2, streams=8, max_requests=2000))
    assert _errors(r) == {}
    assert r.requests == 2000
    assert r.connections.reopened >= 2000 // 50 - 2


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_each_connection_serves_its_requests_then_reconnects(servers: Servers, io: str) -> None:
    # requests_per_connection (httperf's --num-calls) over h2c: no more streams are opened
    # than the connection serves; it drains, closes and opens again, with no error.
    spec = _spec(f"{servers.h2c}/", io=io, requests_per_connection=20, max_requests=2000)
    r = run_load(spec)
    assert _errors(r) == {}
    assert r.requests == 2000
    per = r.connections.requests_per_connection
    assert (per.max, per.p50) == (20, 20), r.connections
    assert 100 <= r.connections.established <= 104, r.connections  # 4 may end partial


def test_hypercorn_speaks_h2c(servers: Servers) -> None:
    # hypercorn closes an HTTP/2 connection after 1,000 requests (keep_alive_max_requests)
    # and answers the frames already on their way with GOAWAY PROTOCOL_ERROR: a few
    # h2_goaway errors each time (docs/http2.md). 1,200 requests over 2 connections stay
    # below that limit.
    spec = _spec(f"{servers.hypercorn}/hello", connections=2, streams=4, max_requests=1200)
    r = run_load(spec.replace(duration_s=30.0))
    assert _errors(r) == {}
    assert r.requests == 1200
    assert r.status_counts == {"200": r.requests}


def test_an_http1_only_server_fails_with_one_clear_line(servers: Servers, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    p = command(
        ["load", f"{servers.http1}/", "--protocol", "h2c", "-c", "2", "-d", "0.5",
         "-q", "--json", str(out)],
        timeout=60,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines == [
        'error: server did not speak h2c: answered HTTP/1.x ("HTTP/1.1 400 Bad Request")'
    ], p.stderr
    doc = json.loads(out.read_text())
    assert set(doc["error_classes"]) == {"h2_not_spoken"}
    assert doc["requests"] == 0


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--protocol", "h2c", "--streams", "0"], "--streams"),
        (["--streams", "4"], "--streams"),
        (["--protocol", "h2c", "--pipeline", "2"], "--pipeline"),
        (["--protocol", "h2c", "--no-keepalive"], "--no-keepalive"),
        (["--protocol", "h2"], "--protocol"),
    ],
)
def test_bad_protocol_flags_name_the_flag(args: list[str], flag: str) -> None:
    p = command(
        ["load", "http://127.0.0.1:9/", *args, "-d", "1"],
        timeout=60,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert flag in p.stderr, p.stderr


class MisbehavingH2Server:
    """A raw h2c server on loopback that answers every request stream with ``how``:
    ``silent`` (no answer at all), ``reset`` (RST_STREAM REFUSED_STREAM), ``no-status``
    (headers without ``:status``), ``data-first`` (DATA before any headers), ``goaway``
    (GOAWAY PROTOCOL_ERROR) or ``garbage`` (a PING of 3 bytes). Threads in this process,
    stopped at exit."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept)]

    def __enter__(self) -> MisbehavingH2Server:
        self.threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in list(self.threads):
            t.join(timeout=5)
        self.sock.close()

    @staticmethod
    def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
        return (
            struct.pack(">I", len(payload))[1:]
            + bytes([kind, flags])
            + (struct.pack(">I", stream) + payload)
        )

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,))
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        buf = b""
        with conn:
            conn.sendall(self.frame(4, 0, 0, b""))  # SETTINGS
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                buf += data
                if buf.startswith(b"PRI * HTTP/2.0"):
                    buf = buf[24:]
                while len(buf) >= 9:
                    length = int.from_bytes(buf[:3], "big")
                    if len(buf) < 9 + length:
                        break
                    kind, stream = buf[3], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    buf = buf[9 + length :]
                    if kind != 1 or self.how == "silent":  # only HEADERS get an answer
                        continue
                    if self.how == "reset":
                        conn.sendall(self.frame(3, 0, stream, struct.pack(">I", 7)))
                    elif self.how == "no-status":  # a header block with x-a: b only
                        block = b"\x00\x03x-a\x01b"
                        conn.sendall(self.frame(1, 0x5, stream, block))
                    elif self.how == "data-first":
                        conn.sendall(self.frame(0, 0x1, stream, b"body"))
                    elif self.how == "goaway":
                        conn.sendall(self.frame(7, 0, 0, struct.pack(">II", 0, 1) + b"no"))
                        return
                    else:
                        conn.sendall(self.frame(6, 0, 0, b"abc"))
                        return


@pytest.mark.parametrize(
    ("how", "error_class", "example"),
    [
        ("reset", "h2_stream_reset", "RST_STREAM REFUSED_STREAM"),
        ("goaway", "h2_goaway", "GOAWAY PROTOCOL_ERROR"),
        ("garbage", "h2_protocol_error", "frame type 6 of 3 bytes"),
        ("no-status", "h2_protocol_error", "ended without a final :status"),
        ("data-first", "h2_protocol_error", "DATA before the response headers"),
    ],
)
@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_stream_and_connection_errors_are_classified(
    how: str, error_class: str, example: str, io: str
) -> None:
    with MisbehavingH2Server(how) as srv:
        r = run_load(_spec(srv.url, io=io, connections=2, streams=2, max_requests=200))
    assert r.requests == 0
    errors = r.error_classes
    assert set(errors) == {error_class}, errors
    assert errors[error_class].count >= 200
    assert example in errors[error_class].example, errors[error_class].example
