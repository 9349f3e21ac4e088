"""Small statistics shared by the runner and the reports.

Medians with 95% confidence intervals, and the coefficient of variation. The interval's
method depends on how many values there are (docs/steady-state.md, "Confidence intervals"):

- fewer than :data:`BOOTSTRAP_MIN` values: Student's t interval of the mean. A percentile
  bootstrap undercovers badly on so few values: on two it returns their range, which holds
  the true centre only half the time, yet was printed as a 95% interval. The t interval on
  the per-replicate figures is the one Kalibera & Jones (ISMM 2013) recommend for a handful
  of process runs; it is wide on 2 values (12.7 standard errors) because 2 values say little.
- from :data:`BOOTSTRAP_MIN` values on: the percentile bootstrap of the median (fixed seed,
  so a report is reproducible), which needs no normality.

Steady state, drift and leaks are in :mod:`pywebbench.steady`. Pure Python: the samples
are small (replicates x iterations).
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
    (``df`` may be fractional, as Welch's is). Bisection on the CDF: exact to 1e-9."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def _t_cdf(t: float, df: float) -> float:
    """P(T <= t) for t >= 0, through the regularized incomplete beta function."""
    x = df / (df + t * t)
    return 1.0 - 0.5 * _betainc(df / 2.0, 0.5, x)


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Lentz's continued fraction)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on the other side
        return 1.0 - _betainc(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    frac = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            frac *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(ln_front) * frac / a


def t_interval(values: Sequence[float], *, level: float = 0.95) -> tuple[float, float]:
    """Student's t confidence interval of the mean; (NaN, NaN) with fewer than two values."""
    n = len(values)
    if n < 2:
        return (math.nan, math.nan)
    mean = statistics.fmean(values)
    half = t_quantile(0.5 + level / 2.0, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return (mean - half, mean + half)


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
    """Median with its bootstrap CI and the spread of a small sample."""

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
        if not self.median or math.isnan(self.median):
            return math.nan
        return (self.ci_high - self.ci_low) / 2.0 / abs(self.median)


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
