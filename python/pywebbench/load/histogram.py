"""`Histogram`: a latency histogram as stored in results (HdrHistogram V2+DEFLATE, base64).

All arithmetic is done by the Rust engine's HdrHistogram (``pywebbench._engine``), never
re-implemented in Python. Values are microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from pywebbench import _engine


class HistSummary(BaseModel):
    """Summary figures of a histogram (microseconds; ``count`` is a count): the engine's
    ``hist::Summary``, in results and from :meth:`Histogram.summary`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int
    min: int
    max: int
    mean: float
    stdev: float
    p50: int
    p90: int
    p99: int
    p999: int
    p9999: int


@dataclass(frozen=True)
class Histogram:
    """An encoded HdrHistogram (1 us .. 1 h, 3 significant digits)."""

    encoded: str

    @classmethod
    def from_values(cls, values_us: Iterable[int]) -> Histogram:
        """Record values (microseconds) into a new histogram."""
        return cls(_engine.hist_from_values([int(v) for v in values_us]))

    @classmethod
    def merge_all(cls, items: Iterable[Histogram | str]) -> Histogram:
        """One histogram holding every value of ``items``."""
        enc = [i.encoded if isinstance(i, Histogram) else i for i in items]
        return cls(_engine.hist_merge(enc))

    def merge(self, *others: Histogram) -> Histogram:
        """This histogram plus ``others``."""
        return Histogram.merge_all([self, *others])

    def quantile(self, q: float) -> float:
        """Value (us) at quantile ``q`` in 0..1 (0.99 = p99); 0 when empty."""
        return self.quantiles([q])[0]

    def quantiles(self, qs: Sequence[float]) -> list[float]:
        """Values (us) at each quantile."""
        for q in qs:
            if not 0.0 <= q <= 1.0:
                raise ValueError(f"quantile: {q} is not between 0 and 1")
        return list(_engine.hist_quantiles(self.encoded, list(qs)))

    def summary(self) -> HistSummary:
        """count, min, max, mean, stdev and p50 .. p99.99."""
        return HistSummary.model_validate(_engine.hist_summary(self.encoded))

    @property
    def count(self) -> int:
        """Number of recorded values."""
        return self.summary().count

    def spectrum(self, ticks_per_half_distance: int = 5) -> list[tuple[int, float, int]]:
        """Percentile spectrum for plots: ``(value_us, quantile, count_since_last)`` rows,
        denser towards the tail (HdrHistogram's percentile iteration)."""
        return [
            (int(v), float(q), int(c))
            for v, q, c in _engine.hist_spectrum(self.encoded, ticks_per_half_distance)
        ]
