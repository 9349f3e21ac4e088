"""``ab --instructions``: how both sides' counts are shown and gated (the end-to-end count on
real servers is in test_ab_cmd.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

from pywebbench.ab.render import fmt_instructions
from pywebbench.ab.session import AbOutcome
from pywebbench.compare.gate import instructions_violation, parse_rules
from pywebbench.report.ab import instructions_change


def _outcome(base: dict[str, Any] | None, change: dict[str, Any] | None) -> AbOutcome:
    sides = SimpleNamespace(base=SimpleNamespace(instructions=base))
    sides.change = SimpleNamespace(instructions=change)
    out = cast(AbOutcome, sides)
    per = [d.get("per_request") if d else None for d in (base, change)]
    sides.instructions_ratio = per[1] / per[0] if per[0] and per[1] else None
    return out


def test_both_counts_and_their_change_are_shown() -> None:
    o = _outcome({"per_request": 474_767.0}, {"per_request": 476_937.0})
    assert fmt_instructions(o) == "+0.46% (474,767 -> 476,937 per request)"


def test_a_side_that_was_not_counted_says_why() -> None:
    o = _outcome({"per_request": 474_767.0}, {"error": "the server did not start under valgrind"})
    assert fmt_instructions(o) == ("not counted: CHANGE: the server did not start under valgrind")
    assert fmt_instructions(_outcome(None, None)) == "–"


def test_the_rule_trips_above_its_limit_only() -> None:
    (rule,) = parse_rules(["instructions>1%"])
    assert instructions_violation(rule, (1.009, 1.009, 1.009)) is None
    assert instructions_violation(rule, (1.02, 1.02, 1.02)) == "instructions/request +2.00%"
    assert instructions_violation(rule, None) is None
    # several counts a side: every NEW count above every BASE count by more than the limit
    assert instructions_violation(rule, (1.03, 1.005, 1.04)) is None
    assert "counts +1.50% .. +4.00%" in str(instructions_violation(rule, (1.03, 1.015, 1.04)))


def test_the_report_row_reads_the_stored_document() -> None:
    doc = {"instructions": {"ratio": 1.0046, "base": {}, "change": {}}}
    assert instructions_change(json.dumps(doc)) == "+0.46%"
    failed = {
        "instructions": {"ratio": None, "base": {"per_request": 1.0}, "change": {"error": "x"}}
    }
    assert instructions_change(json.dumps(failed)) == "not counted (CHANGE: x)"
    assert instructions_change(json.dumps({})) == "–" and instructions_change(None) == "–"
