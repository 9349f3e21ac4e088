"""Capacity and cost (docs/capacity.md): the arithmetic on known figures, then on a small real
stored study through ``pywebbench capacity`` and ``pywebbench report --capacity``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pwbtest import command
from pywebbench.report import build_view
from pywebbench.report.capacity import CapacityTarget, parse_target, server_cores
from pywebbench.report.knee import KneeView
from pywebbench.report.sizing import capacity_rows
from pywebbench.report.view import Estimate, PointView, ReportView, StackView, WorkloadView
from pywebbench.store import Store
from pywebbench.study.slo import parse_slo
from report_study import FakeStack, StudyPlan, record_study


def _stack(key: str, workers: int) -> StackView:
    return StackView(key, key, "cpython3.11", "3.11.7", "", "srv", "wsgi", "fw", workers, 1)


def _point(key: str, load: str, rps: float, peak_mib: float, model: str = "closed") -> PointView:
    return PointView(
        key,
        "hello",
        load,
        model,
        64,
        None,
        rps=Estimate(rps, rps * 0.9, rps * 1.1, 3),
        peak_rss_mib=peak_mib,
    )


def _view() -> ReportView:
    view = ReportView("t", "now", "0")
    view.stacks = {"a": _stack("a", 2), "b": _stack("b", 1)}
    view.workloads = [
        WorkloadView(
            "hello",
            points=[
                _point("a", "c16", 3_000.0, 100.0),
                _point("a", "c64", 4_000.0, 120.0),  # a's best closed-loop point
                _point("b", "c64", 2_500.0, 50.0),
            ],
        )
    ]
    knee = KneeView("b", "b", "hello", "c64", "p99=20ms", "p99", 20.0, 500)
    knee.knees = [1_900.0, 2_000.0, 2_100.0]  # median 2,000
    view.knees = [knee]
    return view


def test_the_arithmetic_on_known_figures() -> None:
    target = CapacityTarget(10_000.0, parse_slo("p99=50ms"), core_hour=0.05, gib_hour=0.01)
    rows = {r.stack_key: r for r in capacity_rows(_view(), target, server_cores=2)}
    a, b = rows["a"], rows["b"]
    # a: no knee, best closed loop 4,000 req/s -> 3 copies of 2 cores and 2 workers
    assert (a.basis, a.slo_checked, a.per_copy_rps) == ("closed loop c64", False, 4_000.0)
    assert (a.copies, a.cores, a.workers) == (3, 6, 6)
    assert a.memory_gib == pytest.approx(3 * 120.0 / 1024)
    hourly = 6 * 0.05 + 3 * 120.0 / 1024 * 0.01
    assert a.cost_per_hour == pytest.approx(hourly)
    assert a.cost_per_million == pytest.approx(hourly / (10_000 * 3600) * 1e6)
    # b: a knee at p99=20ms meets p99=50ms: 2,000 req/s per copy -> 5 copies
    assert (b.basis, b.slo_checked, b.per_copy_rps) == ("knee p99=20ms", True, 2_000.0)
    assert (b.copies, b.cores, b.workers) == (5, 10, 5)
    assert b.memory_gib == pytest.approx(5 * 50.0 / 1024)


def test_a_knee_under_a_looser_slo_is_not_used() -> None:
    target = CapacityTarget(10_000.0, parse_slo("p99=10ms"))
    b = next(r for r in capacity_rows(_view(), target, 1) if r.stack_key == "b")
    assert (b.basis, b.slo_checked, b.copies) == ("closed loop c64", False, 4)
    assert b.cost_per_hour is None and b.cost_per_million is None  # no prices given


def test_bad_targets_name_the_key() -> None:
    for text, key in [
        ("slo=p99=50ms", "rps"),
        ("rps=abc", "rps"),
        ("rps=-5", "rps"),
        ("rps=100,slo=p99", "slo"),
        ("rps=100,core_hour=-1", "core_hour"),
        ("rps=100,cores=3", "'cores=3'"),
    ]:
        with pytest.raises(ValueError) as err:
            parse_target(text)
        assert str(err.value).startswith(key), (text, err.value)


PLAN = StudyPlan(
    stacks=[
        FakeStack("cpython3.11", "refserver", "fast", delay_ms=0.0),
        FakeStack("cpython3.11", "refserver", "slow", delay_ms=1.0),
    ],
    loads={"hello": [8]},
    replicates=2,
    warmup=0,
    measured=1,
    duration_s=0.3,
)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("capacity") / "pywebbench.sqlite"
    record_study(path, PLAN)
    return path


def test_capacity_command_sizes_the_stored_figures(stored: Path) -> None:
    proc = command(
        ["capacity", "--rps", "10000", "--core-hour", "0.04", "--store", str(stored)]
        + ["--gib-hour", "0.005", "--format", "json"],
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    with Store(stored, create=False) as store:
        study = store.load_study()
    view = build_view(study)
    cores = server_cores(study)
    by_key = {r["stack_key"]: r for r in doc["rows"]}
    assert len(by_key) == 2
    for point in view.workloads[0].points:
        row = by_key[point.stack_key]
        assert point.rps is not None and point.peak_rss_mib is not None
        copies = math.ceil(10_000 / point.rps.median)
        memory = copies * point.peak_rss_mib / 1024
        assert (row["copies"], row["cores"]) == (copies, copies * cores)
        assert row["memory_gib"] == pytest.approx(memory)
        assert row["cost_per_hour"] == pytest.approx(copies * cores * 0.04 + memory * 0.005)
        assert not row["slo_checked"]  # no knee was searched
    assert any("linearly" in a for a in doc["assumptions"])
    assert any("checked no latency target" in a for a in doc["assumptions"])
    bad = command(
        ["capacity", "--rps", "0", "--store", str(stored)],
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: --rps:"), bad.stderr


def test_report_has_the_capacity_section_in_html_and_markdown(stored: Path, tmp_path: Path) -> None:
    proc = command(
        ["report", "--store", str(stored), "-o", str(tmp_path)]
        + ["--capacity", "rps=10000,slo=p99=50ms,core_hour=0.04"],
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    md = next(tmp_path.glob("report-*.md")).read_text()
    assert "## Capacity for 10,000 req/s at p99=50ms" in md
    assert "closed loop c8 (no SLO checked)" in md and "cost per 1M req" in md
    html = next(tmp_path.glob("report-*.html")).read_text()
    assert 'id="capacity"' in html and "Capacity for 10,000 req/s at p99=50ms" in html
    refused = command(
        ["report", "--store", str(stored), "--capacity", "rps=10000,cores=3"],
        timeout=60,
    )
    assert refused.returncode == 2 and "--capacity" in refused.stderr, refused.stderr
