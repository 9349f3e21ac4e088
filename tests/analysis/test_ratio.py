"""Plain ratios of figures (pywebbench.analysis.ratio): no interval, None where there is no
ratio to give."""

from __future__ import annotations

import pytest
from pywebbench.analysis.ratio import RatioEstimate, count_span, ratio, spread


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


def test_the_count_span_is_the_median_ratio_between_the_extreme_ratios() -> None:
    """Instructions per request: NEW/BASE of the medians, and of any NEW count to any BASE
    count the lowest and the highest (what an ``instructions>X%`` rule judges)."""
    ratio_, low, high = count_span([100.0, 102.0, 101.0], [110.0, 111.0])
    assert ratio_ == pytest.approx(110.5 / 101.0)
    assert low == pytest.approx(110.0 / 102.0) and high == pytest.approx(111.0 / 100.0)


def test_the_inverse_of_an_estimate_swaps_its_bounds() -> None:
    """Instructions per request into requests per instruction: below 1 then reads slower."""
    est = RatioEstimate(ratio=1.25, low=1.2, high=1.3, base_median=200.0, new_median=250.0)
    inv = est.inverse()
    assert inv.ratio == pytest.approx(0.8)
    assert (inv.low, inv.high) == (pytest.approx(1 / 1.3), pytest.approx(1 / 1.2))
    assert (inv.base_median, inv.new_median) == (pytest.approx(1 / 200), pytest.approx(1 / 250))
