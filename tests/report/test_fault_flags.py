"""A fault phase that stayed interfered after its re-measures is a note of its cell (console,
HTML and Markdown share flag_notes) and a mark on its sweep point (docs/faults.md)."""

from __future__ import annotations

import dataclasses

from pywebbench.faults.outcome import CurvePoint, RobustnessCurve
from pywebbench.report.flags import flag_help, flag_notes, legend
from pywebbench.report.robustness_curve import breaking_text, curve_figure, interfered_marks
from pywebbench.report.view import PointView, ReportView, WorkloadView


def _point(size: int, retained: float, interfered: bool) -> CurvePoint:
    return CurvePoint(
        size=size, retained_pct=retained, p99_faulted_ms=None, p99_clean_ms=None,
        clean_rps=1000.0, faulted_rps=retained * 10, good_errors=0, good_error_rate=0.0,
        survived=True, score=50.0, others_share=0.4 if interfered else 0.01,
        interfered=interfered, remeasured=2 if interfered else 0,
    )  # fmt: skip


def test_an_interfered_fault_phase_is_a_note_with_its_meaning() -> None:
    assert flag_notes({"robustness": {"interfered": False, "score": 40}}) == []
    notes = flag_notes({"robustness": {"interfered": True}})
    assert notes == ["faults interfered"]
    assert "during the fault phase" in flag_help(notes[0])
    assert [k for k, _ in legend(notes)] == ["faults interfered"]
    curve = RobustnessCurve(
        kind="slow-headers", sizes=[500, 1100], breaking_point=500, fresh_share=0.2, lead_s=1.0,
        points=[_point(500, 45.0, True), _point(1100, 0.0, False)],
    )  # fmt: skip
    # a sweep whose last point was clean but an earlier one was not
    assert flag_notes({"robustness": {"interfered": False, "curve": curve.model_dump()}}) == [
        "faults interfered"
    ]
    assert flag_notes({"robustness": 55.0}) == []  # the earliest stores kept a bare score


def test_the_retained_figures_mark_an_interfered_point() -> None:
    from pywebbench.report.robustness_curve import _retained

    curve = RobustnessCurve(
        kind="slow-headers", sizes=[500, 1100], breaking_point=500, fresh_share=0.2, lead_s=1.0,
        points=[_point(500, 45.0, True), _point(1100, 0.0, False)],
    )  # fmt: skip
    assert _retained(curve) == "500: 45% (interfered) · 1,100: 0%"
    assert breaking_text(curve) == "500"


def test_the_curve_figure_crosses_an_interfered_point_and_only_it() -> None:
    curve = RobustnessCurve(
        kind="slow-headers", sizes=[500, 1100], breaking_point=500, fresh_share=0.2, lead_s=1.0,
        points=[_point(500, 45.0, True), _point(1100, 0.0, False)],
    )  # fmt: skip
    marks = interfered_marks("waitress c64", curve, "#123456")
    assert marks is not None
    assert (marks["x"], marks["y"]) == ([500], [45.0])
    assert marks["hovertext"] == [
        "waitress c64 at 500: 45% retained; interfered, others took 40% of a core"
    ]
    assert marks["marker"]["color"] == "#123456" and marks["legendgroup"] == "waitress c64"
    clean = curve.model_copy(
        update={"points": [_point(500, 45.0, False), _point(1100, 0.0, False)]}
    )
    assert interfered_marks("waitress c64", clean, "#123456") is None
    # and the report's figure carries the crosses with the curve they belong to
    point = PointView(
        stack_key="cpython3.11/waitress/raw-wsgi", workload="hello", load_point="c64",
        load_model="closed", connections=64, rate=None, robustness_curve=curve,
    )  # fmt: skip
    view = ReportView(title="t", generated_at="now", pywebbench_version="0")
    figure = curve_figure(view, WorkloadView(name="hello", points=[point]))
    assert figure is not None
    crossed = [d for d in figure["data"] if d.get("meta", {}).get("interfered")]
    assert [(d["x"], d["y"]) for d in crossed] == [([500], [45.0])]
    clean_point = dataclasses.replace(point, robustness_curve=clean)
    figure = curve_figure(view, WorkloadView(name="hello", points=[clean_point]))
    assert figure is not None
    assert not [d for d in figure["data"] if d.get("meta", {}).get("interfered")]
