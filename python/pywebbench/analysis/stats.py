"""Small statistics shared by the runner and the reports.

Medians with 95% confidence intervals, and the coefficient of variation. The interval's
method depends on how many values there are (docs/steady-state.md, "Confidence intervals"):

- fewer than :data:`BOOTSTRAP_MIN` values: Student's t interval on the log scale (of the
  geometric mean), so it is never below zero. A percentile bootstrap undercovers badly on so
  few values: on two it returns their range, which holds the true centre only half the time,
  yet was printed as a 95% interval. The t interval on the per-replicate figures is the one
  Kalibera & Jones (ISMM 2013) recommend for a handful of process runs; it is wide on 2
  values (12.7 standard errors) because 2 values say little.
- from :data:`BOOTSTRAP_MIN` values on: the percentile bootstrap of the median (fixed seed,
  so a report is reproducible), which needs no normality.

Steady state, drift and leaks are in :mod:`pywebbench.analysis.steady`. The samples
are small (replicates x iterations); the t distribution comes from scipy.stats.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def median(values: Sequence[float]) -> float:
    """The median; NaN for an empty sequence."""
    return statistics.median(values) if values else math.nan


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (sample stdev / mean); NaN with fewer than 2 values or mean 0."""
    if len(values) < 2:
        return math.nan
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else math.nan


#: Values needed before a CI is a percentile bootstrap of the median; below it, Student's t.
BOOTSTRAP_MIN = 10


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom
    (``df`` may be fractional, as Welch's is), from :data:`scipy.stats.t`."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    import scipy.stats  # ~0.6 s to import: only where an interval is computed

    return float(scipy.stats.t.ppf(p, df))


def t_interval(values: Sequence[float], *, level: float = 0.95) -> tuple[float, float]:
    """Student's t confidence interval of the geometric mean, computed on the log scale.

    ``exp(mean(log x) +- t * sd(log x) / sqrt(n))``: the interval of a positive figure
    (requests/s, a knee) is positive and multiplicative, as ``compare``'s ratios are, so a
    wild replicate widens it without ever taking it below zero. (NaN, NaN) with fewer than
    two values, or when a value is not positive (it has no logarithm, and a figure of 0 is a
    failure, not a measurement).
    """
    n = len(values)
    if n < 2 or min(values) <= 0:
        return (math.nan, math.nan)
    logs = [math.log(v) for v in values]
    centre = statistics.fmean(logs)
    half = t_quantile(0.5 + level / 2.0, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return (math.exp(centre - half), math.exp(centre + half))


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float] = median,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``stat`` over ``values``.

    Fewer than two values give (NaN, NaN): there is no interval to speak of, and a
    zero-width one would look like certainty.
    """
    n = len(values)
    if n < 2:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    estimates = sorted(stat(rng.choices(values, k=n)) for _ in range(resamples))
    alpha = (1.0 - level) / 2.0
    lo = estimates[int(math.floor(alpha * (resamples - 1)))]
    hi = estimates[int(math.ceil((1.0 - alpha) * (resamples - 1)))]
    return (float(lo), float(hi))


@dataclass(frozen=True)
class Summary:
    """Median with its 95% CI (t on the log scale, or bootstrap) and the spread of a sample."""

    n: int
    median: float
    ci_low: float
    ci_high: float
    mean: float
    stdev: float
    cv: float
    min: float
    max: float

    @property
    def ci_halfwidth_rel(self) -> float:
        """Half the CI width relative to the median (0.05 = +-5%)."""
        return halfwidth_rel(self.ci_low, self.ci_high, self.median)


def halfwidth_rel(low: float, high: float, centre: float) -> float:
    """Half the width of ``low``..``high`` relative to ``centre`` (0.05 = +-5%); NaN without
    an interval or a centre. A log-scale interval is asymmetric: this is its mean half."""
    if not centre or math.isnan(centre):
        return math.nan
    return (high - low) / 2.0 / abs(centre)


def summarize(values: Sequence[float], *, level: float = 0.95, seed: int = 0) -> Summary:
    """:class:`Summary` of ``values`` (NaNs for an empty sequence).

    The CI is Student's t below :data:`BOOTSTRAP_MIN` values, else the bootstrap of the
    median; one value has none (NaN), not a zero-width one. Pass one value per independent
    unit (a replicate's figure, not its iterations pooled with the other replicates').
    """
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not vals:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan)
    if len(vals) < BOOTSTRAP_MIN:
        lo, hi = t_interval(vals, level=level)
    else:
        lo, hi = bootstrap_ci(vals, level=level, seed=seed)
    return Summary(
        n=len(vals),
        median=median(vals),
        ci_low=lo,
        ci_high=hi,
        mean=statistics.fmean(vals),
        stdev=statistics.stdev(vals) if len(vals) > 1 else 0.0,
        cv=cv(vals),
        min=min(vals),
        max=max(vals),
    )


def summarize_replicates(replicates: Sequence[Sequence[float]], *, level: float = 0.95) -> Summary:
    """:func:`summarize` of the replicates' figures, each the median of its iterations.

    The replicate (a fresh server process) is the independent unit: pooling the iterations
    of all replicates would count each process's iterations as independent evidence and
    narrow the interval below the spread between processes.
    """
    return summarize([median(r) for r in replicates if r], level=level)
