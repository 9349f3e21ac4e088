"""A minimal HTTP client for verification: ``http.client`` plus what the rules need, or the
h2c client of :mod:`pywebbench.protocol` for an h2c cell.

Keeps the raw framing facts (Content-Length, Transfer-Encoding) and the elapsed time, and
reuses one keep-alive connection for consecutive requests (so a wrong Content-Length shows up
as a broken second response). The server may listen on TCP (``http://host:port``) or on a unix
socket (``unix:/path/to.sock:``, see :mod:`pywebbench.bind`).
"""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass, field

from pywebbench.bind import http_connection, parse_base_url
from pywebbench.catalogue.workloads import HttpRequest
from pywebbench.protocol import H2cConnection


@dataclass
class Response:
    """One HTTP response as the rules see it."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    elapsed_s: float
    version: int = 11  # 10 or 11, from the status line; 20 for HTTP/2
    will_close: bool = False

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return None

    def header_all(self, name: str) -> list[str]:
        lname = name.lower()
        return [v for k, v in self.headers if k.lower() == lname]


@dataclass
class Client:
    """Sends requests to ``base_url`` (``http://host:port`` or ``unix:/path/to.sock:``) over
    one keep-alive connection (reopened if closed), in HTTP/1.1 or (``protocol`` "h2c")
    HTTP/2 with prior knowledge."""

    base_url: str
    timeout_s: float = 10.0
    protocol: str = "http1"
    _conn: http.client.HTTPConnection | None = field(default=None, repr=False)
    _h2: H2cConnection | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.target = parse_base_url(self.base_url)  # ValueError naming the URL
        self.prefix = self.target.prefix

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._h2 is not None:
            self._h2.close()
            self._h2 = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: HttpRequest) -> Response:
        """Send ``request``; raises OSError / http.client.HTTPException on transport errors
        (:class:`~pywebbench.protocol.NotH2c` when an h2c server does not speak HTTP/2)."""
        if self.protocol == "h2c":
            return self._send_h2c(request)
        if self._conn is None:
            self._conn = http_connection(self.target, self.timeout_s)
        conn = self._conn
        headers = {"Host": self.target.host_header, "User-Agent": "pywebbench-verify"}
        headers.update(dict(request.headers))
        if request.body or request.method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(request.body))
        start = time.perf_counter()
        try:
            conn.request(
                request.method,
                self.prefix + request.path,
                body=request.body or None,
                headers=headers,
            )
            resp = conn.getresponse()
            body = resp.read()
        except Exception:
            self.close()
            raise
        elapsed = time.perf_counter() - start
        out = Response(
            status=resp.status,
            reason=resp.reason,
            headers=list(resp.getheaders()),
            body=body,
            elapsed_s=elapsed,
            version=resp.version,
            will_close=bool(resp.will_close),
        )
        if resp.will_close:
            self.close()
        return out

    def _send_h2c(self, request: HttpRequest) -> Response:
        if self._h2 is None:
            self._h2 = H2cConnection(self.target, self.timeout_s)
        headers = [("user-agent", "pywebbench-verify"), *request.headers]
        if request.body or request.method in ("POST", "PUT", "PATCH"):
            headers.append(("content-length", str(len(request.body))))
        start = time.perf_counter()
        resp = self._h2.request(request.method, request.path, headers, request.body)
        return Response(
            status=resp.status,
            reason="",
            headers=resp.headers,
            body=resp.body,
            elapsed_s=time.perf_counter() - start,
            version=20,
        )
