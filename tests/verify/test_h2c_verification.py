"""Verification over h2c (HTTP/2 with prior knowledge): a server that answers the HTTP/2
preface in HTTP/1.1 fails with that reason, in the readiness probe, the workload check and a
user's path alike; and HTTP/2's framing rules (the protocol frames the body)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pywebbench.bind import parse_base_url
from pywebbench.catalogue.byo import user_workload
from pywebbench.catalogue.workloads import WORKLOADS
from pywebbench.protocol import probe_h2c
from pywebbench.refserver import RefServer
from pywebbench.verify import verify
from pywebbench.verify.httpclient import Response
from pywebbench.verify.rules import Findings, check_framing
from pywebbench.verify.user_app import check_path

NOT_H2C = "answered HTTP/1.x ('HTTP/1.1 400 Bad Request'): it does not speak h2c"


@pytest.fixture(scope="module")
def http1_url() -> Iterator[str]:
    """The reference server: HTTP/1.1 only (it answers the HTTP/2 preface with a 400)."""
    with RefServer() as srv:
        yield srv.url


def test_an_http1_server_fails_h2c_verification_with_the_reason(http1_url: str) -> None:
    assert verify(http1_url, WORKLOADS["hello"]).ok  # the same server passes over HTTP/1.1
    report = verify(http1_url, WORKLOADS["hello"], protocol="h2c")
    assert not report.ok
    assert report.problems == [f"GET /hello: first request failed: NotH2c: {NOT_H2C}"]
    path = check_path(http1_url, user_workload("/hello", None, None), protocol="h2c")
    assert path.problems == [f"GET /hello: NotH2c: {NOT_H2C}"]


def test_the_readiness_probe_says_why_an_h2c_server_is_not_ready(http1_url: str) -> None:
    target = parse_base_url(http1_url)
    assert probe_h2c(target, "/hello", timeout=2.0) == f"h2c GET /hello: {NOT_H2C}"
    closed = parse_base_url("http://127.0.0.1:1")
    assert (probe_h2c(closed, "/", timeout=2.0) or "").startswith("connect: ")


def _h2(headers: list[tuple[str, str]], body: bytes = b"Hello, World!") -> Findings:
    f = Findings("GET /hello")
    check_framing(Response(200, "", headers, body, 0.001, version=20), f)
    return f


def test_http2_framing_rules() -> None:
    assert _h2([]).problems == []  # frames delimit the body: no length needed
    assert _h2([("content-length", "13")]).problems == []
    assert _h2([("content-length", "12")]).problems == [
        "GET /hello: Content-Length 12 but body is 13 bytes"
    ]
    assert _h2([("transfer-encoding", "chunked")]).problems == [
        "GET /hello: a Transfer-Encoding header in an HTTP/2 response (RFC 9113 forbids it)"
    ]
