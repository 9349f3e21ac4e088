"""Verification rules against good and deliberately bad responses.

The good app is the real ``pwb_raw_wsgi`` app module (stdlib-only workloads); the bad app breaks
one rule per route. Both are served by the standard library's threaded WSGI server on
127.0.0.1, inside this test process (stopped by the fixtures).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import pywebbench
from pywebbench.catalogue.workloads import WORKLOADS, upload_payload
from pywebbench.verify import verify
from pywebbench.verify.rules import expected_fortunes

APPS = Path(pywebbench.__file__).parent / "inside" / "apps"


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def serve() -> Iterator:
    servers = []

    def start(app) -> str:
        server = make_server(
            "127.0.0.1", 0, app, server_class=_ThreadingServer, handler_class=_QuietHandler
        )
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def good_url(serve) -> str:
    sys.path.insert(0, str(APPS))
    try:
        import pwb_raw_wsgi
    finally:
        sys.path.remove(str(APPS))
    return serve(pwb_raw_wsgi.app)


def _fortunes_page(rows, escape=True) -> bytes:
    import html

    cells = "".join(
        f"<tr><td>{i}</td><td>{html.escape(m) if escape else m}</td></tr>" for i, m in rows
    )
    return (
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
        f"<tr><th>id</th><th>message</th></tr>{cells}</table></body></html>"
    ).encode()


def bad_app(environ, start_response):
    """One broken rule per route (see the test ids)."""
    path = environ["PATH_INFO"]
    text = [("Content-Type", "text/plain")]
    HTML = ("Content-Type", "text/html")  # noqa: N806
    if path == "/hello":  # wrong body
        body = b"Hello World"
        start_response("200 OK", [*text, ("Content-Length", str(len(body)))])
        return [body]
    if path == "/json":  # wrong content type
        body = b'{"message": "Hello, World!"}'
        start_response("200 OK", [*text, ("Content-Length", str(len(body)))])
        return [body]
    if path == "/cpu":  # wrong status
        start_response("500 Internal Server Error", [*text, ("Content-Length", "4")])
        return [b"oops"]
    if path == "/environ":  # far too small
        body = b"<!DOCTYPE html><html><body><table><tr><td>x</td></tr></table></body></html>"
        start_response("200 OK", [HTML, ("Content-Length", str(len(body)))])
        return [body]
    if path == "/redis":  # counter never increases
        body = b"<html><p>clicks: 7</p><p>value: nope</p></html>"
        start_response("200 OK", [HTML, ("Content-Length", str(len(body)))])
        return [body]
    if path == "/fortunes":  # not escaped
        body = _fortunes_page(expected_fortunes(), escape=False)
        ctype = ("Content-Type", "text/html; charset=utf-8")
        start_response("200 OK", [ctype, ("Content-Length", str(len(body)))])
        return [body]
    if path == "/io":  # answers at once
        body = b"slept 10 ms"
        start_response("200 OK", [*text, ("Content-Length", str(len(body)))])
        return [body]
    if path == "/upload":  # wrong checksum
        size = int(environ.get("CONTENT_LENGTH") or 0)
        environ["wsgi.input"].read(size)
        body = json.dumps({"length": size, "sha256": "0" * 64}).encode()
        ctype = ("Content-Type", "application/json")
        start_response("200 OK", [ctype, ("Content-Length", str(len(body)))])
        return [body]
    if path == "/nolength":  # no framing headers: wsgiref then closes the connection
        start_response("200 OK", text)
        return iter([b"Hello, ", b"World!"])  # (one item would get a Content-Length)
    if path == "/badlength":  # lies about its length
        start_response("200 OK", [*text, ("Content-Length", "20")])
        return [b"Hello, World!"]
    if path == "/charset":  # latin-1 declared
        body = b"Hello, World!"
        ctype = ("Content-Type", "text/plain; charset=iso-8859-1")
        start_response("200 OK", [ctype, ("Content-Length", str(len(body)))])
        return [body]
    start_response("404 Not Found", [*text, ("Content-Length", "0")])
    return [b""]


@pytest.fixture(scope="module")
def bad_url(serve) -> str:
    return serve(bad_app)


GOOD = ["hello", "json", "cpu", "environ", "io", "upload"]


@pytest.mark.parametrize("name", GOOD)
def test_good_app_passes(good_url: str, name: str) -> None:
    report = verify(good_url, WORKLOADS[name])
    assert report.ok, report.problems
    assert len(report.responses) == 2
    assert report.summary().startswith("PASS")


def test_good_app_with_parameters(good_url: str) -> None:
    assert verify(good_url, WORKLOADS["cpu"], n=15).ok
    assert verify(good_url, WORKLOADS["upload"], kb=1).ok
    assert verify(good_url, WORKLOADS["io"], ms=30).ok


@pytest.mark.parametrize(
    "name, needle",
    [
        ("hello", "expected b'Hello, World!'"),
        ("json", "Content-Type 'text/plain', expected application/json"),
        ("cpu", "status 500"),
        ("environ", "expected 5120..65536"),
        ("redis", "did not increase"),
        ("fortunes", "unescaped <script>"),
        ("io", "before the 10 ms wait"),
        ("upload", "expected {'length': 65536"),
    ],
)
def test_bad_app_fails_with_reason(bad_url: str, name: str, needle: str) -> None:
    report = verify(bad_url, WORKLOADS[name])
    assert not report.ok
    assert any(needle in p for p in report.problems), report.problems
    assert report.summary().startswith(f"FAIL {name}")


def _hello_at(path: str):
    from dataclasses import replace

    from pywebbench.catalogue.workloads import HttpRequest

    return replace(WORKLOADS["hello"], _build=lambda _p: HttpRequest("GET", path))


def test_framing_rules(bad_url: str) -> None:
    report = verify(bad_url, _hello_at("/nolength"))
    assert any("neither Content-Length nor Transfer-Encoding" in p for p in report.problems)
    report = verify(bad_url, _hello_at("/badlength"), timeout_s=2)
    assert not report.ok
    assert any("request failed" in p or "Content-Length 20" in p for p in report.problems)
    report = verify(bad_url, _hello_at("/charset"))
    assert any("charset 'iso-8859-1'" in p for p in report.problems), report.problems


def test_server_header_is_a_warning_only(good_url: str) -> None:
    # wsgiref sends Server and Date: no warning at all.
    report = verify(good_url, WORKLOADS["hello"])
    assert report.ok and not report.warnings


def test_refused_connection_is_a_problem() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = verify(f"http://127.0.0.1:{port}", WORKLOADS["hello"], timeout_s=2)
    assert not report.ok
    assert "request failed" in report.problems[0]


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="parameter 'x'"):
        verify("http://127.0.0.1:1", WORKLOADS["cpu"], x=1)
    with pytest.raises(ValueError, match="must be 0..32"):
        WORKLOADS["cpu"].request(n=99)


def test_fortunes_rule_accepts_the_canonical_page_and_checks_order(serve) -> None:
    rows = expected_fortunes()
    pages = {
        "/fortunes": _fortunes_page(rows),
        "/unsorted": _fortunes_page(list(reversed(rows))),
        "/missing": _fortunes_page(rows[1:]),
    }

    def app(environ, start_response):
        body = pages[environ["PATH_INFO"]]
        start_response(
            "200 OK",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]

    url = serve(app)
    assert verify(url, WORKLOADS["fortunes"]).ok
    from dataclasses import replace

    from pywebbench.catalogue.workloads import HttpRequest

    unsorted = replace(WORKLOADS["fortunes"], _build=lambda _p: HttpRequest("GET", "/unsorted"))
    assert any("not sorted" in p for p in verify(url, unsorted).problems)
    missing = replace(WORKLOADS["fortunes"], _build=lambda _p: HttpRequest("GET", "/missing"))
    assert any("1 missing" in p for p in verify(url, missing).problems)


def test_upload_payload_is_deterministic() -> None:
    body = WORKLOADS["upload"].request(kb=2).body
    assert len(body) == 2048 and body == upload_payload(2)
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(upload_payload(2)).hexdigest()
