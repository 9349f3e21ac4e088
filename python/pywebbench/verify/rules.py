"""TechEmpower-style verification rules, one per workload.

Every response is checked for: status 200; the workload's Content-Type (media type exact,
``charset`` if present must be UTF-8); framing (exactly one of Content-Length or
``Transfer-Encoding: chunked``, and a Content-Length equal to the body); a parseable Date
header; a Server header (a warning, not a failure: several servers send none by design).
Then the body: exact bytes where the workload's output is fixed (hello, cpu, io), the schema
and values for JSON (json, upload), structure and content for HTML (environ, redis, fortunes).
"""

from __future__ import annotations

import email.utils
import hashlib
import html
import json
import re
from collections.abc import Callable, Mapping

from pywebbench.catalogue.workloads import (
    ADDITIONAL_FORTUNE,
    FORTUNE_ROWS,
    HELLO_BODY,
    JSON_MESSAGE,
    REDIS_VALUE,
    fib,
    upload_payload,
)
from pywebbench.verify.httpclient import Response

ENVIRON_MIN = 5 * 1024
ENVIRON_SOFT_MAX = 8 * 1024
ENVIRON_MAX = 64 * 1024

CONTENT_TYPES = {
    "hello": "text/plain",
    "json": "application/json",
    "cpu": "text/plain",
    "environ": "text/html",
    "redis": "text/html",
    "fortunes": "text/html",
    "io": "text/plain",
    "upload": "application/json",
}


class Findings:
    """Problems (the response is wrong) and warnings (worth a look, not a failure)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def problem(self, text: str) -> None:
        self.problems.append(f"{self.label}: {text}")

    def warn(self, text: str) -> None:
        self.warnings.append(f"{self.label}: {text}")


def _short(body: bytes, limit: int = 80) -> str:
    text = repr(body[:limit])
    return text + ("..." if len(body) > limit else "")


def check_common(
    resp: Response,
    media_type: str,
    f: Findings,
    *,
    expect_server_header: bool = True,
    expect_date_header: bool = True,
    want_charset: bool = False,
) -> None:
    """Status, Content-Type, framing (:func:`check_framing`), Date and Server headers."""
    if resp.status != 200:
        f.problem(f"status {resp.status} {resp.reason}, expected 200 ({_short(resp.body)})")
    ctypes = resp.header_all("Content-Type")
    if not ctypes:
        f.problem(f"no Content-Type header, expected {media_type}")
    elif len(ctypes) > 1:
        f.problem(f"{len(ctypes)} Content-Type headers: {ctypes}")
    else:
        parts = [p.strip() for p in ctypes[0].split(";")]
        got = parts[0].lower()
        if got != media_type:
            f.problem(f"Content-Type {ctypes[0]!r}, expected {media_type}")
        params = dict(
            (k.strip().lower(), v.strip().strip('"').lower())
            for k, _, v in (p.partition("=") for p in parts[1:] if p)
        )
        charset = params.get("charset")
        if charset is not None and charset.replace("-", "") != "utf8":
            f.problem(f"Content-Type charset {charset!r}, expected utf-8")
        if charset is None and want_charset:
            f.warn(f"Content-Type {ctypes[0]!r} has no charset (utf-8 expected)")
    check_framing(resp, f)
    # Date and Server
    date = resp.header("Date")
    if date is None:
        if expect_date_header:
            f.problem("no Date header")
        else:
            f.warn("no Date header (this server sends none)")
    else:
        try:
            email.utils.parsedate_to_datetime(date)
        except (TypeError, ValueError):
            f.problem(f"Date header {date!r} is not an HTTP date")
    if resp.header("Server") is None and expect_server_header:
        f.warn("no Server header")


def check_framing(resp: Response, f: Findings) -> None:
    """Exactly one of Content-Length or ``Transfer-Encoding: chunked``; one Content-Length,
    a number equal to the body's length. Over HTTP/2 frames delimit the body: no
    Transfer-Encoding (RFC 9113 forbids it), and a Content-Length, if any, is right."""
    lengths = resp.header_all("Content-Length")
    encodings = [
        e.strip().lower() for v in resp.header_all("Transfer-Encoding") for e in v.split(",")
    ]
    chunked = "chunked" in encodings
    if resp.version == 20:
        if encodings:
            f.problem("a Transfer-Encoding header in an HTTP/2 response (RFC 9113 forbids it)")
        chunked = True  # stands for "framed by the protocol": a missing length is fine
    if lengths and chunked and resp.version != 20:
        f.problem("both Content-Length and Transfer-Encoding: chunked")
    elif not lengths and not chunked:
        f.problem("neither Content-Length nor Transfer-Encoding: chunked")
    if len(set(lengths)) > 1:
        f.problem(f"conflicting Content-Length headers: {lengths}")
    if lengths and (not chunked or resp.version == 20):
        try:
            declared = int(lengths[0])
        except ValueError:
            f.problem(f"Content-Length {lengths[0]!r} is not a number")
        else:
            if declared != len(resp.body):
                f.problem(f"Content-Length {declared} but body is {len(resp.body)} bytes")


# ---------------------------------------------------------------- body rules


def body_hello(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    for resp in resps:
        if resp.body != HELLO_BODY:
            f.problem(f"body {_short(resp.body)}, expected {HELLO_BODY!r}")


def _json(resp: Response, f: Findings) -> object | None:
    try:
        parsed: object = json.loads(resp.body.decode("utf-8"))
        return parsed
    except (UnicodeDecodeError, ValueError) as exc:
        f.problem(f"body is not JSON ({exc}): {_short(resp.body)}")
        return None


def body_json(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    for resp in resps:
        data = _json(resp, f)
        if data is not None and data != JSON_MESSAGE:
            f.problem(f"JSON {data!r}, expected {JSON_MESSAGE!r}")


def body_cpu(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    want = str(fib(params["n"])).encode()
    for resp in resps:
        if resp.body != want:
            f.problem(f"body {_short(resp.body)}, expected fib({params['n']}) = {want.decode()}")


def body_environ(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    for resp in resps:
        size = len(resp.body)
        try:
            text = resp.body.decode("utf-8")
        except UnicodeDecodeError:
            f.problem("body is not UTF-8")
            continue
        lower = text.lower()
        if not lower.lstrip().startswith("<!doctype html") or "</html>" not in lower:
            f.problem("body is not an HTML document (<!DOCTYPE html> ... </html>)")
        if "<table" not in lower or lower.count("<tr") < 5:
            f.problem("no table listing the environ (expected one row per key)")
        if "/environ" not in text or "GET" not in text:
            f.problem("the page does not list the request (method GET, path /environ)")
        if size < ENVIRON_MIN or size > ENVIRON_MAX:
            f.problem(f"page is {size} bytes, expected {ENVIRON_MIN}..{ENVIRON_MAX}")
        elif size > ENVIRON_SOFT_MAX:
            f.warn(f"page is {size} bytes (the workload aims at 5-8 KB)")


_CLICKS = re.compile(rb"clicks:\s*(\d+)")


def body_redis(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    counts = []
    for resp in resps:
        if REDIS_VALUE.encode() not in resp.body:
            f.problem(f"the {len(REDIS_VALUE)}-character redis value is not in the page")
        match = _CLICKS.search(resp.body)
        if match is None:
            f.problem("no 'clicks: N' counter in the page")
        else:
            counts.append(int(match.group(1)))
        if b"<html" not in resp.body.lower():
            f.problem("body is not an HTML page")
    if len(counts) >= 2 and not all(b > a for a, b in zip(counts, counts[1:], strict=False)):
        f.problem(f"the click counter did not increase between requests: {counts}")


_ROW = re.compile(r"<tr>\s*<td>\s*(.*?)\s*</td>\s*<td>\s*(.*?)\s*</td>\s*</tr>", re.S | re.I)


def expected_fortunes() -> list[tuple[int, str]]:
    """The rows every fortunes page must show, in order."""
    return sorted([*FORTUNE_ROWS, ADDITIONAL_FORTUNE], key=lambda r: r[1])


def body_fortunes(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    want = expected_fortunes()
    for resp in resps:
        try:
            text = resp.body.decode("utf-8")
        except UnicodeDecodeError:
            f.problem("body is not UTF-8")
            continue
        lower = text.lower()
        if not lower.lstrip().startswith("<!doctype html"):
            f.problem("body does not start with <!DOCTYPE html>")
        if "<title>fortunes</title>" not in lower:
            f.problem("no <title>Fortunes</title>")
        if "<script>" in lower:
            f.problem("unescaped <script> in the page (messages must be HTML-escaped)")
        header = re.search(r"<tr>\s*<th>\s*id\s*</th>\s*<th>\s*message\s*</th>\s*</tr>", text)
        if header is None:
            f.problem("no <tr><th>id</th><th>message</th></tr> header row")
        got = []
        for ident, message in _ROW.findall(text):
            try:
                got.append((int(ident), html.unescape(message)))
            except ValueError:
                got.append((-1, html.unescape(message)))
        if got != want:
            missing = [r for r in want if r not in got]
            extra = [r for r in got if r not in want]
            if missing or extra:
                f.problem(
                    f"fortune rows differ: {len(missing)} missing {missing[:2]}, "
                    f"{len(extra)} unexpected {extra[:2]}"
                )
            else:
                f.problem("fortune rows are not sorted by message")


def body_io(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    ms = params["ms"]
    want = f"slept {ms} ms".encode()
    for resp in resps:
        if resp.body != want:
            f.problem(f"body {_short(resp.body)}, expected {want!r}")
        if resp.elapsed_s * 1000 < ms * 0.9:
            f.problem(f"answered in {resp.elapsed_s * 1000:.1f} ms, before the {ms} ms wait")


def body_upload(resps: list[Response], params: Mapping[str, int], f: Findings) -> None:
    payload = upload_payload(params["kb"])
    want = {"length": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    for resp in resps:
        data = _json(resp, f)
        if data is not None and data != want:
            f.problem(f"JSON {data!r}, expected {want!r}")


BODY_RULES: dict[str, Callable[[list[Response], Mapping[str, int], Findings], None]] = {
    "hello": body_hello,
    "json": body_json,
    "cpu": body_cpu,
    "environ": body_environ,
    "redis": body_redis,
    "fortunes": body_fortunes,
    "io": body_io,
    "upload": body_upload,
}
