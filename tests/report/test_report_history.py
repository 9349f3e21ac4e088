"""The report's history figure: drawn when a report covers more than two stored runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pywebbench.report import generate
from report_browser import open_report, screenshot, wait_drawn
from report_study import FakeStack, StudyPlan, record_study

PLAN = StudyPlan(
    stacks=[
        FakeStack("cpython3.11", "refserver", "fast", delay_ms=0.0),
        FakeStack("pypy3.9", "refserver", "slow", delay_ms=1.0, impl="pypy"),
    ],
    loads={"hello": [4]},
    replicates=1,
    warmup=0,
    measured=2,
    duration_s=0.2,
)


def test_three_runs_get_a_drawn_history_figure(browser: Any, tmp_path: Path) -> None:
    store = tmp_path / "pywebbench.sqlite"
    runs = [record_study(store, PLAN) for _ in range(3)]
    two = generate(store, runs[:2], tmp_path / "two")
    assert "history-hello" not in two.html.read_text()
    paths = generate(store, runs, tmp_path / "three")
    page, events = open_report(browser, paths.html)
    try:
        plot = page.locator('.plot[data-figure="history-hello"]')
        plot.scroll_into_view_if_needed()
        wait_drawn(page)
        screenshot(page, "report-history")
        assert plot.locator("svg.main-svg").count() >= 1
        assert plot.locator("g.trace").count() == len(PLAN.stacks)  # one line per stack
        ticks = plot.locator(".xtick text").all_text_contents()
        assert ticks == runs  # one point per run, in time order
        assert not events.console_errors and not events.page_errors and not events.requests
    finally:
        page.close()
