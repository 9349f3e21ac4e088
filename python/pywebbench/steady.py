"""Steady state: when a server has stopped warming up, whether it drifts while measured,
and whether its memory leaks. The method is explained in docs/steady-state.md.

- **Warm-up** (:class:`WarmupWatch`): the throughput of the warm-up load, in buckets of
  ``bucket_s``, is judged over a trailing window. The window is steady when neither its
  robust slope (Theil-Sen) nor the difference of its two halves' medians (a step, e.g. a
  saw-tooth's reset, can cancel a rise in the slope) moves throughput by more than
  ``max_drift`` *and* more than twice its standard error under the window's own noise
  (significant and relevant, as pyperf and asv judge a change), and its robust spread
  (1.4826 MAD / median) is at most ``max_spread``.
  A JIT compiles a code path only after it ran many times, and before that a window can look
  flat at interpreter speed (PyPy held ~300 req/s for 4 s, then jumped to 4,000): with
  ``min_requests`` no window is judged before that many requests were served.
  ``confirm`` consecutive windows, one bucket apart, must pass: one window can straddle a
  drop so that every robust statistic misses it, the next ones cannot. The steady state
  starts at the first bucket of the first of them. Warm-up ends there, or at the cap: "not
  steady" is a legitimate answer (Barrett et al., OOPSLA 2017: some VMs never reach one).
- **Drift** (:func:`drift`): a Mann-Kendall trend test over the measured per-second
  throughput, with the Theil-Sen slope as its size; drift is a significant trend that also
  moves throughput by more than ``max_drift`` across the measured span.
- **Leak** (:func:`leak`): the Theil-Sen slope of memory against requests served after the
  steady state, in bytes per 1,000 requests, with Sen's distribution-free confidence
  interval. A leak is a slope whose whole interval lies above a floor: a heap that
  grows during warm-up and then plateaus is not one.

Pure Python and small inputs (tens to a few hundred points).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

#: Normal quantile for two-sided 95% (Sen's interval) and the Mann-Kendall level used.
Z95 = 1.959963984540054
TREND_ALPHA = 0.01


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median of all pairwise slopes (robust to outliers); NaN with < 2 distinct xs."""
    slopes = _pair_slopes(xs, ys)
    return statistics.median(slopes) if slopes else math.nan


def _pair_slopes(xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    n = len(xs)
    return sorted(
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(n)
        for j in range(i + 1, n)
        if xs[j] != xs[i]
    )


def robust_spread(values: Sequence[float]) -> float:
    """1.4826 * MAD / median: a robust coefficient of variation (NaN if the median is 0)."""
    if not values:
        return math.nan
    mid = statistics.median(values)
    if not mid:
        return math.nan
    mad = statistics.median(abs(v - mid) for v in values)
    return 1.4826 * mad / abs(mid)


def mann_kendall(values: Sequence[float]) -> tuple[float, float]:
    """Mann-Kendall trend test: (S statistic, two-sided p-value, normal approximation with
    continuity correction). Fewer than 3 values: (0, 1)."""
    n = len(values)
    if n < 3:
        return 0.0, 1.0
    s = sum(
        (values[j] > values[i]) - (values[j] < values[i]) for i in range(n) for j in range(i + 1, n)
    )
    var = n * (n - 1) * (2 * n + 5) / 18.0
    if s == 0 or var <= 0:
        return float(s), 1.0
    z = (s - math.copysign(1, s)) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return float(s), p


# ----------------------------------------------------------------------------------- warm-up


class WarmupEnd(str, Enum):
    """Why a warm-up ended."""

    STEADY = "steady"
    CAP = "cap"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SteadyRule:
    """The steady-state rule and its budget (stored in the fairness manifest)."""

    bucket_s: float = 0.25  # throughput is counted per bucket of this length
    window_s: float = 2.0  # trailing window judged
    max_drift: float = 0.05  # |Theil-Sen slope| x window / median
    max_spread: float = 0.25  # 1.4826 MAD / median: beyond this the window is chaos
    confirm: int = 3  # consecutive windows (one bucket apart) that must all pass
    min_requests: int = 0  # none is steady before this many requests (JIT interpreters)
    cap_s: float = 20.0  # warm-up stops here, steady or not

    def describe(self) -> dict[str, float | str]:
        """The rule as manifest entries."""
        return {
            "method": "trailing window: Theil-Sen drift and MAD spread (docs/steady-state.md)",
            "bucket_s": self.bucket_s,
            "window_s": self.window_s,
            "max_drift": self.max_drift,
            "max_spread": self.max_spread,
            "confirm": self.confirm,
            "min_requests": self.min_requests,
            "cap_s": self.cap_s,
        }


@dataclass
class WarmupVerdict:
    """What a warm-up found: the curve, where the steady state starts, why it ended."""

    end: WarmupEnd
    steady_start_s: float | None  # seconds since the warm-up began; None when not steady
    elapsed_s: float
    curve: list[tuple[float, float]] = field(default_factory=list)  # (bucket end s, req/s)

    @property
    def steady(self) -> bool:
        return self.end == WarmupEnd.STEADY


class WarmupWatch:
    """Judges a warm-up online from cumulative ``(elapsed_s, requests)`` snapshots.

    Feed it with :meth:`observe`; it returns the verdict once the trailing window is steady
    or the cap is reached, None while warm-up must go on.
    """

    def __init__(self, rule: SteadyRule) -> None:
        self.rule = rule
        self.curve: list[tuple[float, float]] = []
        self._counts: list[int] = []
        self._last: tuple[float, int] = (0.0, 0)
        self._starts: list[float] = []  # bucket start times
        self._passed: list[float] = []  # starts of the consecutive windows that passed

    def observe(self, elapsed_s: float, requests: int) -> WarmupVerdict | None:
        """Add a snapshot; the verdict when warm-up is over."""
        last_t, last_n = self._last
        if elapsed_s - last_t >= self.rule.bucket_s:
            span = elapsed_s - last_t
            done = max(0, requests - last_n)
            self.curve.append((round(elapsed_s, 3), done / span))
            self._starts.append(last_t)
            self._counts.append(done)
            self._last = (elapsed_s, requests)
            start = self._steady_start()
            if start is not None:
                return WarmupVerdict(WarmupEnd.STEADY, start, elapsed_s, list(self.curve))
        if elapsed_s >= self.rule.cap_s:
            return self.verdict_at_cap(elapsed_s)
        return None

    def verdict_at_cap(self, elapsed_s: float) -> WarmupVerdict:
        """The verdict when the load ended before the rule was met."""
        return WarmupVerdict(WarmupEnd.CAP, None, elapsed_s, list(self.curve))

    def _steady_start(self) -> float | None:
        """The start of the first of ``confirm`` consecutive steady windows, once there are."""
        size = max(3, round(self.rule.window_s / self.rule.bucket_s))
        if len(self.curve) < size or sum(self._counts) < self.rule.min_requests:
            return None
        window = self.curve[-size:]
        if not window_is_steady(window, self._counts[-size:], self.rule):
            self._passed.clear()
            return None
        # The robust tests tolerate an outlier, so a window may begin with the last point of
        # a ramp: the steady state starts at its first point inside the window's band.
        skip = _leading_outliers([y for _, y in window], self.rule)
        self._passed.append(round(self._starts[-size + skip], 3))
        if len(self._passed) < self.rule.confirm:
            return None
        return self._passed[0]


def _noise(ys: Sequence[float], counts_median: float | None = None) -> float:
    """Relative noise of one bucket: from successive differences (robust to a trend or a
    step), never below the counting noise of buckets of ``counts_median`` requests."""
    mid = statistics.median(ys)
    jumps = [abs(b - a) for a, b in zip(ys, ys[1:], strict=False)]
    noise = 1.4826 * statistics.median(jumps) / math.sqrt(2.0) / mid if jumps and mid else 0.0
    if counts_median is None:
        return noise
    return max(noise, 1.0 / math.sqrt(max(1.0, counts_median)))


def _leading_outliers(ys: Sequence[float], rule: SteadyRule) -> int:
    """How many points at the start of a steady window lie outside its band (3 sigma, and at
    least ``max_drift``, around the median); the last point is never skipped."""
    mid = statistics.median(ys)
    band = max(rule.max_drift, 3.0 * _noise(ys)) * mid
    skip = 0
    while skip < len(ys) - 1 and abs(ys[skip] - mid) > band:
        skip += 1
    return skip


def window_is_steady(
    window: Sequence[tuple[float, float]], counts: Sequence[int], rule: SteadyRule
) -> bool:
    """True when the points ``(t, rps)`` show no trend that is both significant and
    relevant, and no chaos (see the module doc).

    The noise ``sigma`` of a bucket comes from the successive differences (robust to a trend
    or a step), or is the counting noise of its buckets (1/sqrt(N)) if larger. A change
    across the window counts when it exceeds ``max_drift`` and twice its standard error:
    ``sigma * sqrt(12 n / (n^2 - 1))`` for the slope's change, ``2.51 sigma / sqrt(n)`` for
    the difference of the halves' medians.
    """
    ts = [t for t, _ in window]
    ys = [y for _, y in window]
    n = len(ys)
    mid = statistics.median(ys)
    if mid <= 0 or min(counts, default=0) <= 0 or n < 3:
        return False
    spread = robust_spread(ys)
    if spread > rule.max_spread:
        return False
    sigma = _noise(ys, statistics.median(counts))
    span = ts[-1] - ts[0] + rule.bucket_s
    change = abs(theil_sen(ts, ys)) * span / mid
    if change > max(rule.max_drift, 2.0 * sigma * math.sqrt(12.0 * n / (n * n - 1.0))):
        return False
    # A step inside the window (a saw-tooth's reset) can cancel a rise in the robust slope;
    # the medians of the window's two halves must agree as well.
    half = n // 2
    step = abs(statistics.median(ys[half:]) - statistics.median(ys[:half])) / mid
    return step <= max(rule.max_drift, 2.0 * 2.5066 * sigma / math.sqrt(n))


# ------------------------------------------------------------------------------------ drift


@dataclass(frozen=True)
class Drift:
    """A trend across the measured iterations."""

    drifting: bool
    change: float  # relative throughput change across the span (Theil-Sen), signed
    p_value: float
    points: int

    def to_dict(self) -> dict[str, float | int | bool]:
        return {
            "drifting": self.drifting,
            "change": round(self.change, 4),
            "p_value": round(self.p_value, 6),
            "points": self.points,
        }


def drift(values: Sequence[float], *, max_drift: float = 0.05) -> Drift:
    """Whether a measured throughput series (e.g. req/s per second) trends (module doc)."""
    ys = [float(v) for v in values]
    if len(ys) < 3:
        return Drift(False, 0.0, 1.0, len(ys))
    mid = statistics.median(ys)
    slope = theil_sen(list(range(len(ys))), ys)
    change = slope * (len(ys) - 1) / mid if mid else 0.0
    _, p = mann_kendall(ys)
    return Drift(p < TREND_ALPHA and abs(change) > max_drift, change, p, len(ys))


# ------------------------------------------------------------------------------------- leak

#: Below this slope memory growth is not called a leak (bytes per 1,000 requests).
#: PyPy's heap and JIT code grow ~20-60 KB per 1,000 requests for a while after warm-up (seen
#: on gunicorn-sync hello); a reference kept per request costs 1 KB or more.
LEAK_FLOOR_BYTES_PER_1K = 256 * 1024


@dataclass(frozen=True)
class Leak:
    """Memory slope after the steady state, per 1,000 requests, with its 95% CI."""

    leaking: bool
    bytes_per_1k: float
    ci_low: float
    ci_high: float
    points: int

    def to_dict(self) -> dict[str, float | int | bool]:
        return {
            "leaking": self.leaking,
            "bytes_per_1k": round(self.bytes_per_1k, 1),
            "ci_low": round(self.ci_low, 1),
            "ci_high": round(self.ci_high, 1),
            "points": self.points,
        }


def leak(
    requests: Sequence[float],
    memory_bytes: Sequence[float],
    *,
    floor: float = LEAK_FLOOR_BYTES_PER_1K,
    max_points: int = 120,
) -> Leak:
    """Theil-Sen slope of memory on requests served, with Sen's 95% interval (module doc).

    ``requests`` is the cumulative count at each memory sample, after the steady state.
    """
    pairs = [(float(x), float(y)) for x, y in zip(requests, memory_bytes, strict=True)]
    if len(pairs) > max_points:  # evenly thinned: O(n^2) pairs stay small
        step = len(pairs) / max_points
        pairs = [pairs[int(k * step)] for k in range(max_points)]
    xs = [x / 1000.0 for x, _ in pairs]
    ys = [y for _, y in pairs]
    slopes = _pair_slopes(xs, ys)
    if len(pairs) < 4 or not slopes:
        return Leak(False, math.nan, math.nan, math.nan, len(pairs))
    n = len(pairs)
    m = len(slopes)
    c = Z95 * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0)
    lo_i = max(0, int(math.floor((m - c) / 2.0)) - 1)
    hi_i = min(m - 1, int(math.ceil((m + c) / 2.0)))
    slope = statistics.median(slopes)
    lo, hi = slopes[lo_i], slopes[hi_i]
    # the whole interval above the floor: a heap that steps up once (PyPy's GC widening its
    # threshold) gives a slope just over the floor whose interval reaches far below it
    return Leak(lo > floor, slope, lo, hi, n)
