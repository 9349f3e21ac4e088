"""A traffic mix in the engine (docs/mix.md): the spec and result contract, per-endpoint
figures against the reference server (HTTP/1.1, both loops) and hypercorn (h2c).

Bounded by request counts, loopback only, no timing assertions."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pywebbench
from pywebbench import _engine
from pywebbench.catalogue.mix import MixEntry
from pywebbench.load import EndpointStats, LoadResult, LoadSpec, run_load
from pywebbench.refserver import RefServer

APPS = Path(pywebbench.__file__).parent / "inside" / "apps"

MIX = [
    MixEntry(name="GET /hello", weight=5, path="/hello"),
    MixEntry(name="GET /hello", weight=1, path="/hello?size=100"),
    MixEntry(name="POST /hello", weight=2, method="POST", path="/hello", body=b'{"a": 1}'),
    MixEntry(name="GET /missing", weight=1, path="/missing", expect_status=[404]),
    MixEntry(name="HEAD /", weight=1, method="HEAD", path="/"),
]


def _check_sums(r: LoadResult, names: list[str]) -> None:
    """Every endpoint got requests, the counts add up to the run's, no error anywhere."""
    assert [e.name for e in r.endpoints] == names
    assert r.errors == 0, r.error_classes
    assert all(e.requests > 0 for e in r.endpoints), [(e.name, e.requests) for e in r.endpoints]
    assert sum(e.requests for e in r.endpoints) == r.requests
    for e in r.endpoints:
        assert e.errors == 0 and e.latency.summary.count == e.requests


@pytest.fixture(scope="module")
def mix_document(refserver: RefServer) -> dict[str, Any]:
    """A real closed-loop mix result (2,000 requests)."""
    spec = LoadSpec(url=refserver.url, connections=4, max_requests=2000, mix=MIX, seed=3)
    doc: dict[str, Any] = json.loads(_engine.run_load(spec.to_json()))
    return doc


def test_model_reads_a_real_mix_result_exactly(mix_document: dict[str, Any]) -> None:
    result = LoadResult.from_dict(mix_document)
    assert result.to_dict() == mix_document
    for e in mix_document["endpoints"]:
        assert set(e) == set(EndpointStats.model_fields), e.keys()
    assert LoadSpec.from_dict(mix_document["spec"]).mix == MIX


def test_closed_loop_figures_per_endpoint(mix_document: dict[str, Any]) -> None:
    r = LoadResult.from_dict(mix_document)
    _check_sums(r, ["GET /hello", "POST /hello", "GET /missing", "HEAD /"])
    by = {e.name: e for e in r.endpoints}
    assert by["GET /missing"].status_counts == {"404": by["GET /missing"].requests}
    assert by["GET /hello"].weight == 6 and by["GET /hello"].weight_share == pytest.approx(0.6)
    assert r.status_counts["404"] == by["GET /missing"].requests
    assert by["POST /hello"].status_counts == {"200": by["POST /hello"].requests}


def test_open_loop_without_keepalive(refserver: RefServer) -> None:
    spec = LoadSpec(
        url=refserver.url, connections=8, keepalive=False, rate=2000.0, max_requests=600, mix=MIX
    )
    r = run_load(spec)
    assert r.requests == 600
    _check_sums(r, ["GET /hello", "POST /hello", "GET /missing", "HEAD /"])


def test_an_entry_whose_expectation_fails_is_its_endpoints_error(refserver: RefServer) -> None:
    mix = [MIX[0], MixEntry(name="GET /missing", path="/missing", expect_status=[200])]
    r = run_load(LoadSpec(url=refserver.url, connections=2, max_requests=400, mix=mix))
    missing = r.endpoints[1]
    assert missing.errors == missing.requests == missing.error_classes["check_failed"] > 0
    assert r.errors == missing.errors and r.endpoints[0].errors == 0


def test_websocket_and_a_spec_body_refuse_a_mix() -> None:
    with pytest.raises(ValueError, match="^mix: WebSocket"):
        LoadSpec(url="ws://127.0.0.1:9/ws", protocol="ws", mix=MIX)
    with pytest.raises(ValueError, match="^method: a mix"):
        LoadSpec(url="http://127.0.0.1:9/", method="POST", mix=MIX)
    with pytest.raises(ValueError, match=r'^mix\[1\] \("b"\)\.weight: '):
        LoadSpec(url="http://127.0.0.1:9/", mix=[MIX[0], MixEntry(name="b", weight=-1)])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def hypercorn_url() -> Iterator[str]:
    """hypercorn (h2c with prior knowledge) serving pwb_raw_asgi on core 0."""
    hypercorn = Path(sys.executable).parent / "hypercorn"
    # a test dependency (pyproject.toml): missing is a broken set-up, a failure, not a skip
    assert hypercorn.exists(), f"{hypercorn} is missing: run ./scripts/setup.sh"
    port = _free_port()
    argv = ["taskset", "-c", "0", str(hypercorn), "--bind", f"127.0.0.1:{port}"]
    p = subprocess.Popen(
        [*argv, "--log-level", "warning", "pwb_raw_asgi:app"],
        cwd=APPS,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("hypercorn did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.mark.parametrize(("io", "rate"), [("epoll", None), ("uring", None), ("auto", 500.0)])
def test_h2c_mix_sends_each_entry_its_own_request(
    hypercorn_url: str, io: str, rate: float | None
) -> None:
    mix = [
        MixEntry(name="GET /hello", weight=3, path="/hello"),
        MixEntry(name="GET /json", weight=2, path="/json?x=1"),
        MixEntry(
            name="POST /upload",
            weight=1,
            method="POST",
            path="/upload",
            body=b"abc",
            headers=[("content-type", "application/octet-stream")],
        ),
        MixEntry(name="GET /nope", weight=1, path="/nope", expect_status=[404]),
    ]
    spec = LoadSpec(
        url=hypercorn_url,
        protocol="h2c",
        connections=2,
        streams=4,
        max_requests=300,
        mix=mix,
        io=io,  # type: ignore[arg-type]
        expect_status=[200],
        rate=rate,
    )
    r = run_load(spec)
    _check_sums(r, ["GET /hello", "GET /json", "POST /upload", "GET /nope"])
    assert r.endpoints[3].status_counts == {"404": r.endpoints[3].requests}
    assert set(r.endpoints[2].status_counts) == {"200"}
