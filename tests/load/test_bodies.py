"""Request bodies are bytes end to end: spec, JSON (base64), CLI, engine, runner."""

from __future__ import annotations

import base64
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
from click.testing import CliRunner
from pwbtest import GEN_CPUS
from pywebbench import _engine
from pywebbench.catalogue.workloads import WORKLOADS, upload_payload
from pywebbench.commands.load import command
from pywebbench.load import LoadResult, LoadSpec, run_load, spec_for_request

#: Every byte value, four times over, in a scrambled order (not valid UTF-8).
ALL_BYTES = bytes((i * 7 + 3) % 256 for i in range(1024))
URL = "http://127.0.0.1:9/"


def test_body_is_bytes_and_travels_as_base64() -> None:
    spec = LoadSpec(url=URL, method="POST", body=ALL_BYTES)
    assert spec.body == ALL_BYTES
    d = spec.to_dict()
    assert "body" not in d and base64.b64decode(d["body_b64"]) == ALL_BYTES
    assert LoadSpec.from_json(spec.to_json()) == spec
    # Text is encoded as UTF-8; None is no body; no body, no body_b64.
    assert LoadSpec(url=URL, body="é").body == "é".encode()
    assert LoadSpec(url=URL, body=None).body == b""
    assert "body_b64" not in LoadSpec(url=URL).to_dict()
    # The older text form is still read.
    assert LoadSpec.from_dict({"url": URL, "body": "abc"}).body == b"abc"


@pytest.mark.parametrize(
    ("d", "field"),
    [
        ({"body_b64": "!!"}, "body_b64"),
        ({"body_b64": "YQ==", "body": "a"}, "body_b64"),
        ({"body": 12}, "body"),
        ({"body": b"a", "body_b64": "YQ=="}, "body_b64"),
    ],
)
def test_bad_bodies_name_the_field(d: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: "):
        LoadSpec.from_dict({"url": URL, **d})
    if field == "body_b64" and not isinstance(d.get("body"), bytes):  # as does the engine
        with pytest.raises(ValueError, match=rf"^{field}: "):
            _engine.run_load(json.dumps({"url": URL, **d}))


def test_binary_body_reaches_the_server_byte_for_byte(refserver) -> None:
    """The reference server answers a POST with the body length it read."""
    r = run_load(
        LoadSpec(
            url=refserver.url + "/",
            method="POST",
            body=ALL_BYTES,
            connections=2,
            max_requests=200,
            expect_status=[200],
            expect_body=str(len(ALL_BYTES)),
            cpus=GEN_CPUS,
        )
    )
    assert r.requests == 200 and r.errors == 0, r.error_classes
    head = len(
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{refserver.port}\r\nContent-Length: 1024\r\n\r\n"
    )
    assert r.bytes_out == 200 * (head + len(ALL_BYTES))
    assert base64.b64decode(r.spec.to_dict()["body_b64"]) == ALL_BYTES
    assert LoadResult.from_json(r.to_json()).spec.body == ALL_BYTES


def test_cli_body_file_is_sent_as_bytes(refserver, tmp_path: Path) -> None:
    f = tmp_path / "body.bin"
    f.write_bytes(ALL_BYTES)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        command,
        [
            refserver.url + "/",
            *("-m", "POST", "--body-file", str(f), "-n", "50", "-c", "1", "-q"),
            *("--expect-body", str(len(ALL_BYTES)), "--json", str(out)),
        ],
    )
    assert res.exit_code == 0, res.output
    r = LoadResult.from_json(out.read_text())
    assert r.requests == 50 and r.errors == 0, r.error_classes
    assert r.spec.body == ALL_BYTES


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def raw_wsgi_url() -> Iterator[str]:
    """The real ``pwb_raw_wsgi`` app (its /upload answers length and sha256) on wsgiref."""
    apps = str(Path(pywebbench.__file__).parent / "inside" / "apps")
    sys.path.insert(0, apps)
    try:
        import pwb_raw_wsgi
    finally:
        sys.path.remove(apps)
    server = make_server(
        "127.0.0.1", 0, pwb_raw_wsgi.app, server_class=_ThreadingServer, handler_class=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_upload_workload_through_the_runner_spec(raw_wsgi_url: str) -> None:
    """The runner's spec for ``upload`` sends the workload's bytes: the app's sha256 agrees."""
    request = WORKLOADS["upload"].request(kb=4)
    payload = upload_payload(4)
    assert request.body == payload and any(b >= 0x80 for b in payload)
    spec = spec_for_request(
        raw_wsgi_url, request, connections=2, duration_s=1.0, timeout_s=5.0, cpus=GEN_CPUS
    )
    assert spec.body == payload
    want = json.dumps({"length": len(payload), "sha256": hashlib.sha256(payload).hexdigest()})
    spec = spec.replace(duration_s=None, max_requests=20, expect_status=[200], expect_body=want)
    r = run_load(spec)
    assert r.requests == 20 and r.errors == 0, r.error_classes
