"""Plain ratios of figures (pywebbench.analysis.ratio): no interval, None where there is no
ratio to give."""

from __future__ import annotations

from pywebbench.analysis.ratio import ratio, spread


def test_a_ratio_needs_both_figures_and_a_positive_denominator() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(0.0, 2.0) == 0.0
    assert ratio(None, 2.0) is None
    assert ratio(3.0, None) is None
    assert ratio(3.0, 0.0) is None
    assert ratio(3.0, -1.0) is None


def test_the_spread_is_the_largest_over_the_smallest_of_two_or_more() -> None:
    assert spread([100.0, 101.0, 100.5]) == 1.01
    assert spread([7.0, 7.0]) == 1.0
    assert spread([7.0]) is None
    assert spread([]) is None
    assert spread([0.0, 5.0]) is None
