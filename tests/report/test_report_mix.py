"""The report of a study with a traffic mix (docs/mix.md): a table per point with each
endpoint's weight, share sent, req/s, errors and latency percentiles, in the Markdown and
the HTML, and in the HTML a latency chart with a line per endpoint, drawn in headless
Chromium. The study is the session's short mix study (tests/pwbmix.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pwbmix import ENDPOINTS, SHARES, shared_study
from pywebbench import formatting as fmt
from pywebbench.report import generate
from pywebbench.store import Store
from pywebbench.store.endpoints import cell_endpoints
from report_browser import open_report, screenshot

COLUMNS = "| endpoint | weight | share sent | req/s | errors | p50 ms | p99 ms | p99.9 ms |"


@pytest.fixture(scope="module")
def mix_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(store, the report's HTML)."""
    store = shared_study(tmp_path_factory)
    paths = generate(store, None, tmp_path_factory.mktemp("mix-report"))
    return store, paths.html


def test_the_markdown_has_a_table_per_point(mix_report: tuple[Path, Path]) -> None:
    store_path, html = mix_report
    md = html.with_suffix(".md").read_text()
    with Store(store_path, create=False) as store:
        study = store.load_study()
    (cell,) = study.cells
    figures = cell_endpoints(study.iterations_of(cell.id))
    assert "## Endpoints of the mix" in md
    lines = md.splitlines()
    head = lines.index(COLUMNS)
    rows = [ln.split(" | ") for ln in lines[head + 2 : head + 2 + len(ENDPOINTS)]]
    assert [r[0].removeprefix("| ") for r in rows] == ENDPOINTS
    for r, f in zip(rows, figures, strict=True):
        assert r[1] == fmt.percent(SHARES[f.name])  # the weight, as the mix gives it
        assert r[2] == fmt.percent(f.share_sent)
        assert r[4] == f"{f.errors:,}" == "0"
        assert r[5] == fmt.latency_ms(f.p50_us / 1000)


def test_the_html_draws_a_latency_line_per_endpoint(
    mix_report: tuple[Path, Path], browser: Any
) -> None:
    page, events = open_report(browser, mix_report[1], timeout_ms=90_000)
    try:
        section = page.locator("#endpoints")
        section.scroll_into_view_if_needed()
        screenshot(page, "report-endpoints")
        assert section.locator("table.endpoints tbody tr").count() == len(ENDPOINTS)
        cells = section.locator("table.endpoints tbody tr td:first-child").all_inner_texts()
        assert cells == ENDPOINTS
        plot = section.locator(".plot.endpoint-latency")
        assert plot.locator("svg.main-svg").count() >= 1
        assert plot.locator("g.trace").count() == len(ENDPOINTS)
        assert page.locator("nav a[href='#endpoints']").count() == 1
        assert events.console_errors == [] and events.page_errors == []
        assert events.requests == [], "the report must not touch the network"
    finally:
        page.close()
