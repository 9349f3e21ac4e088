"""pywebbench.analysis.stats: medians and their CIs (Student's t on few values, bootstrap on
many)."""

from __future__ import annotations

import math
import random
import statistics

from pywebbench.analysis.stats import (
    bootstrap_ci,
    cv,
    median,
    summarize,
    summarize_replicates,
    t_interval,
    t_quantile,
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
    s = summarize(values)  # 7 values: Student's t
    assert s.n == 7 and s.median == 100 and s.min == 97 and s.max == 103
    assert 0 < s.ci_halfwidth_rel < 0.05
    assert summarize([]).n == 0


def test_t_quantile_matches_the_tables() -> None:
    # Student's t, two-sided 95%: the values every textbook table prints
    for df, expected in ((1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (30, 2.042)):
        assert abs(t_quantile(0.975, df) - expected) < 5e-4, df
    assert abs(t_quantile(0.995, 1) - 63.657) < 5e-3
    assert abs(t_quantile(0.975, 1e6) - 1.95996) < 1e-4  # the normal limit
    assert abs(t_quantile(0.025, 3) + t_quantile(0.975, 3)) < 1e-12  # symmetric
    assert 3.182 < t_quantile(0.975, 2.5) < 4.303  # Welch's fractional df: in between


def test_two_values_get_a_t_interval_not_their_range() -> None:
    s = summarize([2931.0, 3008.0])
    logs = [math.log(2931.0), math.log(3008.0)]
    half = 12.7062 * statistics.stdev(logs) / math.sqrt(2)  # on the log scale
    centre = statistics.fmean(logs)
    assert abs(s.ci_low - math.exp(centre - half)) < 0.5
    assert abs(s.ci_high - math.exp(centre + half)) < 0.5
    assert s.ci_low < 2931.0 - 400 and s.ci_high > 3008.0 + 400  # far wider than the range


def test_no_interval_of_wild_replicates_goes_below_zero() -> None:
    """The replicates issue 22 found: a PyPy cell that read 2,775 req/s between 0.5x and 2x
    itself printed a CI of -546-5,091. On the log scale the interval stays positive and
    still holds every replicate's order of magnitude."""
    for values in ([1200.0, 2775.0, 4410.0], [3143.0, 150.0], [70299.0, 39334.0, 92945.0, 5.0]):
        s = summarize(values)
        assert 0 < s.ci_low < s.median < s.ci_high, values
    assert all(math.isnan(x) for x in t_interval([0.0, 100.0, 200.0]))  # no log of 0


def test_small_sample_intervals_cover_95_percent() -> None:
    """What the report claims: a 95% CI from 2-3 replicates holds the true centre about 95%
    of the time. The percentile bootstrap it replaced held it about half the time on 2.

    Designed false-failure rate: 0. A seeded simulation, no measurement: the same counts on
    every machine. (Unseeded, the band 0.93-0.97 is 4.1 binomial sd, 0.0049 at 2,000
    trials, either side of 0.95: about 4 failures in 100,000.)"""
    rng = random.Random(7)
    trials = 2000
    for n in (2, 3, 5):
        hits = 0
        for _ in range(trials):
            s = summarize([rng.gauss(1000.0, 50.0) for _ in range(n)])
            hits += s.ci_low <= 1000.0 <= s.ci_high
        assert 0.93 <= hits / trials <= 0.97, (n, hits / trials)
    boot_hits = 0
    for _ in range(400):
        lo, hi = bootstrap_ci([rng.gauss(1000.0, 50.0) for _ in range(2)], resamples=200)
        boot_hits += lo <= 1000.0 <= hi
    assert boot_hits / 400 < 0.65


def test_replicates_are_the_unit_of_the_interval() -> None:
    # two processes, three iterations each: 2 figures, not 6 values
    s = summarize_replicates([[100.0, 101.0, 99.0], [110.0, 111.0, 109.0], []])
    assert s.n == 2 and s.median == 105.0
    assert s.ci_low < 60.0 and s.ci_high > 150.0  # t with 1 df: the honest, wide answer
    many = summarize([float(v) for v in range(100, 120)])
    assert many.n == 20 and 104 < many.ci_low < many.median < many.ci_high < 116  # bootstrap
