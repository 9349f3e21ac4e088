"""The gate's rule syntax and the bootstrap's determinism (pure functions)."""

from __future__ import annotations

import pytest
from pywebbench.compare.bootstrap import ratio_of_medians, seed_for
from pywebbench.compare.gate import GateSyntaxError, parse_rule, parse_rules
from pywebbench.compare.verdict import FASTER, SAME, SLOWER, throughput_verdict


def test_rules_parse() -> None:
    assert parse_rules(["slower>5%,p99>10%", "errors>0", "errors>0.5%", "memory>20%"]) == [
        parse_rule("slower>5%"),
        parse_rule("p99>10%"),
        parse_rule("errors>0"),
        parse_rule("errors>0.5%"),
        parse_rule("memory>20%"),
    ]
    rule = parse_rule(" Slower > 2.5% ")
    assert (rule.metric, rule.limit, rule.percent) == ("slower", 0.025, True)
    assert parse_rule("errors>3").limit == 3 and not parse_rule("errors>3").percent
    for bad in ("slower", "slower>", "slower>5%%", "p99<10%", "speed>5%", "p50>10", ">5%"):
        with pytest.raises(GateSyntaxError):
            parse_rule(bad)


def test_bootstrap_is_seeded_and_resamples_replicates() -> None:
    base = [[100.0, 101.0], [90.0, 91.0], [110.0, 109.0]]
    new = [[80.0, 81.0], [72.0, 73.0], [88.0, 87.0]]
    a = ratio_of_medians(base, new, seed=seed_for("x"))
    b = ratio_of_medians(base, new, seed=seed_for("x"))
    assert a == b and a is not None
    assert a.ratio == pytest.approx(80.5 / 100.5)
    assert a.low <= a.ratio <= a.high
    # The spread between replicates (~10%) is in the interval, not only the tiny spread
    # within one (~1%).
    assert a.high - a.low > 0.1
    assert ratio_of_medians([], new, seed=1) is None


def test_verdict_needs_the_interval_to_exclude_one_and_a_minimum_change() -> None:
    est = ratio_of_medians([[100.0] * 3] * 3, [[80.0] * 3] * 3, seed=1)
    assert throughput_verdict(est, 0.02) == SLOWER
    est = ratio_of_medians([[100.0] * 3] * 3, [[130.0] * 3] * 3, seed=1)
    assert throughput_verdict(est, 0.02) == FASTER
    est = ratio_of_medians([[100.0] * 3] * 3, [[101.0] * 3] * 3, seed=1)
    assert throughput_verdict(est, 0.02) == SAME  # excludes 1, but under the minimum change
    est = ratio_of_medians([[100.0, 60.0], [140.0, 90.0]], [[95.0, 70.0], [120.0, 80.0]], seed=1)
    assert throughput_verdict(est, 0.02) == SAME
