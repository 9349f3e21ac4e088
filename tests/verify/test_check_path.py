"""One path of a user's app checked against the reference server on loopback: the user's
expectations (status, body substring), framing, and transport failures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pywebbench.catalogue.byo import user_workload
from pywebbench.launch import free_port
from pywebbench.refserver import RefServer
from pywebbench.verify.user_app import check_path


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with RefServer() as srv:
        yield srv.url


def test_a_2xx_answer_passes(url: str) -> None:
    report = check_path(url, user_workload("/hello", None, "Hello"))
    assert report.ok, report.problems
    assert (report.workload, report.status, report.warnings) == ("path:/hello", 200, [])
    assert report.seconds > 0


def test_status_is_checked_against_the_expectation(url: str) -> None:
    assert check_path(url, user_workload("/?status=418", 418, None)).ok
    report = check_path(url, user_workload("/?status=418", None, None))
    assert report.problems == ["GET /?status=418: status 418, expected 2xx"]
    report = check_path(url, user_workload("/hello", 201, None))
    assert report.problems == ["GET /hello: status 200, expected 201"]


def test_body_substring(url: str) -> None:
    report = check_path(url, user_workload("/hello", None, "Goodbye"))
    assert report.problems == ["GET /hello: body does not contain 'Goodbye' (got 'Hello, World!')"]


def test_broken_framing_and_transport_errors(url: str) -> None:
    report = check_path(url, user_workload("/misbehave/close-mid-response", None, None))
    assert not report.ok and report.status is None
    assert report.problems[0].startswith("GET /misbehave/close-mid-response: IncompleteRead")
    refused = check_path(f"http://127.0.0.1:{free_port()}", user_workload("/", None, None))
    assert not refused.ok and "ConnectionRefusedError" in refused.problems[0]
