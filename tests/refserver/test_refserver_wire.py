"""The reference server on the wire, through the real process `RefServer` launches:
every misbehaviour mode, malformed requests, delays, stalls, bodies and `/__stats`."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from pywebbench.refserver import RefServer
from refserver_wire import connect, exchange, get, read_response


@pytest.fixture(scope="module")
def srv() -> Iterator[RefServer]:
    with RefServer(cpus=[0], drip_interval_ms=2.0) as s:
        yield s


def req(target: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode()


def test_hello_has_date_server_and_keeps_alive(srv: RefServer) -> None:
    s = connect(srv.port)
    buf = bytearray()
    for target in ("/", "/hello", "/?size=100", "/?status=503"):
        s.sendall(req(target))
        head, body = read_response(s, buf)
        assert "\r\nServer: pywebbench-refserver" in head
        assert re.search(r"\r\nDate: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT", head)
    s.close()
    head, body, _ = get(srv.port, "/hello")
    assert head.startswith("HTTP/1.1 200 OK") and body == b"Hello, World!"
    assert "Content-Type: text/plain" in head
    head, body, _ = get(srv.port, "/?size=30&status=201")
    assert head.startswith("HTTP/1.1 201 ") and body == b"abcdefghijklmnopqrstuvwxyzabcd"
    head, _, _ = get(srv.port, "/no/such/path")
    assert head.startswith("HTTP/1.1 404")


def test_pipelined_requests_are_answered_in_order(srv: RefServer) -> None:
    s = connect(srv.port)
    s.sendall(req("/?delay_ms=60&size=1") + req("/?size=2") + req("/?size=3&status=500"))
    buf = bytearray()
    t0 = time.monotonic()
    bodies = [read_response(s, buf) for _ in range(3)]
    s.close()
    assert [b for _, b in bodies] == [b"a", b"ab", b"abc"]
    assert bodies[2][0].startswith("HTTP/1.1 500")
    assert time.monotonic() - t0 >= 0.055


def test_post_bodies_are_read_and_counted(srv: RefServer) -> None:
    before = srv.stats()
    s = connect(srv.port)
    buf = bytearray()
    s.sendall(b"POST /hello HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
    assert read_response(s, buf)[1] == b"5"
    s.sendall(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    time.sleep(0.05)
    s.sendall(b"A\r\n0123456789\r\n0\r\n\r\n")
    assert read_response(s, buf)[1] == b"13"
    s.close()
    after = srv.stats()
    assert after["request_bodies"] - before["request_bodies"] == 2
    assert after["request_body_bytes"] - before["request_body_bytes"] == 18


# (mode, check on the Exchange). Each is one request on its own connection.
def _close_mid(x) -> None:  # type: ignore[no-untyped-def]
    assert "Content-Length: 1000" in x.head and x.end == "eof"
    assert 0 < len(x.body) < 1000


def _garbage(x) -> None:  # type: ignore[no-untyped-def]
    assert x.data.startswith(b"HTTP/1.1 TWO-HUNDRED OK\r\n") and x.end == "eof"


def _endless(x) -> None:  # type: ignore[no-untyped-def]
    assert x.data.startswith(b"HTTP/1.1 200 OK\r\n") and b"\r\n\r\n" not in x.data
    assert x.data.count(b"X-Endless-") > 500 and x.end == "open"


def _huge(x) -> None:  # type: ignore[no-untyped-def]
    assert "Content-Length: 10000000000" in x.head and len(x.data) >= 4 << 20


def _drip(x) -> None:  # type: ignore[no-untyped-def]
    assert x.data.endswith(b"Hello, World!") and x.data.startswith(b"HTTP/1.1 200 OK")
    # ~150 bytes one by one, 2 ms apart.
    assert x.elapsed >= 0.002 * (len(x.data) - 1) and x.end == "open"


def _reset(x) -> None:  # type: ignore[no-untyped-def]
    assert x.data == b"" and x.end == "reset"


def _bad_chunked(x) -> None:  # type: ignore[no-untyped-def]
    assert "Transfer-Encoding: chunked" in x.head and x.body.startswith(b"zz\r\n")
    assert x.end == "eof"


def _no_response(x) -> None:  # type: ignore[no-untyped-def]
    assert x.data == b"" and x.end == "open" and x.elapsed >= 0.4


def _close_before(x) -> None:  # type: ignore[no-untyped-def]
    assert x.data == b"" and x.end == "eof"


def _chunked(x) -> None:  # type: ignore[no-untyped-def]
    assert "Transfer-Encoding: chunked" in x.head and "Content-Length" not in x.head
    assert x.body == b"7\r\nHello, \r\n6\r\nWorld!\r\n0\r\n\r\n" and x.end == "open"


MODES = {
    "close-mid-response": (_close_mid, {}),
    "garbage-status": (_garbage, {}),
    "endless-headers": (_endless, {"max_bytes": 64 * 1024, "wait": 3.0}),
    "huge-body": (_huge, {"max_bytes": 4 << 20}),
    "drip": (_drip, {"until": b"Hello, World!"}),
    "reset": (_reset, {}),
    "bad-chunked": (_bad_chunked, {}),
    "no-response": (_no_response, {"wait": 0.4}),
    "close-before-response": (_close_before, {}),
    "chunked": (_chunked, {"until": b"0\r\n\r\n"}),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_misbehaviour_mode_on_the_wire(srv: RefServer, mode: str) -> None:
    check, kwargs = MODES[mode]
    before = srv.stats()["modes"][mode]
    x = exchange(
        srv.port,
        req(
            f"/misbehave/{mode}?interval_ms=1"
            if mode == "endless-headers"
            else f"/misbehave/{mode}"
        ),
        **kwargs,
    )
    check(x)
    assert srv.stats()["modes"][mode] == before + 1


def test_server_wide_mode_applies_to_every_request_but_stats() -> None:
    with RefServer(mode="reset") as s:
        assert exchange(s.port, req("/")).end == "reset"
        assert exchange(s.port, req("/hello?size=5")).end == "reset"
        # An explicit /misbehave/<mode> wins over the server-wide mode.
        assert exchange(s.port, req("/misbehave/garbage-status")).data.startswith(b"HTTP/1.1 TWO")
        st = s.stats()
        assert st["modes"]["reset"] == 2 and st["mode"] == "reset"


MALFORMED = {
    "bad request line": b"GET\x01 / HTTP/1.1\r\n\r\n",
    "bad version": b"GET / HTTP/2.7\r\n\r\n",
    "space in header name": b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
    "NUL in header value": b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n",
    "CL and TE": (
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "bad chunk size": b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n",
    "chunk without CRLF": (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n0\r\n\r\n"
    ),
    "bad content-length": b"POST / HTTP/1.1\r\nContent-Length: -4\r\n\r\n",
    "conflicting content-lengths": (
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
    ),
    "unknown transfer-encoding": b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    "bad query value": b"GET /?size=lots HTTP/1.1\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_request_gets_400_and_close(srv: RefServer, name: str) -> None:
    before = srv.stats()["bad_requests"]
    x = exchange(srv.port, MALFORMED[name])
    assert x.head.startswith("HTTP/1.1 400 Bad Request"), x.data
    assert "Connection: close" in x.head and x.end == "eof"
    assert srv.stats()["bad_requests"] == before + 1


def test_oversized_head_gets_431_and_close(srv: RefServer) -> None:
    raw = b"GET / HTTP/1.1\r\n" + b"X-Filler: " + b"y" * 20_000 + b"\r\n\r\n"
    before = srv.stats()["headers_too_large"]
    x = exchange(srv.port, raw)
    assert x.head.startswith("HTTP/1.1 431") and x.end == "eof"
    assert srv.stats()["headers_too_large"] == before + 1


def test_delays_and_jitter_are_per_request_and_non_blocking() -> None:
    """Bounds (issue 52): a timer only fires late, so the lower bounds hold on any host.
    The upper ones allow a second over the design: the host steals up to 50% of the cores
    in slices of milliseconds and no hold of 1 s or more was seen at 11-48% steal, so a
    request of 30-50 ms is answered under 1.05 s (1.0 s of slack), a false failure far
    rarer than 1 in 10,000. A 3,000-ms request on another connection must not hold a quick
    one: the quick one is answered under 2.0 s (2.0 s of slack over its ~0 ms, and still
    1.0 s short of the 3.0 s it would take held behind the slow one)."""
    with RefServer(delay_ms=30.0, delay_jitter_ms=20.0, cpus=[0]) as s:
        times = sorted(get(s.port, "/")[2] for _ in range(12))
        assert times[0] >= 0.029 and times[-1] < 1.05, times
        assert times[-1] - times[0] > 0.002  # jitter spreads them
        # A 3,000 ms request does not hold up another connection.
        slow = connect(s.port)
        slow.sendall(req("/?delay_ms=3000"))
        t0 = time.monotonic()
        assert get(s.port, "/?delay_ms=0")[2] < 2.0
        read_response(slow, bytearray())
        assert time.monotonic() - t0 >= 2.95
        slow.close()


def test_stalls_freeze_responses_then_release_them() -> None:
    """A 2,000-ms stall every 3 s: windows [3, 5), [6, 8) s of the server's uptime. Timed on
    the server's own clock (``uptime_s`` in /__stats), the test sends a request at uptime
    3.2 s (a sleep only ends late; it stays in the window unless held 1.8 s) and, while it
    waits, asks /__stats on another connection. Bounds (issue 52: the host steals up to 50%
    of the cores in slices of milliseconds, no hold of 1 s or more seen at 11-48% steal, so
    each bound below fails only on a hold of a second, far rarer than 1 in 10,000):
    - the stalled request waits over 1.0 s: sent before uptime 4.0 s (a hold under 0.8 s),
      answered at the stall's end, 5.0 s; and under 3.0 s (the 1.8 s left of the stall plus
      1 s of slack);
    - /__stats is never stalled: answered under 1.0 s, where a stalled one sent before
      uptime 4.0 s would wait over 1.0 s;
    - before and after the stall, a request is answered under 1.0 s (the next stall starts
      at 6.0 s, a second after this one ends)."""
    with RefServer(stall_ms=2000.0, stall_every_s=3.0, cpus=[0]) as s:
        assert get(s.port, "/")[2] < 1.0
        uptime = s.stats()["uptime_s"]
        assert uptime < 2.0, uptime
        time.sleep(3.2 - uptime)
        conn = connect(s.port)
        buf = bytearray()
        t0 = time.monotonic()
        conn.sendall(req("/"))
        stats_lat = get(s.port, "/__stats")[2]
        read_response(conn, buf)
        stalled = time.monotonic() - t0
        assert 1.0 < stalled < 3.0, stalled
        assert stats_lat < 1.0, stats_lat
        assert s.stats()["uptime_s"] >= 5.0
        t1 = time.monotonic()
        conn.sendall(req("/"))
        read_response(conn, buf)
        assert time.monotonic() - t1 < 1.0
        conn.close()


def test_stats_counts_what_the_server_saw() -> None:
    with RefServer() as s:
        for _ in range(3):
            get(s.port, "/")
        get(s.port, "/?status=404")
        exchange(s.port, req("/misbehave/close-before-response"))
        exchange(s.port, b"NOT HTTP\r\n\r\n")
        st = s.stats()
        assert st["requests"] == 5
        assert st["modes"]["normal"] == 4 and st["modes"]["close-before-response"] == 1
        assert st["statuses"]["2xx"] == 3 and st["statuses"]["4xx"] == 2
        assert st["bad_requests"] == 1
        assert st["stats_requests"] == 1
        assert st["connections_accepted"] == 7
        assert st["connections_open"] == 1  # the /__stats connection itself
        assert st["bytes_read"] > 0 and st["bytes_written"] > 0
        assert st["port"] == s.port and st["threads"] == 1


def test_slow_headers_time_out_with_408() -> None:
    with RefServer(header_timeout_ms=300.0) as s:
        x = exchange(s.port, b"GET / HTTP/1.1\r\nX-Slow: ", wait=3.0)
        assert x.head.startswith("HTTP/1.1 408") and x.end == "eof"
        # A timer only fires late, so 0.28 s holds on any host; the upper bound allows 1 s
        # over the 300-ms timeout (issue 52: the host steals in slices of milliseconds and
        # no hold of 1 s was seen at 11-48% steal; a false failure well under 1 in 10,000).
        assert 0.28 <= x.elapsed < 1.3
        assert s.stats()["header_timeouts"] == 1
