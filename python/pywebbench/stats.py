"""Small statistics shared by the runner and the reports.

Medians with bootstrap 95% confidence intervals (percentile bootstrap, fixed seed so a report
is reproducible), the coefficient of variation, steady-state detection for warm-up curves, and
memory-growth detection. Pure Python: the samples are small (replicates x iterations).
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

    One value gives a zero-width interval at that value; none gives (NaN, NaN).
    """
    n = len(values)
    if n == 0:
        return (math.nan, math.nan)
    if n == 1:
        return (float(values[0]), float(values[0]))
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


def steady_state_start(values: Sequence[float], *, tolerance: float = 0.05) -> int | None:
    """First index from which every value stays within ``tolerance`` of the tail's median.

    Used on warm-up curves (requests/s per iteration or per second): 0 means steady from the
    start, ``k`` means the first ``k`` values were still warming up, None means no steady tail
    of at least two values (still drifting at the end).
    """
    n = len(values)
    if n < 2:
        return 0 if n == 1 else None
    for start in range(n - 1):
        tail = values[start:]
        mid = median(tail)
        if mid and all(abs(v - mid) <= tolerance * abs(mid) for v in tail):
            return start
    return None


@dataclass(frozen=True)
class Growth:
    """Result of :func:`memory_growth`."""

    growing: bool
    first: float
    last: float
    relative: float  # (last - first) / first
    rising_steps: float  # share of consecutive steps that rose


def memory_growth(
    values: Sequence[float],
    *,
    min_relative: float = 0.10,
    min_absolute: float = 8 * 1024 * 1024,
    min_rising: float = 0.7,
) -> Growth:
    """Whether a memory series (bytes, e.g. RSS at the end of each iteration) keeps growing.

    Growing means: at least 3 points, the last exceeds the first by ``min_relative`` and by
    ``min_absolute`` bytes, and at least ``min_rising`` of the steps rose. A server that
    allocates once and then plateaus is not flagged; one that climbs every iteration is
    (measured here: cpyext servers on PyPy reach 1-2.8 GB within 15 s of load).
    """
    vals = [float(v) for v in values if v is not None]
    if len(vals) < 2:
        first = vals[0] if vals else math.nan
        return Growth(False, first, first, 0.0, 0.0)
    first, last = vals[0], vals[-1]
    rel = (last - first) / first if first else math.inf
    steps = [b > a for a, b in zip(vals, vals[1:], strict=False)]
    rising = sum(steps) / len(steps)
    growing = (
        len(vals) >= 3
        and rel >= min_relative
        and (last - first) >= min_absolute
        and rising >= min_rising
    )
    return Growth(growing, first, last, rel, rising)
