"""Robustness as a curve on a real server: waitress's breaking point under slowloris tracks its
``connection_limit`` (docs/faults.md). One study from pywebbench.toml (limit 100), one from the
command line (limit 1000); the store, the Markdown and the HTML report (headless Chromium)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pwbtest import command
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import Store

SHORT = ["-d", "1", "--warmup", "fixed", "--warmup-duration", "0.5", "--replicates", "1",
         "--max-replicates", "1", "-c", "16"]  # fmt: skip

TOML = """\
[matrix]
interpreters = ["{python}"]
servers = ["waitress"]
frameworks = ["raw-wsgi"]
workloads = ["hello"]

[matrix.server_options.waitress]
connection_limit = 100

[load]
faults = "slowloris=50,200"
"""


def _study(results: Path, *args: str) -> dict[str, Any]:
    proc = command(
        ["run", *SHORT, "--results-dir", str(results), *args],
        timeout=240, cwd=results,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    cells = [c for c in study.cells if c.status == "ok"]
    assert len(cells) == 1, [(c.key, c.failure_reason) for c in study.cells]
    rob: dict[str, Any] = cells[0].flags["robustness"]
    return rob


@pytest.fixture(scope="module")
def limit_100(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """waitress with connection_limit 100, swept from pywebbench.toml."""
    results = tmp_path_factory.mktemp("sweep-100")
    python = default_interpreters()[0].name
    (results / "pywebbench.toml").write_text(TOML.format(python=python))
    return results, _study(results, "--config", str(results / "pywebbench.toml"))


@pytest.fixture(scope="module")
def limit_1000(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """waitress with connection_limit 1000, swept from the command line."""
    results = tmp_path_factory.mktemp("sweep-1000")
    python = default_interpreters()[0].name
    return results, _study(
        results, "--server", "waitress", "--framework", "raw-wsgi", "--workload", "hello",
        "--python", python, "--server-option", "waitress.connection_limit=1000",
        # One header line per 10 s, not 2 s: waitress parses every line in its one I/O
        # thread, so at 500 connections the default trickle costs it CPU on a busy 2-core box
        # (docs/faults.md); the longer interval isolates the limit the test is about.
        "--faults", "slowloris=500:interval=10s,1100",
    )  # fmt: skip


def test_waitress_breaks_where_its_connection_limit_is(
    limit_100: tuple[Path, dict[str, Any]], limit_1000: tuple[Path, dict[str, Any]]
) -> None:
    low, high = limit_100[1]["curve"], limit_1000[1]["curve"]
    print("limit 100:", low["points"], "\nlimit 1000:", high["points"])
    assert low["kind"] == "slow-headers" and low["sizes"] == [50, 200]
    assert low["breaking_point"] is not None and low["breaking_point"] <= 200, low
    # Past the limit good clients get no connection: every host breaks there. Whether 500
    # slow clients under the limit already break it depends on the CPU waitress's one I/O
    # thread gets (a host that steals half of it may break at 500): that point is read,
    # not asserted (docs/faults.md; issue 52).
    assert high["breaking_point"] is not None and high["breaking_point"] <= 1100, high
    assert low["fresh_share"] == 0.2 and low["lead_s"] == 1.0


def test_good_requests_that_never_completed_are_counted(
    limit_1000: tuple[Path, dict[str, Any]],
) -> None:
    """Past the limit the good clients complete nothing: that is errors and a p99, not 0."""
    rob = limit_1000[1]
    assert rob["mix"] == "slow-headers=1100:interval=10000ms"
    # Function, not timing: once the 1,100 slow connections are held (they lead the good
    # clients by a second), waitress accepts no other connection, whatever the host's speed,
    # so the good clients complete nothing; half the clean rate and half the requests failed
    # leave room only for what completed before the last slow connection was in place.
    assert rob["faulted_rps"] < 0.5 * rob["clean_rps"]
    assert rob["good_errors"] > 0 and rob["good_error_rate"] > 0.5, rob
    assert rob["p99_faulted_ms"] is not None and rob["p99_faulted_ms"] >= 500, rob


def test_markdown_names_the_breaking_point_and_the_settings(
    limit_1000: tuple[Path, dict[str, Any]],
) -> None:
    md = next((limit_1000[0] / "reports").glob("report-*.md")).read_text()
    assert "Robustness as a curve" in md
    line = next(x for x in md.splitlines() if "breaking point **" in x)
    point = limit_1000[1]["curve"]["breaking_point"]
    assert "waitress" in line and f"breaking point **{point:,}**" in line, line
    assert "500: " in line and "1,100: " in line
    settings = md[md.index("Server settings that bear on these verdicts:") :]
    assert "connection_limit=1000" in settings.splitlines()[2], settings


def test_html_draws_the_curve_and_the_breaking_point(
    limit_100: tuple[Path, dict[str, Any]],
) -> None:
    results, rob = limit_100
    html = next((results / "reports").glob("report-*.html"))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("curve_probe.py")), str(html)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["errors"] == []
    assert shown["plot_visible"] and shown["table_visible"]
    # retained and p99 lines, the ring on the breaking point, and a trace of crosses when a
    # point stayed interfered (a neighbour on the server's core: docs/faults.md)
    crossed = any(p.get("interfered") for p in rob["curve"]["points"])
    assert shown["traces"] == 3 + crossed, shown
    assert shown["shapes"] >= 1  # the 50 % line
    assert "Retained good throughput" in shown["titles"]
    assert "Good p99 under attack" in shown["titles"]
    (row,) = shown["rows"]
    point = rob["curve"]["breaking_point"]
    assert row["breaking"] == f"{point:,}"
    assert row["retained"].startswith("50: ") and "200: " in row["retained"]
    assert "connection_limit=100" in row["settings"]
