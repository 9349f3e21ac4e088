"""Each misbehaviour of the reference server lands in its error class, with bounded memory."""

from __future__ import annotations

import pytest
from pywebbench.load import ERROR_CLASSES, LoadSpec, run_load

CASES = [
    ("close-mid-response", "eof_mid_body"),
    ("garbage-status", "malformed_status_line"),
    ("endless-headers?interval_ms=1", "malformed_headers"),
    ("reset", "reset_before_response"),
    ("bad-chunked", "malformed_chunked"),
    ("close-before-response", "eof_before_headers"),
    ("no-response", "header_timeout"),
    ("huge-body", "body_timeout"),
]

#: Classes a mode may also give on a host that holds the server for a timeout's length. A
#: huge body's request reconnects after its body timeout; a server held for the 0.3 s
#: timeout before sending the next head gives a header_timeout instead (tests/load/test_cli.py
#: allows it for the same mode). Both are timeouts of that request, never a parse error.
ALSO = {"huge-body": {"header_timeout"}}


@pytest.mark.parametrize("io", ["epoll", "uring"])
@pytest.mark.parametrize(("mode", "cls"), CASES)
def test_misbehaviour_is_classified(refserver, mode: str, cls: str, io: str) -> None:
    """Each mode gives its own class, and no other but one a stall of the host may honestly
    add (:data:`ALSO`). The mode's class is always there: for a huge body, the head of each
    request must have come later than the 0.3 s timeout for none to end in a body_timeout,
    that is the server held in two blocks of 0.3 s of the 0.8 s (the first request's and
    the next's), where sending a head takes it microseconds and a host steals in slices of
    milliseconds (docs/contributing.md, "Timing bounds in the suite")."""
    # One connection for the huge body: with two, the server streams the other connection's
    # body at full speed while a reopened one waits, and that wait may honestly end in a
    # header_timeout instead.
    connections = 1 if mode == "huge-body" else 2
    r = run_load(
        LoadSpec(
            url=f"{refserver.url}/misbehave/{mode}",
            connections=connections,
            duration_s=0.8,
            # A timeout is the answer only where the mode makes one; elsewhere 5 s, so that a
            # host that stalls a response for a fraction of a second adds no class of its own.
            timeout_s=0.3 if cls.endswith("_timeout") else 5.0,
            io=io,
        )
    )
    assert r.io == io
    assert cls in ERROR_CLASSES
    assert {cls} <= set(r.error_classes) <= {cls} | ALSO.get(mode, set()), r.error_classes
    entry = r.error_classes[cls]
    assert entry.count > 0 and entry.example
    assert r.errors == sum(e.count for e in r.error_classes.values())
    if cls.endswith("_timeout"):
        # Timeouts are censored values >= the timeout, never dropped from the percentiles.
        assert r.timeouts == r.errors
        assert r.latency.summary.count == r.requests + r.timeouts
        assert r.latency.summary.max >= 300_000
    if mode == "huge-body":
        # Streamed through, not buffered: 650-940 MB came in on this project's 2-core VM (5 Dec
        # 2026); at 2.9x slower (a 1.45x slower core at 50% steal, docs/contributing.md) over
        # 200 MB, 20x the floor (issue 52).
        assert r.bytes_in > 10_000_000


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_drip_completes_slowly_and_correctly(refserver, io: str) -> None:
    r = run_load(
        LoadSpec(
            url=f"{refserver.url}/misbehave/drip?interval_ms=1",
            connections=2,
            duration_s=1.0,
            timeout_s=5.0,
            expect_status=[200],
            io=io,
        )
    )
    assert r.errors == 0, r.error_classes
    assert r.requests > 0
    assert r.latency.summary.p50 > 20_000  # one byte per ms


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_connect_refused(closed_port: int, io: str) -> None:
    url = f"http://127.0.0.1:{closed_port}/"
    r = run_load(LoadSpec(url=url, connections=2, duration_s=0.3, io=io))
    assert set(r.error_classes) == {"connect_refused"}
    assert r.requests == 0
    assert "no response completed" in r.warnings


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_connect_refused_with_only_max_requests_still_ends(closed_port: int, io: str) -> None:
    url = f"http://127.0.0.1:{closed_port}/"
    r = run_load(LoadSpec(url=url, connections=2, max_requests=20, io=io))
    assert r.error_classes["connect_refused"].count >= 20
