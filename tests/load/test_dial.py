"""Where connections go: spread over several source addresses, or to a unix-domain socket.

The spread is checked on the sockets themselves (``/proc/net/tcp`` while the run is on), not
on what the engine says it did. The unix socket tests use a small threaded HTTP/1.1 server
from the standard library, in a thread of the test process, on a socket under ``tmp_path``
(conftest.py's ``unix_server``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pywebbench.commands.load import command
from pywebbench.load import LoadSpec, run_load
from pywebbench.refserver import RefServer

SOURCES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def _address(field: str) -> tuple[str, int]:
    """An IPv4 ``ADDR:PORT`` of ``/proc/net/tcp`` (hex, the address little-endian)."""
    raw, port = field.split(":")
    return ".".join(str(b) for b in bytes.fromhex(raw)[::-1]), int(port, 16)


def _client_sources(server: tuple[str, int]) -> dict[str, int]:
    """TCP sockets towards ``server`` (host, port), established or still connecting (the
    server's accept queue plays no part), counted by local address."""
    seen: dict[str, int] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if state in ("01", "02") and _address(remote) == server:  # ESTABLISHED, SYN_SENT
            ip = _address(local)[0]
            seen[ip] = seen.get(ip, 0) + 1
    return seen


def test_connections_spread_over_the_source_addresses(refserver: RefServer) -> None:
    """Connects go to the sources in turn (one thread: the k-th to the k-th source, modulo
    three), and the run closes none of its 3,000 connections before it ends (hello answers
    keep them open, the timeout is 10 s), so the sockets each source has, connected or
    connecting, differ by at most one. Checked on the fullest read of ``/proc/net/tcp``: the
    last read may fall while the engine closes the pool at the end (one read 151, 726 and
    645). A read is not atomic: a socket made while it runs is seen or not by where its hash
    bucket lies against the walk, alike for every source (they alternate). At most the whole
    pool is made during the read (the reading thread held while the engine connects): 1,000
    a source, each seen or not, so two sources' counts differ beyond the one by a standard
    deviation of at most sqrt(2 x 1000 / 4) = 22.4, and 4.3 of them (1.7e-5 a pair, 5e-5
    over the three pairs) give 1 + 4.3 x 22.4 < 100. How large the pool got within the run
    is a timing and not asked (it was: at least 900, which a busy host need not reach)."""
    server = (refserver.host, refserver.port)
    snapshots: list[dict[str, int]] = []

    def look(_progress: Any) -> None:
        snapshots.append(_client_sources(server))

    spec = LoadSpec(
        url=f"{refserver.url}/hello",
        connections=3000,
        warmup_s=0.5,
        duration_s=1.0,
        timeout_s=10.0,
        source_addresses=SOURCES,
    )
    result = run_load(spec, look, interval_s=0.3)
    assert result.connections.source_addresses == SOURCES
    assert result.requests > 0
    fullest = max(snapshots, key=lambda s: sum(s.values()))
    assert sorted(fullest) == SOURCES, fullest
    assert max(fullest.values()) - min(fullest.values()) < 100, fullest


def test_a_source_address_that_is_not_local_is_bad_input(refserver: RefServer) -> None:
    res = CliRunner().invoke(
        command, [f"{refserver.url}/hello", "--source-addresses", "192.0.2.1", "-d", "0.2"]
    )
    assert res.exit_code == 2
    assert "--source-addresses: cannot bind 192.0.2.1" in res.output


@pytest.mark.parametrize(
    "model",
    [
        {"keepalive": True},
        {"keepalive": False},
        {"rate": 200.0},
    ],
    ids=["closed", "connection_per_request", "open"],
)
def test_every_load_model_runs_over_a_unix_socket(unix_server: str, model: dict[str, Any]) -> None:
    spec = LoadSpec(
        url="http://localhost/hello",
        unix_socket=unix_server,
        connections=4,
        duration_s=0.5,
        expect_body="hello /hello localhost",
        **model,
    )
    result = run_load(spec)
    assert result.mode == spec.mode
    assert result.errors == 0, result.error_classes
    assert result.status_counts == {"200": result.requests}
    # The floor says the socket served (issue 52): on this project's 2-core VM (5 Dec 2026)
    # 10,700-12,800 requests kept alive, 1,400-1,700 with a connection each; at 2.9x slower
    # (a 1.45x slower core at 50% steal, docs/contributing.md) still 20x the floor. The open
    # loop's 100 sends (0.5 s at 200/s) are all offered and each completed, in flight or
    # unsent (exact); 20 or fewer completed needs the server or the generator held for the
    # last 0.4 s in one block, where the host steals in slices of milliseconds: far rarer
    # than 1 in 10,000 (all 100 completed here).
    assert result.requests > 20
    assert (result.open_loop is not None) == ("rate" in model)
    if result.open_loop is not None:
        unfinished = result.connections.in_flight_at_end + result.open_loop.unsent_at_end
        assert result.open_loop.offered == 100
        assert result.requests + unfinished == result.open_loop.offered


def test_the_unix_url_form_and_the_flag(unix_server: str) -> None:
    url_form = LoadSpec(url=f"unix:{unix_server}:/x?y=1", max_requests=5, connections=1)
    result = run_load(url_form)
    assert result.requests == 5 and result.errors == 0
    res = CliRunner().invoke(
        command,
        ["http://localhost/hello", "--unix-socket", unix_server, "-n", "10", "-c", "2"],
    )
    assert res.exit_code == 0, res.output
    assert "200: 10" in res.output


def test_a_unix_socket_that_does_not_exist_is_one_line_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sock"
    res = CliRunner().invoke(
        command, ["http://localhost/", "--unix-socket", str(missing), "-d", "0.2"]
    )
    assert res.exit_code == 2
    assert f"--unix-socket: unix socket {missing} does not exist" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(command, [f"unix:{missing}:/", "-d", "0.2"])
    assert res.exit_code == 2
    assert "does not exist" in res.output
