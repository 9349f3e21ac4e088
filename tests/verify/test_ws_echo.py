"""ws-echo verification against servers on loopback: an echo server passes, one that changes
the echo fails naming the message, and an HTTP-only server fails with the upgrade's status."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pywebbench.catalogue.workloads import WORKLOADS
from pywebbench.refserver import RefServer
from pywebbench.verify.websocket import verify_ws
from websockets.sync.server import ServerConnection, serve

WS_ECHO = WORKLOADS["ws-echo"]


@contextmanager
def _ws_server(reply: Callable[[bytes | str], bytes | str]) -> Iterator[str]:
    def handler(ws: ServerConnection) -> None:
        for msg in ws:
            ws.send(reply(msg))

    with serve(handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
            thread.join(5)


def test_an_echo_server_passes_at_two_sizes() -> None:
    with _ws_server(lambda m: m) as url:
        assert verify_ws(url, WS_ECHO) == ([], [])
        assert verify_ws(url, WS_ECHO, size=4096) == ([], [])


def test_a_changed_echo_fails_naming_the_message() -> None:
    def flip(m: bytes | str) -> bytes | str:
        return m[:-1] + b"?" if isinstance(m, bytes) else m

    with _ws_server(flip) as url:
        problems, _ = verify_ws(url, WS_ECHO, size=100)
    assert problems == [
        "GET /ws-echo (WebSocket): message 1 of 100 bytes came back different (100)"
    ]


def test_an_http_only_server_fails_with_the_upgrade_status() -> None:
    with RefServer() as srv:
        problems, _ = verify_ws(srv.url, WS_ECHO)
    assert len(problems) == 1 and problems[0].startswith(
        "GET /ws-echo (WebSocket): the upgrade was answered with status "
    ), problems
    assert problems[0].endswith(", not 101"), problems
