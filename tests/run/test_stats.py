"""pywebbench.stats: medians, bootstrap CIs, steady state, memory growth."""

from __future__ import annotations

import math

from pywebbench.stats import (
    bootstrap_ci,
    cv,
    median,
    memory_growth,
    steady_state_start,
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
    assert bootstrap_ci([5.0]) == (5.0, 5.0)
    s = summarize(values)
    assert s.n == 7 and s.median == 100 and s.min == 97 and s.max == 103
    assert 0 < s.ci_halfwidth_rel < 0.05
    assert summarize([]).n == 0


def test_steady_state_detects_jit_warmup() -> None:
    # PyPy-like warm-up measured here: 9.3k -> 13.2k -> 16.8k then flat.
    assert steady_state_start([9300, 13200, 16800, 16900, 16700]) == 2
    assert steady_state_start([6000, 6050, 5980]) == 0
    assert steady_state_start([1, 2, 4, 8, 16]) is None


def test_memory_growth() -> None:
    mb = 1024 * 1024
    climbing = [200 * mb, 400 * mb, 700 * mb, 1000 * mb, 1300 * mb]
    assert memory_growth(climbing).growing
    plateau = [30 * mb, 31 * mb, 31 * mb, 31 * mb, 31 * mb]
    assert not memory_growth(plateau).growing
    small = [20 * mb, 21 * mb, 22 * mb, 23 * mb]  # grows, but by less than 8 MB
    assert not memory_growth(small).growing
    assert not memory_growth([1.0]).growing
