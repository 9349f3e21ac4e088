"""The ratio of two medians (NEW / BASE) with its confidence interval.

Each side is a list of replicates (fresh server processes), each a list of iteration values.
The replicate is the independent unit: the spread between server processes (layout,
placement, JIT state) is the larger one, so the interval is built on replicates, and how it
is built depends on how many there are (docs/steady-state.md, "Confidence intervals"):

- fewer than :data:`pywebbench.analysis.stats.BOOTSTRAP_MIN` replicates on a side: Welch's t
  interval of the difference of the mean log replicate figures (a replicate's figure is the
  median of its iterations), exponentiated: a CI of the ratio that does not assume equal
  spreads. A percentile bootstrap on 2-3 replicates returns little more than their range and
  undercovers (2 replicates a side: about half the time); the t interval does not.
- from :data:`~pywebbench.analysis.stats.BOOTSTRAP_MIN` on: a two-level bootstrap. One resample
  draws the replicates with replacement, as units, then the iterations of each drawn replicate,
  pools them and takes the median; the ratio of NEW and BASE medians of one resample is one
  estimate; the percentile interval of the estimates is the CI. The generator is seeded
  from the pair's name, so the same data give the same interval.

One replicate on a side gives no interval (NaN bounds): nothing measures the spread between
processes, and a verdict must not rest on it.
"""

from __future__ import annotations

import math
import random
import statistics
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from pywebbench.analysis.stats import BOOTSTRAP_MIN, t_quantile

Replicates = Sequence[Sequence[float]]

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class RatioEstimate:
    """NEW / BASE of a median, with its CI (NaN bounds: too few replicates for one)."""

    ratio: float
    low: float
    high: float
    base_median: float
    new_median: float

    @property
    def change(self) -> float:
        """The relative change (``ratio - 1``): +0.05 = 5% higher in NEW."""
        return self.ratio - 1.0

    def inverse(self) -> RatioEstimate:
        """The ratio of the inverse figure (instructions per request into requests per
        instruction): every value inverted, the bounds swapped."""
        return RatioEstimate(
            ratio=1.0 / self.ratio,
            low=1.0 / self.high,
            high=1.0 / self.low,
            base_median=1.0 / self.base_median,
            new_median=1.0 / self.new_median,
        )


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None when either is missing or ``b`` is not positive (a ratio of two
    figures, no interval: a ranking's vs-best, an axis pair's share)."""
    if a is None or b is None or b <= 0:
        return None
    return a / b


def count_span(base: Sequence[float], new: Sequence[float]) -> tuple[float, float, float]:
    """NEW/BASE of instructions per request: the ratio of the median counts, and the lowest
    and highest ratio of any NEW count to any BASE count (what an ``instructions`` rule
    judges: ``compare``'s gate and ``ab``'s)."""
    return (
        statistics.median(new) / statistics.median(base),
        min(new) / max(base),
        max(new) / min(base),
    )


def spread(values: Sequence[float]) -> float | None:
    """The largest of ``values`` over the smallest (1.0: all equal); None with fewer than
    two values or a smallest not positive (instruction counts of one figure)."""
    if len(values) < 2 or min(values) <= 0:
        return None
    return max(values) / min(values)


def seed_for(name: str) -> int:
    """A fixed seed derived from a name (CRC-32), so verdicts are reproducible."""
    return zlib.crc32(name.encode("utf-8"))


def _pooled(replicates: Replicates) -> list[float]:
    return [v for rep in replicates for v in rep]


def _resample_median(replicates: Replicates, rng: random.Random) -> float:
    drawn = rng.choices(replicates, k=len(replicates))
    pooled = [v for rep in drawn for v in rng.choices(rep, k=len(rep))]
    return statistics.median(pooled)


def ratio_of_medians(
    base: Replicates,
    new: Replicates,
    *,
    seed: int,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> RatioEstimate | None:
    """NEW / BASE median with its CI (see the module docstring); None when a side has no
    value or a zero median."""
    base_reps = [list(r) for r in base if r]
    new_reps = [list(r) for r in new if r]
    if not base_reps or not new_reps:
        return None
    base_median = statistics.median(_pooled(base_reps))
    new_median = statistics.median(_pooled(new_reps))
    if base_median <= 0:
        return None
    ratio = new_median / base_median
    if min(len(base_reps), len(new_reps)) < BOOTSTRAP_MIN:
        low, high = _welch_log_interval(base_reps, new_reps, level)
        return RatioEstimate(ratio, low, high, base_median, new_median)
    rng = random.Random(seed)
    estimates = []
    for _ in range(resamples):
        b = _resample_median(base_reps, rng)
        n = _resample_median(new_reps, rng)
        if b > 0:
            estimates.append(n / b)
    if not estimates:
        return None
    estimates.sort()
    alpha = (1.0 - level) / 2.0
    last = len(estimates) - 1
    low = estimates[int(math.floor(alpha * last))]
    high = estimates[int(math.ceil((1.0 - alpha) * last))]
    return RatioEstimate(ratio, low, high, base_median, new_median)


def _welch_log_interval(base: Replicates, new: Replicates, level: float) -> tuple[float, float]:
    """exp of Welch's t interval of mean(log NEW figures) - mean(log BASE figures)."""
    if min(len(base), len(new)) < 2:
        return (math.nan, math.nan)
    sides = []
    for reps in (base, new):
        figures = [statistics.median(r) for r in reps]
        if min(figures) <= 0:
            return (math.nan, math.nan)
        logs = [math.log(f) for f in figures]
        sides.append((statistics.fmean(logs), statistics.variance(logs) / len(logs), len(logs)))
    (mb, vb, nb), (mn, vn, nn) = sides
    diff, se2 = mn - mb, vb + vn
    if se2 == 0.0:  # identical replicates on both sides: no spread to widen the ratio by
        return (math.exp(diff), math.exp(diff))
    df = se2 * se2 / (vb * vb / (nb - 1) + vn * vn / (nn - 1))  # Welch-Satterthwaite
    half = t_quantile(0.5 + level / 2.0, df) * math.sqrt(se2)
    return (math.exp(diff - half), math.exp(diff + half))
