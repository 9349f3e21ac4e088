"""The ratio of two medians with a two-level bootstrap confidence interval.

Each side is a list of replicates (fresh server processes), each a list of iteration
values. One bootstrap resample draws the replicates with replacement, as units, then the
iterations of each drawn replicate with replacement, pools them and takes the median; the
ratio of the NEW and BASE medians of one resample is one bootstrap estimate. The percentile
interval of those estimates is the CI. Resampling replicates as units keeps the
between-process spread (the larger one: layout, placement, JIT state) in the interval.

The generator is seeded from the pair's name, so the same data give the same interval.
"""

from __future__ import annotations

import math
import random
import statistics
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

Replicates = Sequence[Sequence[float]]

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class RatioEstimate:
    """NEW / BASE of a median, with its bootstrap CI."""

    ratio: float
    low: float
    high: float
    base_median: float
    new_median: float

    @property
    def change(self) -> float:
        """The relative change (``ratio - 1``): +0.05 = 5% higher in NEW."""
        return self.ratio - 1.0


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
    """NEW / BASE median with a two-level bootstrap CI; None when a side has no value or a
    zero median."""
    base_reps = [list(r) for r in base if r]
    new_reps = [list(r) for r in new if r]
    if not base_reps or not new_reps:
        return None
    base_median = statistics.median(_pooled(base_reps))
    new_median = statistics.median(_pooled(new_reps))
    if base_median <= 0:
        return None
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
    return RatioEstimate(new_median / base_median, low, high, base_median, new_median)
