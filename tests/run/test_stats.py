"""pywebbench.stats: medians and bootstrap CIs."""

from __future__ import annotations

import math

from pywebbench.stats import (
    bootstrap_ci,
    cv,
    median,
    summarize,
)


def test_median_and_cv() -> None:
    assert median([3, 1, 2]) == 2
    assert math.isnan(median([]))
    assert math.isnan(cv([5]))
    assert abs(cv([9, 11]) - (math.sqrt(2) / 10)) < 1e-9


def test_bootstrap_ci_brackets_the_median_and_is_reproducible() -> None:
    values = [100, 102, 98, 101, 99, 103, 97]
    lo, hi = bootstrap_ci(values)
    assert lo <= median(values) <= hi
    assert 97 <= lo and hi <= 103
    assert bootstrap_ci(values) == (lo, hi)  # fixed seed
    assert all(math.isnan(x) for x in bootstrap_ci([5.0]))  # one value: no interval
    s = summarize(values)
    assert s.n == 7 and s.median == 100 and s.min == 97 and s.max == 103
    assert 0 < s.ci_halfwidth_rel < 0.05
    assert summarize([]).n == 0
