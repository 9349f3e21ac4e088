"""The study axes in the reports, from one real short study: gunicorn-sync swept over worker
recycling (never / after 100 requests) and connection mode (keep-alive / close), with a
syscalls window per replicate. The HTML section is checked in headless Chromium (every plot
drawn, no error, no network), the Markdown against the store.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pwbtest import pwb
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.report import generate
from pywebbench.store import Store
from report_browser import open_report, screenshot

ARGS = [
    *("--server", "gunicorn-sync", "--framework", "raw-wsgi", "--workload", "hello"),
    *("--python", default_interpreters()[0].name, "-c", "4", "-d", "1"),
    *("--warmup", "fixed", "--warmup-duration", "0.5", "--replicates", "1"),
    *("--max-replicates", "1", "--worker-max-requests", "0,100"),
    *("--connection-mode", "keepalive,close", "--syscalls", "--syscalls-duration", "1"),
    "--no-report",
]


@pytest.fixture(scope="module")
def axes_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(store, report paths' HTML): the study run once for the module."""
    results = tmp_path_factory.mktemp("axes") / "res"
    proc = pwb("run", *ARGS, results=results, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    store = results / "pywebbench.sqlite"
    paths = generate(store, None, results / "reports")
    return store, paths.html


def test_the_axes_section_draws_every_plot(axes_report: tuple[Path, Path], browser: Any) -> None:
    # The study has just loaded the machine: give the page more than the usual 30 s.
    page, events = open_report(browser, axes_report[1], timeout_ms=90_000)
    try:
        section = page.locator("#axes")
        section.scroll_into_view_if_needed()
        screenshot(page, "report-axes")
        for fid in ("syscalls-fig", "recycling-fig"):
            plot = section.locator(f".plot[data-figure='{fid}']")
            assert plot.locator("svg.main-svg").count() >= 1, fid
            assert plot.locator("g.trace").count() >= 2, fid  # two points / two lines
        text = section.inner_text()
        assert "not throughput figures" in page.inner_text("#syscalls-note")
        for title in ("Syscalls per request", "Keep-alive against", "Worker recycling"):
            assert title in text
        assert "c4 close" in text and "never" in text
        recycling_rows = section.locator("table.recycling tbody tr").count()
        assert recycling_rows == 4  # {never, 100} x {keep-alive, close}
        assert section.locator("table.connection tbody tr").count() == 2
        # The cells over time mark the samples at which a new worker had appeared.
        select = page.locator("#cell-select")
        marked = []
        for value in select.locator("option").evaluate_all("os => os.map(o => o.value)"):
            select.select_option(value)
            names = page.evaluate(
                "() => document.getElementById('cell-plot').data.map(t => t.name)"
            )
            marked.append("worker replaced" in names)
        assert any(marked) and not all(marked), marked
        assert events.console_errors == [] and events.page_errors == []
        assert events.requests == [], "the report must not touch the network"
    finally:
        page.close()


def test_the_markdown_shows_the_stored_syscalls(axes_report: tuple[Path, Path]) -> None:
    """Every window's figure is in the Markdown as stored. The two cells whose worker is
    never recycled have one each: their worker serves through the whole 1-s window, and
    completing no request in it takes the server or the generator held for the whole
    second, which steal in slices of milliseconds does not do (docs/contributing.md). A
    recycling server's window may complete none on a loaded machine (the replacement worker,
    forked under ptrace, starts slowly): the report then says why, not a figure."""
    store_path, html = axes_report
    md = html.with_suffix(".md").read_text()
    with Store(store_path, create=False) as store:
        study = store.load_study()
    windows = [
        (study.stack(study.cell(r.cell_id).stack_id).worker_max_requests, r.syscalls)
        for r in study.replicates
        if r.syscalls_json
    ]
    assert sorted(recycled for recycled, _ in windows) == [0, 0, 100, 100], windows
    assert all(w.get("per_request") is not None for recycled, w in windows if not recycled)
    totals = sorted(w["per_request"] for _, w in windows if w.get("per_request") is not None)
    section = md.split("## Syscalls per request", 1)[1].split("## ", 1)[0]
    assert "not throughput figures" in section
    shown = sorted(float(v) for v in re.findall(r"\| ([\d.]+) \| [a-z_0-9]+ \d", section))
    assert shown == [float(f"{t:.1f}") for t in totals]
    if len(totals) < len(windows):
        assert "no request completed in the traced window" in section, section
    assert "## Keep-alive against reconnecting" in md
    assert "## Worker recycling" in md and "max-requests 100" not in md.split("## Worker")[1]
