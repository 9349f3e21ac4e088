"""What the report says of each stack's interpreter: its kind and the GIL as its servers ran."""

from __future__ import annotations

from pywebbench.catalogue.base import interpreter_kind
from pywebbench.report.build import gil_runtime
from pywebbench.report.versions import version_sweeps, versions_figures
from pywebbench.report.view import Estimate, PointView, ReportView, StackView, WorkloadView


def test_gil_as_run_over_replicates() -> None:
    assert gil_runtime([False, False, False]) == "off"
    assert gil_runtime([True, None, True]) == "on"
    assert gil_runtime([False, True, False]) == "on in 1 of 3 replicates"
    assert gil_runtime([None, None]) == ""  # nothing reported (a user's app)


def test_interpreter_kind_words() -> None:
    assert interpreter_kind("cpython", False) == "GIL"
    assert interpreter_kind("cpython", True, "1") == "free-threaded, PYTHON_GIL=1"
    assert interpreter_kind("cpython", False, jit=True, optimizations="PGO+LTO") == (
        "GIL, JIT, PGO+LTO"
    )
    assert interpreter_kind("pypy", False) == "PyPy JIT"


def _stack(interpreter: str, version: str, framework: str = "flask") -> StackView:
    key = f"{interpreter}/granian-wsgi/{framework}"
    return StackView(key, key, interpreter, version, "", "granian-wsgi", "wsgi", framework, 1, 1)


def _point(stack: StackView, rps: float) -> PointView:
    estimate = Estimate(rps, rps * 0.9, rps * 1.1, 3)
    return PointView(stack.key, "hello", "c64", "closed", 64, None, rps=estimate, p99_ms=2.0)


def test_versions_figure_orders_interpreters_and_keeps_cis() -> None:
    stacks = [
        _stack("pypy3.9", "3.9.16"),
        _stack("cpython3.13t", "3.13.5"),
        _stack("cpython3.10", "3.10.13"),
        _stack("cpython3.13", "3.13.0"),
        _stack("cpython3.12", "3.12.1", framework="raw-wsgi"),  # alone: not a sweep
    ]
    view = ReportView("t", "now", "0")
    view.stacks = {s.key: s for s in stacks}
    points = [_point(s, 1000.0 * (n + 1)) for n, s in enumerate(stacks)]
    view.workloads = [WorkloadView("hello", points=points)]
    assert list(version_sweeps(view)) == [("granian-wsgi", "flask", "1w×1t", "hello", "c64")]
    cpu = WorkloadView("cpu", points=[_point(stacks[0], 50.0)])  # on one interpreter only
    view.workloads.append(cpu)
    figs = versions_figures(view)
    assert list(figs) == ["hello"]  # one figure per workload with a sweep
    fig = figs["hello"]
    order = ["cpython3.10", "cpython3.13", "cpython3.13t", "pypy3.9"]
    assert fig["layout"]["xaxis"]["categoryarray"] == order
    rps = fig["data"][0]
    assert rps["x"] == order and rps["y"] == [3000.0, 4000.0, 2000.0, 1000.0]
    assert rps["error_y"]["array"] == [300.0, 400.0, 200.0, 100.0]  # the CI's upper side
    assert {d.get("yaxis") for d in fig["data"]} == {None, "y2", "y3"}  # req/s, p99, memory
    view.workloads = [WorkloadView("hello", points=points[:1])]
    assert versions_figures(view) == {}  # one interpreter: nothing to draw


def test_the_by_interpreter_figure_says_where_its_interpreters_were_measured() -> None:
    """A run stored when an interleaved group held one interpreter: the figure's
    interpreters come from different groups, and its words say so instead of calling them
    replicates; from one group (today's), they come from the same rounds."""
    from pywebbench.report.versions import rps_words

    stacks = [_stack("cpython3.12", "3.12.1"), _stack("pypy3.9", "3.9.16")]
    view = ReportView("t", "now", "0")
    view.stacks = {s.key: s for s in stacks}
    points = [_point(s, 1000.0) for s in stacks]
    view.workloads = [WorkloadView("hello", points=points)]
    assert rps_words(view) == "median with its 95% CI over replicates"
    for n, p in enumerate(points):
        p.group = {"group": f"{stacks[n].interpreter} | hello @ c64", "span": ["a", "b"]}
    words = rps_words(view)
    assert "minutes apart" in words and "no interval compares two interpreters" in words
    for p in points:
        p.group = {"group": "hello @ c64", "span": ["a", "b"]}
    words = rps_words(view)
    assert "one interleaved group" in words and "same rounds" in words
