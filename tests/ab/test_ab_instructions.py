"""``ab --instructions`` and ``--figure instructions``: how both sides' counts are estimated,
shown, judged and gated (the end-to-end count on real servers is in test_ab_cmd.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pywebbench.ab import session
from pywebbench.ab.render import counting_line, fmt_instructions, instructions_doc
from pywebbench.ab.session import FIGURE_INSTRUCTIONS, FIGURE_RPS, AbOptions, AbOutcome, AbSideRun
from pywebbench.ab.sides import SideStudy
from pywebbench.compare.gate import instructions_violation, parse_rules
from pywebbench.compare.verdict import SAME, SLOWER, throughput_verdict
from pywebbench.report.ab import instructions_change


def _outcome(
    base: list[dict[str, Any]], change: list[dict[str, Any]], figure: str = FIGURE_RPS
) -> AbOutcome:
    """An outcome with only what the instructions figures read: both sides' count documents
    and the options (no timed run)."""
    out = object.__new__(AbOutcome)
    out.base = AbSideRun(cast(SideStudy, None), [], [], instructions=base)
    out.change = AbSideRun(cast(SideStudy, None), [], [], instructions=change)
    out.options = AbOptions(figure=figure, instructions=True)
    out.stopped = session.STOPPED_BUDGET
    return out


def _counts(*per_request: float) -> list[dict[str, Any]]:
    return [{"per_request": x, "study_s": 5.0} for x in per_request]


def test_one_count_a_side_is_shown_without_an_interval() -> None:
    o = _outcome(_counts(474_767.0), _counts(476_937.0))
    assert fmt_instructions(o) == "+0.46% (474,767 -> 476,937 per request)"
    doc = instructions_doc(o)
    assert doc is not None
    json.dumps(doc, allow_nan=False)
    assert doc["ratio"] == pytest.approx(476_937 / 474_767)
    assert doc["ci_low"] is None and doc["ci_high"] is None  # JSON has no NaN


def test_several_counts_a_side_give_the_ratio_of_medians_and_welchs_interval() -> None:
    base = _counts(1_000_000, 1_002_000, 999_000, 1_001_000)
    change = _counts(1_031_000, 1_029_000, 1_030_500, 1_032_000)
    o = _outcome(base, change)
    est = o.instructions
    assert est is not None
    assert est.ratio == pytest.approx(1_030_750 / 1_000_500)
    # Welch on the logs, by hand: 3 and 3 degrees of freedom, nearly equal spreads
    logs_b = [math.log(d["per_request"]) for d in base]
    logs_c = [math.log(d["per_request"]) for d in change]
    diff = sum(logs_c) / 4 - sum(logs_b) / 4
    assert est.low < math.exp(diff) < est.high
    assert 1.025 < est.low and est.high < 1.037  # counts 0.1% apart: a narrow interval
    text = fmt_instructions(o)
    assert text.startswith("+3.0% [+") and "medians of 4 counts a side" in text
    assert counting_line(o) == (
        "instructions counted under valgrind on 4 fresh server processes a side, interval "
        "over them; 40 s"
    )


def test_the_instructions_figure_is_judged_as_requests_per_instruction() -> None:
    """More instructions per request read slower, the interval inverted; an A/A whose counts
    differ by their noise (0.1%) is no change, even though its interval may exclude 1."""
    slower = _outcome(
        _counts(1_000_000, 1_002_000, 999_000, 1_001_000),
        _counts(1_031_000, 1_029_000, 1_030_500, 1_032_000),
        FIGURE_INSTRUCTIONS,
    )
    judged = slower.judged
    assert judged is not None and slower.instructions is not None
    assert judged.ratio == pytest.approx(1 / slower.instructions.ratio)
    assert judged.high == pytest.approx(1 / slower.instructions.low)
    assert throughput_verdict(judged, 0.02) == SLOWER
    same = _outcome(
        _counts(1_000_000, 1_000_400, 999_800, 1_000_200),
        _counts(1_001_000, 1_001_300, 1_000_900, 1_001_200),
        FIGURE_INSTRUCTIONS,
    )
    assert throughput_verdict(same.judged, 0.02) == SAME


def test_a_side_that_was_not_counted_says_why_and_has_no_figure() -> None:
    o = _outcome(
        _counts(474_767.0), [{"error": "the server did not start under valgrind"}],
        FIGURE_INSTRUCTIONS,
    )  # fmt: skip
    assert fmt_instructions(o) == "not counted: CHANGE: the server did not start under valgrind"
    assert o.instructions is None and o.judged is None and o.instructions_span is None
    assert fmt_instructions(_outcome([], [])) == "–"
    assert counting_line(_outcome([], [])) is None


def test_the_rule_trips_when_every_change_count_is_above_every_base_count() -> None:
    (rule,) = parse_rules(["instructions>1%"])
    assert instructions_violation(rule, (1.009, 1.009, 1.009)) is None
    assert instructions_violation(rule, (1.02, 1.02, 1.02)) == "instructions/request +2.00%"
    assert instructions_violation(rule, None) is None
    # several counts a side: every NEW count above every BASE count by more than the limit
    assert instructions_violation(rule, (1.03, 1.005, 1.04)) is None
    assert "counts +1.50% .. +4.00%" in str(instructions_violation(rule, (1.03, 1.015, 1.04)))
    o = _outcome(_counts(100.0, 101.0), _counts(103.0, 104.0))
    assert o.instructions_span == pytest.approx((103.5 / 100.5, 103 / 101, 1.04))
    assert instructions_violation(rule, o.instructions_span) is not None


def test_the_report_row_reads_the_stored_document() -> None:
    doc = {"instructions": {"ratio": 1.0046, "base": [], "change": []}}
    assert instructions_change(json.dumps(doc)) == "+0.46%"
    doc["instructions"] |= {"ci_low": 1.0021, "ci_high": 1.0071}
    assert instructions_change(json.dumps(doc)) == "+0.46% [+0.21%, +0.71%]"
    failed = {
        "instructions": {"ratio": None, "base": [{"per_request": 1.0}], "change": [{"error": "x"}]}
    }
    assert instructions_change(json.dumps(failed)) == "not counted (CHANGE: x)"
    # a run stored before several counts a side: one document a side
    old = {"instructions": {"ratio": None, "base": {"per_request": 1.0}, "change": {"error": "x"}}}
    assert instructions_change(json.dumps(old)) == "not counted (CHANGE: x)"
    assert instructions_change(json.dumps({})) == "–" and instructions_change(None) == "–"


def test_one_count_on_a_side_gives_no_instructions_figure() -> None:
    """Ctrl-C in the counting can leave a side with one count: no interval, so no verdict
    from it (an interval of NaN would have read "no significant change" for +20%)."""
    o = _outcome(_counts(1_000_000, 1_001_000), _counts(1_200_000), FIGURE_INSTRUCTIONS)
    assert o.instructions is not None and o.instructions.ratio == pytest.approx(1.2 / 1.0005)
    assert o.judged is None and o.half_width is None
    assert fmt_instructions(o) == "+20% (1,000,500 -> 1,200,000 per request)"
    base, change = _counts(100.0, 101.0, 99.0), _counts(110.0, 111.0)
    assert "medians of 3 and 2 counts" in fmt_instructions(_outcome(base, change))


def _side(role: str) -> AbSideRun:
    study = SimpleNamespace(side=SimpleNamespace(role=role))
    return AbSideRun(cast(SideStudy, study), [], [])


def _count_with(
    results: Sequence[dict[str, Any] | BaseException],
    processes: int = 3,
    ci_width: float = 1e-9,
) -> tuple[list[AbSideRun], list[str], bool]:
    """count_sides over two sides whose counts come from ``results`` in turn; the sides, the
    roles in the order they were counted, and what count_sides returned."""
    order: list[str] = []
    left = iter(results)

    def fake(study: Any, env: Any, launch: Any, cpus: Any, agent: Any) -> dict[str, Any]:
        order.append(study.side.role)
        got = next(left)
        if isinstance(got, BaseException):
            raise got
        return got

    runs = [_side("base"), _side("change")]
    nothing: list[Any] = [None, None]  # env and launch: only the fake sees them
    options = AbOptions(instructions=True, ci_width=ci_width, processes=processes)
    done = session.count_sides(
        runs, nothing, nothing, [1], processes, lambda _: None, agent=cast(Any, None),
        enough=lambda: session.counted_enough(runs, options), count=fake,
    )  # fmt: skip
    return runs, order, done


def test_the_sides_are_counted_in_turn_until_a_count_fails_or_ctrl_c() -> None:
    runs, order, done = _count_with(_counts(1, 2, 3, 4, 5, 6))
    assert done and order == ["base", "change"] * 3
    assert [d["per_request"] for d in runs[0].instructions] == [1, 3, 5]
    assert [d["per_request"] for d in runs[1].instructions] == [2, 4, 6]
    # a failed count ends the counting: the ratio needs every count
    failed = {"error": "the server did not start under valgrind: x"}
    runs, order, done = _count_with([*_counts(1, 2), failed])
    assert done and order == ["base", "change", "base"]
    assert runs[0].counts is None and runs[1].counts == [2]
    # Ctrl-C: False, the counts made so far kept
    runs, order, done = _count_with([*_counts(1, 2, 3), KeyboardInterrupt()])
    assert not done and runs[0].counts == [1, 3] and runs[1].counts == [2]


def test_the_counting_stops_once_the_interval_is_as_narrow_as_asked() -> None:
    """Counts 0.1% apart give an interval within +-1% after two a side: the other two of
    --processes 4 are not counted, and the report says why; counts 5% apart go on to all 4."""
    close = _counts(1_000_000, 1_030_000, 1_001_000, 1_031_000, 1_000_500, 1_030_500)
    runs, order, done = _count_with(close, processes=4, ci_width=0.01)
    assert done and order == ["base", "change"] * 2
    assert runs[0].counts == [1_000_000, 1_001_000] and runs[1].counts == [1_030_000, 1_031_000]
    o = _outcome(runs[0].instructions, runs[1].instructions)
    o.options = AbOptions(instructions=True, ci_width=0.01, processes=4)
    line = counting_line(o)
    assert line == (
        "instructions counted under valgrind on 2 fresh server processes a side, interval "
        "over them (of --processes 4: the interval was within ±1.0%); 20 s"
    )
    o.stopped = session.STOPPED_INTERRUPTED  # Ctrl-C in the counting: no such claim
    assert "within" not in (counting_line(o) or "")
    spread = _counts(1_000_000, 1_000_000, 1_050_000, 1_050_000, 990_000, 995_000, 1e6, 1e6)
    runs, order, done = _count_with(spread, processes=4, ci_width=0.01)
    assert done and order == ["base", "change"] * 4
    # one count a side gives no interval: never enough, however wide the asked CI
    same = _counts(1, 1, 1, 1, 1, 1)
    runs, order, done = _count_with(same, processes=3, ci_width=0.9)
    assert done and order == ["base", "change"] * 2


def test_a_gate_on_the_instructions_figure_fails_without_it() -> None:
    """--figure instructions --fail-if slower>3%: a side that could not be counted trips the
    rule with the reason (a gate that asked for the counts does not pass without them)."""
    from pywebbench.commands.ab import _violations

    o = _outcome(_counts(1_000_000), [{"error": "the server did not start under valgrind"}],
                 FIGURE_INSTRUCTIONS)  # fmt: skip
    o.change.study = cast(SideStudy, SimpleNamespace(cell=SimpleNamespace(label="x")))
    o.p50 = o.p99 = None
    (violation,) = _violations(parse_rules(["slower>3%"]), o)
    assert violation.detail == (
        "no instructions figure: not counted: CHANGE: the server did not start under valgrind"
    )
    counted = _outcome(_counts(100.0, 100.1), _counts(105.0, 105.1), FIGURE_INSTRUCTIONS)
    counted.change.study = o.change.study
    counted.p50 = counted.p99 = None
    (violation,) = _violations(parse_rules(["slower>3%"]), counted)
    assert violation.detail.startswith("requests per instruction -4.8% (CI ")
