"""Small statistics shared by the runner and the reports.

Medians with bootstrap 95% confidence intervals (percentile bootstrap, fixed seed so a report
is reproducible) and the coefficient of variation. Steady state, drift and leaks are in
:mod:`pywebbench.steady`. Pure Python: the samples are small (replicates x iterations).
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
    """:class:`Summary` of ``values`` (NaNs for an empty sequence)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not vals:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan)
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
