"""The knee section of the report (docs/slo.md), in headless Chromium and in Markdown.

A small real study (the reference server, report_study.py) gets knee searches stored beside
it through the store's API: one stack found a knee in every replicate, the other never met
its SLO. The page must draw each curve with the SLO line and the knee marked, without a
console error, and both reports must show the knee, its CI and "SLO not met at R req/s".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pywebbench import formatting as fmt
from pywebbench.analysis.stats import summarize
from pywebbench.report import ReportPaths, generate
from pywebbench.store import Store
from pywebbench.store.knee_rows import Knee, KneeProbe
from report_browser import open_report, screenshot
from report_study import FakeStack, StudyPlan, record_study

PLAN = StudyPlan(
    stacks=[
        FakeStack("cpython3.11", "refserver", "fast", delay_ms=0.0),
        FakeStack("cpython3.11", "refserver", "slow", delay_ms=0.5),
    ],
    loads={"hello": [8]},
    replicates=3,
    warmup=0,
    measured=1,
    duration_s=0.25,
)
KNEES = [1_000.0, 1_100.0, 1_050.0]  # the fast stack's knee per replicate
SLO = "p99=20ms"


def _probe(cell_id: int, rep: int, idx: int, rate: float, latency_ms: float) -> KneeProbe:
    verdict = "pass" if latency_ms <= 20 else "latency"
    achieved = min(rate, 1_200.0)
    return KneeProbe(
        None, cell_id, rep, idx, "bracket" if idx < 3 else "bisect", "2026-01-01T00:00:00Z",
        rate, achieved, 5.0, int(achieved * 5), 0, latency_ms * 1000, latency_ms * 500,
        10_000, verdict,
    )  # fmt: skip


def _knee(cell_id: int, rep: int, knee: float | None, lowest: float) -> Knee:
    return Knee(
        None, cell_id, rep, SLO, 99.0, 20_000.0, "found" if knee else "not_met", knee,
        knee * 1.04 if knee else None, lowest, "tolerance" if knee else "floor", 5, 30.0,
        10_000, "2026-01-01T00:00:00Z",
    )  # fmt: skip


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReportPaths, list[int]]:
    root = tmp_path_factory.mktemp("knee")
    store_path = root / "pywebbench.sqlite"
    run_id = record_study(store_path, PLAN)
    with Store(store_path) as store:
        cells = store.cells(run_id)
        fast, slow = (c.id for c in cells)
        assert fast is not None and slow is not None
        for rep, knee in enumerate(KNEES):
            for idx, (rate, ms) in enumerate(
                [
                    (500, 2.0),
                    (knee, 15.0),
                    (knee * 2, 900.0),
                    (knee * 1.5, 300.0),
                    (knee * 1.04, 40.0),
                ]
            ):
                store.add_knee_probe(_probe(fast, rep, idx, rate, ms))
            store.add_knee(_knee(fast, rep, knee, 500.0))
            for idx, rate in enumerate([400.0, 200.0, 100.0, 50.0, 25.0, 12.5]):
                store.add_knee_probe(_probe(slow, rep, idx, rate, 45.0))
            store.add_knee(_knee(slow, rep, None, 12.5))
    paths = generate(store_path, [run_id], root / "out")
    return paths, [fast, slow]


def test_markdown_shows_knee_ci_and_slo_not_met(study: Any) -> None:
    md = study[0].markdown.read_text()
    section = md.split(f"## Maximum rate under the latency SLO ({SLO})", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| cpython")]
    assert len(rows) == 2, section
    est = summarize(KNEES)
    fast = rows[0].split(" | ")
    assert fast[4] == f"{est.median:,.0f} req/s" and fast[5] == fmt.rate_interval(
        est.ci_low, est.ci_high, est.median, est.n
    )
    assert fast[6] == "3" and fast[7] == "15"  # replicates, probes
    assert "SLO not met at 12.5 req/s" in rows[1] and "3× ended by floor" in rows[1]
    assert "Each probe aimed for 10,000 samples" in section


def test_knee_curve_is_drawn_with_the_slo_and_the_knee(browser: Any, study: Any) -> None:
    page, events = open_report(browser, study[0].html)
    try:
        section = page.locator("section#knee")
        section.scroll_into_view_if_needed()
        plot = section.locator("#knee-plot")
        page.wait_for_function(
            "document.querySelector('#knee-plot svg.main-svg') !== null", timeout=15_000
        )
        assert plot.locator("g.trace").count() == 6  # 3 replicates x (percentile, achieved)
        notes = plot.locator("g.annotation text").all_text_contents()
        assert f"SLO {SLO}" in notes and "knee 1,050 req/s" in notes, notes
        assert plot.locator("g.shapelayer path").count() >= 3  # SLO line, CI band, knee line
        cells = section.locator("table.knee-table tbody tr td").all_text_contents()
        assert "1,050 req/s" in cells and "SLO not met at 12.5 req/s" in cells, cells
        screenshot(page, "knee-found")
        page.select_option("#knee-select", index=1)
        page.wait_for_function(
            "document.querySelector('#knee-plot').getAttribute('data-drawn') === 'knee-1'",
            timeout=15_000,
        )
        notes = plot.locator("g.annotation text").all_text_contents()
        assert "SLO not met at 12.5 req/s" in notes, notes
        screenshot(page, "knee-not-met")
        assert not events.console_errors and not events.page_errors, events
        assert not events.requests, events.requests
    finally:
        page.close()


def test_no_knee_section_without_an_slo(tmp_path: Path) -> None:
    store_path = tmp_path / "pywebbench.sqlite"
    run_id = record_study(store_path, StudyPlan(stacks=PLAN.stacks[:1], loads={"hello": [1]}))
    paths = generate(store_path, [run_id], tmp_path / "out")
    assert 'id="knee"' not in paths.html.read_text()
    assert "latency SLO" not in paths.markdown.read_text()


def test_an_edge_that_flips_is_shown_as_a_range() -> None:
    from pywebbench.report.knee import KneeView

    view = KneeView(
        "k", "label", "hello", "c16", SLO, "p99", 20.0, 10_000, knees=list(KNEES), repeats=3
    )
    assert view.knee_text == "1,050 req/s" and "flips" not in view.notes
    view.flips = [1_300.0, 1_250.0]  # two of the three replicates' edges flipped
    assert view.knee_text == "1,050–1,300 req/s (flips)"
    assert "edge flips in 2 of 3 replicates" in view.notes and "1,300 req/s" in view.notes
