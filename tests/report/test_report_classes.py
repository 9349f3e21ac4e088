"""A cell's classes and modes in its notes (console, HTML, Markdown share flag_notes) and
each replicate's class in the warm-up figure's legend (issue 21)."""

from __future__ import annotations

import json

from pywebbench.report.build import steady_manifest
from pywebbench.report.figures_warmup import point_warmup_figure
from pywebbench.report.flags import flag_help, flag_notes, legend
from pywebbench.report.view import PointView, ReportView, StackView, WarmupCurve
from pywebbench.report.warmup import warmup_curve
from pywebbench.run.rows import cell_flags
from pywebbench.store import Iteration, Replicate


def test_an_inconsistent_cell_says_where_its_processes_settled() -> None:
    notes = flag_notes(
        {"inconsistent": True, "modes": [[2992.0, 2], [1162.0, 1]], "classes": {"warm-up": 3}}
    )
    assert notes == ["inconsistent: 2 of 3 processes at ~2,990, 1 at ~1,160"]
    assert "settled at different levels" in flag_help(notes[0])
    assert [k for k, _ in legend(notes)] == ["inconsistent"]


def test_classes_are_a_note_only_when_some_replicate_did_not_settle_at_its_best() -> None:
    assert flag_notes({"classes": {"flat": 1, "warm-up": 2}}) == []
    notes = flag_notes({"classes": {"no steady state": 1, "warm-up": 2}})
    assert notes == ["classes (1 no steady state, 2 warm-up)"]
    assert "Barrett" in flag_help(notes[0])


def _iteration(rep: int, rps: float) -> Iteration:
    return Iteration(
        id=None, cell_id=1, replicate=rep, kind="measured", idx=0, started_at="",
        duration_s=3.0, requests=int(rps * 3), errors=0, non_2xx=0, timeouts=0, rps=rps,
    )  # fmt: skip


def test_cell_flags_store_the_classes_and_the_modes() -> None:
    reps = [
        Replicate(None, 1, k, "ok", "", warmup_class=c)
        for k, c in enumerate(["warm-up", "no steady state", "warm-up"])
    ]
    its = [_iteration(k, rps) for k, rps in enumerate([2940.0, 1162.0, 3044.0])]
    flags = cell_flags(reps, its)
    assert flags["classes"] == {"no steady state": 1, "warm-up": 2}
    assert flags["inconsistent"] is True and flags["modes"] == [[2992.0, 2], [1162.0, 1]]
    consistent = cell_flags(reps, [_iteration(k, 3000.0 + k) for k in range(3)])
    assert consistent["inconsistent"] is False and "modes" not in consistent
    assert flags["classification"] == "bad inconsistent"


def test_a_capped_warmup_marks_the_cell_not_steady_only_if_its_class_is_not_steady() -> None:
    """The class of a capped replicate is judged with its measured series (the rule holding at
    its end, warmup_class.classify): one that settled does not mark the cell, one with no
    steady state or no class does."""
    its = [_iteration(k, 3000.0 + k) for k in range(3)]

    def reps(last_class: str | None) -> list[Replicate]:
        return [
            Replicate(None, 1, 0, "ok", "", warmup_end="steady", warmup_class="flat"),
            Replicate(None, 1, 1, "ok", "", warmup_end="steady", warmup_class="flat"),
            Replicate(None, 1, 2, "ok", "", warmup_end="cap", warmup_class=last_class),
        ]

    assert cell_flags(reps("warm-up"), its)["not_steady"] is False
    assert cell_flags(reps("no steady state"), its)["not_steady"] is True
    assert cell_flags(reps(None), its)["not_steady"] is True
    assert flag_notes(cell_flags(reps(None), its))[0] == "not steady (cap)"


def test_the_warmup_figure_names_each_replicates_class() -> None:
    stack = StackView(
        key="pypy3.9/gunicorn-gthread/flask", label="pypy3.9 · gunicorn-gthread · flask",
        interpreter="pypy3.9", interpreter_version="7.3", interpreter_build="", server="g",
        interface="wsgi", framework="flask", workers=1, threads=4,
    )  # fmt: skip
    point = PointView(
        stack_key=stack.key, workload="cpu", load_point="c64", load_model="closed",
        connections=64, rate=None,
    )  # fmt: skip
    point.warmups = [
        WarmupCurve(0, "steady", 6.0, 3.0, [(0.25, 800.0), (6.0, 2900.0)], [(7.0, 2950.0)],
                    warmup_class="warm-up"),
        WarmupCurve(1, "cap", 15.0, None, [(0.25, 800.0), (15.0, 1300.0)], [(16.0, 1400.0)],
                    warmup_class="no steady state", unsettled=True),
        WarmupCurve(2, "cap", 15.0, None, [(0.25, 800.0), (15.0, 2900.0)], [(16.0, 2950.0)],
                    warmup_class="warm-up"),
    ]  # fmt: skip
    view = ReportView(title="t", generated_at="", pywebbench_version="", stacks={stack.key: stack})
    figure = point_warmup_figure(view, point)
    assert figure is not None
    names = {t["name"] for t in figure["data"] if t.get("showlegend")}
    assert names == {
        "replicate 1: warm-up · steady from 3.00 s",
        "replicate 2: no steady state · not steady (cap)",
        "replicate 3: warm-up · capped, settled when measured",
    }


def test_the_manifest_names_the_deep_mode_and_its_length() -> None:
    load = {"warmup": "deep", "deep_s": 120.0, "steady_window_s": 2.0, "jit_min_requests": 1}
    manifest = dict(steady_manifest({"load": load}))
    assert manifest["warm-up"].startswith("deep") and manifest["deep_s"] == "120.0"
    assert dict(steady_manifest({"load": {"warmup": "fixed"}}))["warm-up"] == "fixed"


def test_a_capped_replicate_is_unsettled_by_its_class_in_stores_that_judged_the_cap() -> None:
    """Since a capped warm-up is judged again, its class says whether it settled; a store
    written before (no ``classification`` in the cell's flags) meant any cap."""
    settled = Replicate(None, 1, 0, "ok", "", warmup_end="cap", warmup_class="warm-up")
    cold = Replicate(None, 1, 1, "ok", "", warmup_end="cap", warmup_class="no steady state")
    assert not warmup_curve(0, settled, []).unsettled
    assert warmup_curve(1, cold, []).unsettled
    assert warmup_curve(0, settled, [], cap_judged=False).unsettled
    steady = Replicate(None, 1, 2, "ok", "", warmup_end="steady", warmup_class="no steady state")
    assert not warmup_curve(2, steady, [], cap_judged=False).unsettled


def test_growth_below_pypys_collection_floor_is_uncollected_not_a_leak() -> None:
    """A replicate whose leak test found growth under PyPy's collection floor
    (analysis.steady.leak's ``collector_floor``) marks its cell ``uncollected``, with its own
    note and legend; one that leaks still marks it ``leak``."""
    its = [_iteration(k, 3000.0) for k in range(2)]

    def rep(k: int, leak: dict[str, object]) -> Replicate:
        return Replicate(None, 1, k, "ok", "", leak_json=json.dumps(leak))

    below = {"leaking": False, "bytes_per_1k": 5.7e6, "uncollected": True}
    flags = cell_flags([rep(0, below), rep(1, below)], its)
    assert flags["leak"] is False and flags["uncollected"] is True
    notes = flag_notes(flags)
    assert notes == ["uncollected"] and "installed PyPy reported" in flag_help("uncollected")
    leaking = {"leaking": True, "bytes_per_1k": 5.7e6}
    both = cell_flags([rep(0, leaking), rep(1, leaking)], its)
    assert both["leak"] is True and "uncollected" not in both
    assert flag_notes(both)[0].startswith("leak (")


def test_processes_stopped_at_their_memory_share_below_the_floor_are_no_leak() -> None:
    """Processes of an interleaved group stopped at their memory budget (failed replicates,
    their ``leak_json`` naming the stop) mark the cell: ``memory share`` with how many, when
    each was below its collector's floor (PyPy's heap on a machine shared among too many
    processes), ``leak`` when one had passed it."""
    its = [_iteration(k, 3000.0) for k in range(2)]
    kept = {"leaking": False, "bytes_per_1k": 1e3}

    def rep(k: int, status: str, leak: dict[str, object]) -> Replicate:
        return Replicate(None, 1, k, status, "", leak_json=json.dumps(leak))

    share = {"leaking": False, "uncollected": True, "over_share": True, "stopped": "memory budget"}
    flags = cell_flags([rep(0, "ok", kept), rep(1, "failed", share), rep(2, "failed", share)], its)
    assert flags["leak"] is False and flags["over_share"] == 2 and flags["uncollected"] is True
    notes = flag_notes(flags)
    assert notes == ["uncollected", "memory share (2 stopped)"]
    assert "not a leak" in flag_help(notes[1])
    passed = {"leaking": True, "stopped": "memory budget"}
    both = [rep(0, "ok", kept), rep(1, "failed", passed), rep(2, "failed", share)]
    leaked = cell_flags(both, its)
    assert leaked["leak"] is True and "over_share" not in leaked
    assert "over_share" not in cell_flags([rep(0, "ok", kept), rep(1, "ok", kept)], its)
