"""What a server under test is asked to speak: HTTP/1.1, h2c (HTTP/2 over cleartext TCP
with prior knowledge, docs/http2.md) or, for the WebSocket workloads, ws (docs/websocket.md).

The load itself is the engine's (``LoadSpec.protocol``). This module holds what the
orchestrator needs around it: the catalogue's word for a server that speaks h2c
(``ServerAdapter.h2c``), and a small h2c client on hyper-h2 for the readiness probe and for
verification, which send a workload's request twice before any load, as they do over
HTTP/1.1 with ``http.client``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Literal

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from pywebbench.bind import Target, http_connection
from pywebbench.catalogue.base import ServerAdapter

Protocol = Literal["http1", "h2c", "ws"]
PROTOCOLS: tuple[Protocol, ...] = ("http1", "h2c", "ws")
#: What the HTTP workloads can be asked to speak (``--protocol``); ws comes with its workloads.
HTTP_PROTOCOLS: tuple[Protocol, ...] = ("http1", "h2c")


def speaks_h2c(adapter: ServerAdapter) -> bool:
    """True when the catalogue says ``adapter`` can serve h2c (``h2c``)."""
    return getattr(adapter, "h2c", None) is not None


def cannot_speak_h2c(adapter: ServerAdapter) -> str:
    """The one-line reason an h2c cell of ``adapter`` is skipped or refused."""
    return f"{adapter.name} does not serve h2c (docs/http2.md lists the servers that do)"


def speaks_websocket(adapter: ServerAdapter) -> bool:
    """True when the catalogue says ``adapter`` serves WebSocket (``websocket``)."""
    return getattr(adapter, "websocket", None) is not None


def cannot_speak_websocket(adapter: ServerAdapter) -> str:
    """The one-line reason a ws cell of ``adapter`` is skipped or refused."""
    return f"{adapter.name} does not serve WebSocket (docs/websocket.md lists the servers that do)"


class NotH2c(OSError):
    """The server answered the HTTP/2 connection preface with something else (HTTP/1.1)."""


@dataclass
class H2Response:
    """One HTTP/2 response: status, headers (pseudo-headers left out), body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class H2cConnection:
    """One h2c connection to ``target``; :meth:`request` sends a request on a new stream and
    reads its whole response. Errors are :class:`OSError` (:class:`NotH2c` when the server
    does not speak HTTP/2)."""

    target: Target
    timeout_s: float = 10.0
    _sock: socket.socket | None = field(default=None, repr=False)
    _h2: h2.connection.H2Connection | None = field(default=None, repr=False)
    _heard: bool = field(default=False, repr=False)

    def __enter__(self) -> H2cConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._h2 = None

    def connect(self) -> None:
        """Open the connection and send the preface (else the first request does)."""
        self._connect()

    def _connect(self) -> tuple[socket.socket, h2.connection.H2Connection]:
        if self._sock is None or self._h2 is None:
            conn = http_connection(self.target, self.timeout_s)
            conn.connect()
            assert conn.sock is not None
            self._sock = conn.sock
            self._h2 = h2.connection.H2Connection(
                h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
            )
            self._h2.initiate_connection()
            self._sock.sendall(self._h2.data_to_send())
            self._heard = False
        return self._sock, self._h2

    def request(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes = b""
    ) -> H2Response:
        """Send one request and return its response."""
        try:
            return self._request(method, path, headers, body)
        except BaseException:
            self.close()
            raise

    def _request(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> H2Response:
        sock, conn = self._connect()
        stream = conn.get_next_available_stream_id()
        pseudo = [
            (":method", method),
            (":scheme", "http"),
            (":authority", self.target.host_header),
            (":path", self.target.prefix + path),
        ]
        fields = pseudo + [(k.lower(), v) for k, v in headers if k.lower() != "host"]
        conn.send_headers(stream, fields, end_stream=not body)
        if body:
            conn.send_data(stream, body, end_stream=True)
        sock.sendall(conn.data_to_send())
        status: int | None = None
        out_headers: list[tuple[str, str]] = []
        chunks: list[bytes] = []
        while True:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            if not self._heard:
                self._heard = True
                if data.startswith(b"HTTP/"):
                    first = data.split(b"\r\n", 1)[0].decode("latin-1")
                    raise NotH2c(f"answered HTTP/1.x ({first!r}): it does not speak h2c")
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError as exc:
                raise NotH2c(f"not HTTP/2: {exc}") from None
            for ev in events:
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == stream:
                    for k, v in ev.headers or []:
                        name, value = _text(k), _text(v)
                        if name == ":status":
                            status = int(value)
                        elif not name.startswith(":"):
                            out_headers.append((name, value))
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == stream:
                    chunks.append(ev.data or b"")
                    conn.acknowledge_received_data(ev.flow_controlled_length or 0, stream)
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == stream:
                    raise ConnectionError(f"the server reset the stream ({ev.error_code!r})")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise ConnectionError(f"the server sent GOAWAY ({ev.error_code!r})")
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == stream:
                    sock.sendall(conn.data_to_send())
                    if status is None:
                        raise ConnectionError("the stream ended without a :status")
                    return H2Response(status, out_headers, b"".join(chunks))
            pending = conn.data_to_send()
            if pending:
                sock.sendall(pending)


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def probe_h2c(target: Target, path: str, timeout: float) -> str | None:
    """None if an h2c GET of ``path`` got a response, else why not (the readiness probe)."""
    with H2cConnection(target, timeout) as conn:
        try:
            conn.connect()
        except OSError as exc:
            return f"connect: {exc}"
        try:
            conn.request("GET", path, [("user-agent", "pywebbench-probe")])
        except OSError as exc:
            return f"h2c GET {path}: {exc}"
    return None
