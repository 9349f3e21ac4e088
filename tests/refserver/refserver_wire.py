"""Raw-socket helpers for the reference-server tests: we want the exact bytes, FIN and RST."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass


@dataclass
class Exchange:
    """What one raw exchange saw."""

    data: bytes
    #: "eof" (clean close), "reset" (RST), or "open" (still open at the deadline).
    end: str
    elapsed: float

    @property
    def head(self) -> str:
        return self.data.split(b"\r\n\r\n", 1)[0].decode("latin-1")

    @property
    def body(self) -> bytes:
        return self.data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in self.data else b""


def connect(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def exchange(
    port: int,
    raw: bytes,
    *,
    wait: float = 5.0,
    max_bytes: int = 1 << 20,
    until: bytes | None = None,
) -> Exchange:
    """Sends ``raw`` on a new connection, reads until EOF/RST, ``max_bytes``, ``until`` or
    ``wait`` seconds; reports how it ended."""
    s = connect(port)
    t0 = time.monotonic()
    s.sendall(raw)
    data = b""
    end = "open"
    deadline = t0 + wait
    try:
        while len(data) < max_bytes and not (until and until in data):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                end = "reset"
                break
            if not chunk:
                end = "eof"
                break
            data += chunk
    finally:
        s.close()
    return Exchange(data, end, time.monotonic() - t0)


def read_response(s: socket.socket, buf: bytearray) -> tuple[str, bytes]:
    """Reads one Content-Length-framed response from a keep-alive socket."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        assert chunk, f"EOF before headers; have {bytes(buf)!r}"
        buf += chunk
    end = buf.index(b"\r\n\r\n")
    head = bytes(buf[:end]).decode("latin-1")
    length = 0
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(buf) < end + 4 + length:
        chunk = s.recv(65536)
        assert chunk, "EOF inside the body"
        buf += chunk
    body = bytes(buf[end + 4 : end + 4 + length])
    del buf[: end + 4 + length]
    return head, body


def get(port: int, target: str = "/", timeout: float = 5.0) -> tuple[str, bytes, float]:
    """One GET on a new connection; returns (head, body, seconds)."""
    s = connect(port, timeout=timeout)
    try:
        t0 = time.monotonic()
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        head, body = read_response(s, bytearray())
        return head, body, time.monotonic() - t0
    finally:
        s.close()
