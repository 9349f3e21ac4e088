"""``pywebbench mix from-log``: reading nginx combined and gunicorn access logs, grouping paths
into endpoints, what is dropped and why, and the mix written (deterministic: generated logs
with exact counts)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from pywebbench.catalogue.mix import load_mix
from pywebbench.cli import cli
from pywebbench.load.access_log import (
    AccessLogError,
    Rule,
    parse_line,
    read_log,
    template,
)

NGINX = '127.0.0.1 - - [05/Dec/2026:10:00:00 +0000] "{req}" {status} {size} "-" "Mozilla/5.0 (X11)"'
GUNICORN = '10.0.0.7 - - [05/Dec/2026:10:00:00 +0000] "{req}" {status} {size} "-" "curl/8.5.0"'
UUID = "550e8400-e29b-41d4-a716-446655440000"


def nginx(method: str, target: str, status: int = 200, size: str = "612") -> str:
    return NGINX.format(req=f"{method} {target} HTTP/1.1", status=status, size=size)


def test_lines_of_both_formats_parse() -> None:
    r = parse_line(nginx("GET", "/items/3?full=1"))
    assert r is not None and (r.method, r.target, r.status, r.no_bytes) == (
        "GET",
        "/items/3?full=1",
        200,
        False,
    )
    g = parse_line(GUNICORN.format(req="HEAD / HTTP/1.0", status=304, size="-"))
    assert g is not None and (g.method, g.status, g.no_bytes) == ("HEAD", 304, True)
    common = parse_line('1.2.3.4 - bob [05/Dec/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 5')
    assert common is not None and common.target == "/a"
    quoted = parse_line(NGINX.format(req='GET /q?x=\\"y\\" HTTP/1.1', status=200, size=1))
    assert quoted is not None and quoted.status == 200
    garbage = parse_line(NGINX.format(req="\\x16\\x03\\x01", status=400, size=0))
    assert garbage is not None and garbage.method == ""
    for bad in ("", "hello", "[2026-12-05 10:00:00 +0000] [42] [INFO] Booting worker"):
        assert parse_line(bad) is None


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("/items/42", "/items/{id}"),
        ("/items/42/reviews/7", "/items/{id}/reviews/{id}"),
        (f"/users/{UUID}", "/users/{uuid}"),
        (f"/users/{UUID.upper()}/x", "/users/{uuid}/x"),
        ("/blobs/0123456789abcdef0123", "/blobs/{hash}"),
        ("/blobs/0123456789ABCDEF", "/blobs/{hash}"),
        ("/blobs/0123456789abcde", "/blobs/0123456789abcde"),  # 15 hex: a word, not a hash
        ("/v2/items", "/v2/items"),
        ("/", "/"),
    ],
)
def test_segments_become_placeholders(path: str, want: str) -> None:
    assert template(path) == want


def test_user_rules_come_first_and_are_checked() -> None:
    rules = [Rule.parse("/users/[^/]+=/users/{name}"), Rule.parse("/static/.*=/static/*")]
    assert template("/users/alice", rules) == "/users/{name}"
    assert template("/users/alice/posts", rules) == "/users/alice/posts"  # matched whole only
    assert template("/static/app.3f2a.js", rules) == "/static/*"
    assert template("/items/1", rules) == "/items/{id}"
    assert Rule.parse("/a=b=/c").name == "/c"  # split at the last '='
    with pytest.raises(ValueError, match="expected REGEX=NAME"):
        Rule.parse("no-equals")
    with pytest.raises(ValueError, match="bad regular expression"):
        Rule.parse("/a[=x")


def generated_log() -> list[str]:
    """1,000 replayable requests with exact counts, 50 unsafe, 10 unreadable lines."""
    lines: list[str] = []
    for i in range(400):
        lines.append(nginx("GET", f"/items/{i % 7}" + ("?full=1" if i % 4 == 0 else "")))
    for _ in range(250):
        lines.append(nginx("GET", f"/users/{UUID}"))
    for _ in range(200):
        lines.append(nginx("GET", "/search?q=shoes&page=2"))
    for _ in range(100):
        lines.append(nginx("GET", "/old-page", status=404, size="0"))
    for _ in range(50):
        lines.append(nginx("HEAD", "/health"))
    for _ in range(30):
        lines.append(nginx("POST", "/items", status=201))
    for _ in range(20):
        lines.append(nginx("DELETE", "/items/3", status=204))
    for _ in range(10):
        lines.insert(100, "2026/12/05 10:00:00 [error] 12#12: *1 open() failed")
    return lines


def test_weights_dropped_and_expected_statuses_of_a_generated_log() -> None:
    mix = read_log(generated_log(), variants=2)
    assert (mix.readable, mix.skipped, mix.first_skipped) == (1050, 10, 101)
    assert mix.format == "nginx combined" and mix.replayable == 1000
    shares = {ep.name: 100 * ep.count / mix.replayable for ep in mix.endpoints}
    assert shares == {
        "GET /items/{id}": 40.0,
        "GET /users/{uuid}": 25.0,
        "GET /search": 20.0,
        "GET /old-page": 10.0,
        "HEAD /health": 5.0,
    }
    weights: dict[str, float] = {}
    for e in mix.entries:
        weights[e.name] = weights.get(e.name, 0.0) + e.weight
    assert weights == pytest.approx(shares, abs=1e-4)
    items = [e for e in mix.entries if e.name == "GET /items/{id}"]
    assert len(items) == 2, "two variants kept"
    old = next(e for e in mix.entries if e.name == "GET /old-page")
    assert old.expect_status == [404]
    search = next(e for e in mix.entries if e.name == "GET /search")
    assert search.path == "/search?q=shoes&page=2"
    assert sum(mix.dropped.values()) == 50
    assert all("not safe to replay" in r for r in mix.dropped)
    unsafe = read_log(generated_log(), include_unsafe=True)
    assert unsafe.replayable == 1050 and not unsafe.dropped
    assert {ep.name for ep in unsafe.endpoints} >= {"POST /items", "DELETE /items/{id}"}


def test_gunicorn_logs_are_told_apart() -> None:
    lines = [
        "[2026-12-05 10:00:00 +0000] [42] [INFO] Starting gunicorn 23.0.0",
        GUNICORN.format(req="GET /a HTTP/1.1", status=200, size="-"),
        GUNICORN.format(req="GET /a HTTP/1.1", status=200, size=12),
    ]
    mix = read_log(lines)
    assert mix.format == "gunicorn" and mix.first_skipped == 1 and mix.replayable == 2


def test_cli_writes_the_mix_and_prints_the_table(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text("\n".join(generated_log()) + "\n")
    out = tmp_path / "mix.toml"
    r = CliRunner().invoke(cli, ["mix", "from-log", str(log), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert re.search(r"GET /items/\{id\}\s+40\.00%\s+400", r.output), r.output
    assert "10 skipped (the first unreadable is line 101)" in r.output
    assert "50 dropped" in r.output and "not safe to replay" in r.output
    entries = load_mix(out)
    assert {e.name for e in entries} == {
        "GET /items/{id}",
        "GET /users/{uuid}",
        "GET /search",
        "GET /old-page",
        "HEAD /health",
    }
    assert sum(e.weight for e in entries) == pytest.approx(100.0, abs=1e-3)
    as_json = tmp_path / "mix.json"
    r = CliRunner().invoke(cli, ["mix", "from-log", str(log), "-o", str(as_json)])
    assert r.exit_code == 0 and load_mix(as_json) == entries


def test_a_log_with_no_readable_line_is_one_line_and_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "error.log"
    log.write_text("2026/12/05 10:00:00 [error] 1#1: oops\nnot a log line\n")
    out = tmp_path / "mix.toml"
    r = CliRunner().invoke(cli, ["mix", "from-log", str(log), "-o", str(out)])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "no readable line among 2 lines" in r.output
    assert "the first unreadable is line 1" in r.output and not out.exists()
    with pytest.raises(AccessLogError, match="no replayable request"):
        read_log([nginx("POST", "/x")])
    r = CliRunner().invoke(cli, ["mix", "from-log", str(log), "-o", str(out), "--rule", "x"])
    assert r.exit_code == 2 and "expected REGEX=NAME" in r.output
    r = CliRunner().invoke(cli, ["mix", "from-log", str(tmp_path / "nope.log"), "-o", str(out)])
    assert r.exit_code == 2 and "cannot read" in r.output and not out.exists()
