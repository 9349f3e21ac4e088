"""Steady state: the statistics every warm-up is judged with (changepoints, noise, slope
bounds), whether a server drifts while measured, and whether its memory leaks. The method is
explained in docs/steady-state.md; the warm-up rule itself is
:mod:`pywebbench.analysis.warmup`.

- **Regimes** (:func:`segments`): changepoints (``ruptures``' PELT) cut a curve into regimes
  of constant level, with a penalty scaled to one point's noise (:func:`noise`); the slope
  of a regime with its interval is Theil-Sen's (:func:`slope_bounds`, ``scipy.stats``).
- **Drift** (:func:`drift`): Kendall's tau trend test (``scipy.stats.kendalltau``, the
  Mann-Kendall test) over the measured throughput, with the Theil-Sen slope as its size;
  drift is a significant trend that also moves throughput by more than ``max_drift``.
- **Leak** (:func:`leak`): memory against requests served after the steady state, in bytes
  per 1,000 requests, Theil-Sen with its 95% interval. A leak is growth that does not stop:
  the slope's whole interval lies above a floor over the whole series, *and* the slope of
  its last half is above it too. A heap or a cache that grows and then plateaus is not one.

Small inputs: tens to a few hundred points.
"""

from __future__ import annotations

import math
import statistics
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# ruptures and scipy.stats are imported where they are used: together they take ~1 s to
# import (scipy.stats, scipy.signal, scipy.spatial), which a command that refuses its input
# or lists something should not pay. A measurement imports them first (:func:`preload`).


_importing: list[threading.Thread] = []


def _import_statistics() -> None:
    import ruptures  # noqa: F401
    import scipy.stats  # noqa: F401


def _import_quietly() -> None:
    try:
        _import_statistics()
    except Exception:  # noqa: BLE001 - preload's own import says what is wrong
        pass


def preload_in_background() -> None:
    """Start importing what :func:`preload` imports, in a thread of this process (once): a
    study's set-up (pre-flight checks, server start, verification) mostly waits on other
    processes, and the imports (1.2-1.4 s here) take that time instead of their own."""
    if not _importing:
        thread = threading.Thread(target=_import_quietly, name="pwb-preload", daemon=True)
        _importing.append(thread)
        thread.start()


def preload() -> None:
    """Import what the steady-state, warm-up class and interval code use (or wait for
    :func:`preload_in_background` to have done it): called before a load starts, so that no
    warm-up or search waits a second on its first import."""
    preload_in_background()
    _importing[0].join()
    _import_statistics()  # at once if the thread did it; raises here if it could not


#: The level of the drift test (Mann-Kendall, two-sided).
TREND_ALPHA = 0.01
#: Two-sided confidence of the warm-up's slope interval (each bound one-sided 99.5%). The
#: rule is judged every bucket, so a laxer bound lets a ramp through by luck: a 5%/s ramp at
#: 1,000-1,700 req/s under 1-4% noise was called steady in 1 of 60 synthetic runs at 0.98,
#: 0 of 60 at 0.99; a flat 3,000 req/s is then steady after 4.25-6.75 s (median 6). A
#: stricter 0.995 costs ~0.5 s more on every flat curve, and on this shared machine kept
#: the reference server's noisy plateau from ever being called steady.
SLOPE_CONFIDENCE = 0.99
#: PELT's penalty per changepoint, times ln(n), on a curve scaled to unit noise: 2 ln(n)
#: is BIC for a shift of mean; twice that keeps noise of this machine's kind (1-4% per
#: bucket, bursts) from cutting a flat curve (tests/analysis/test_warmup_class.py).
PELT_PENALTY = 4.0


def robust_spread(values: Sequence[float]) -> float:
    """1.4826 * MAD / median: a robust coefficient of variation (NaN if the median is 0)."""
    if not values:
        return math.nan
    mid = statistics.median(values)
    if not mid:
        return math.nan
    mad = statistics.median(abs(v - mid) for v in values)
    return 1.4826 * mad / abs(mid)


def noise(ys: Sequence[float], counts_median: float | None = None) -> float:
    """Relative noise of one point: from successive differences (robust to a trend or a
    step), never below the counting noise of buckets of ``counts_median`` requests."""
    mid = statistics.median(ys) if ys else 0.0
    jumps = [abs(b - a) for a, b in zip(ys, ys[1:], strict=False)]
    level = 1.4826 * statistics.median(jumps) / math.sqrt(2.0) / mid if jumps and mid else 0.0
    if counts_median is None:
        return level
    return max(level, 1.0 / math.sqrt(max(1.0, counts_median)))


def segments(ys: Sequence[float], *, rel_noise: float | None = None) -> list[tuple[int, int]]:
    """The curve cut at its changepoints: ``(start, end)`` index ranges (end exclusive).

    PELT on the curve divided by its absolute noise, with a penalty of :data:`PELT_PENALTY`
    x ln(n) per changepoint, least-squares cost: ``ruptures.KernelCPD`` with the linear
    kernel (the same segmentation as ``ruptures.Pelt(model="l2")``, in its C implementation:
    0.1 ms for 80 points, 1 ms for 480, where the Python one took 20 ms and 1.3 s, too slow
    to run after every bucket). ``rel_noise`` overrides the noise estimate (relative to the
    median)."""
    n = len(ys)
    if n < 4:
        return [(0, n)] if n else []
    mid = statistics.median(ys)
    sigma = (rel_noise if rel_noise is not None else noise(ys)) * abs(mid)
    if not sigma or not math.isfinite(sigma):
        sigma = max(1e-9, float(np.std(ys)))
    signal = np.asarray(ys, dtype=float).reshape(-1, 1) / sigma
    import ruptures

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = ruptures.KernelCPD(kernel="linear", min_size=2).fit(signal)
        ends = [int(e) for e in found.predict(pen=PELT_PENALTY * math.log(n))]
    starts = [0, *ends[:-1]]
    return list(zip(starts, ends, strict=True))


def slope_bounds(
    ts: Sequence[float], ys: Sequence[float], confidence: float
) -> tuple[float, float, float]:
    """Theil-Sen slope with its two-sided ``confidence`` interval: (slope, low, high).

    With ties on both axes (a memory series that does not move, sampled where no request
    ended between some samples), Sen's variance can go negative and the interval is
    undefined: NaN bounds, which no comparison passes (scipy warns of the square root it
    takes; the warning is not shown)."""
    from scipy import stats as scistats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fit = scistats.theilslopes(ys, ts, alpha=confidence)
    return float(fit.slope), float(fit.low_slope), float(fit.high_slope)


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


def trend(ys: Sequence[float]) -> tuple[float, float]:
    """(relative change across the series by its Theil-Sen slope, Mann-Kendall p-value:
    Kendall's tau of the values against their order, two-sided). Fewer than 3: (0, 1)."""
    if len(ys) < 3:
        return 0.0, 1.0
    from scipy import stats as scistats

    xs = list(range(len(ys)))
    mid = statistics.median(ys)
    slope = float(scistats.theilslopes(ys, xs).slope)
    change = slope * (len(ys) - 1) / mid if mid else 0.0
    tau = scistats.kendalltau(xs, ys)
    p = float(tau.pvalue)
    return change, (1.0 if math.isnan(p) else p)


def drift(values: Sequence[float], *, max_drift: float = 0.05) -> Drift:
    """Whether a measured throughput series (e.g. req/s per second) trends (module doc)."""
    ys = [float(v) for v in values]
    change, p = trend(ys)
    return Drift(p < TREND_ALPHA and abs(change) > max_drift, change, p, len(ys))


# ------------------------------------------------------------------------------------- leak

#: Below this slope memory growth is not called a leak (bytes per 1,000 requests): a
#: reference kept per request costs 1 KB or more; CPython's heap is flat once warm.
LEAK_FLOOR_BYTES_PER_1K = 256 * 1024
#: The floor on a JIT interpreter (PyPy): its heap and JIT code keep growing for a while
#: after warm-up, by 20-60 KB per 1,000 requests on gunicorn-sync hello and by 240-290 KB on
#: the cached app of tests/run/test_leak.py at ~2,000 req/s (RSS 517 -> 521 MB over 6 s,
#: in 0.6 MB arena steps), which the 256 KB floor called a leak. 1 MB per 1,000 requests is
#: the smallest leak this test claims to see on PyPy: 1 KB kept per request.
LEAK_FLOOR_JIT_BYTES_PER_1K = 1024 * 1024


@dataclass(frozen=True)
class Leak:
    """Memory slope after the steady state, per 1,000 requests, with its 95% CI."""

    leaking: bool
    bytes_per_1k: float
    ci_low: float
    ci_high: float
    points: int
    #: The growth would be a leak, but memory stayed below the collector's floor: PyPy had
    #: run no major collection yet (:func:`leak`'s ``collector_floor``).
    uncollected: bool = False

    def to_dict(self) -> dict[str, float | int | bool]:
        out: dict[str, float | int | bool] = {
            "leaking": self.leaking,
            "bytes_per_1k": round(self.bytes_per_1k, 1),
            "ci_low": round(self.ci_low, 1),
            "ci_high": round(self.ci_high, 1),
            "points": self.points,
        }
        if self.uncollected:
            out["uncollected"] = True
        return out


def leak(
    requests: Sequence[float],
    memory_bytes: Sequence[float],
    *,
    floor: float = LEAK_FLOOR_BYTES_PER_1K,
    collector_floor: float | None = None,
    max_points: int = 120,
) -> Leak:
    """Theil-Sen slope of memory on requests served, with its 95% interval (module doc).

    ``requests`` is the cumulative count at each memory sample, after the steady state. The
    growth must not stop: the last half's slope must be above the floor too (a cache that
    fills early in the series, then plateaus, leaves that half flat).

    ``collector_floor`` (bytes): a heap below it is never collected (PyPy's ``PYPY_GC_MIN``,
    :mod:`pywebbench.meter.pypy_gc`). Growth whose every sample stayed below it is no
    evidence of a leak, since nothing was collected yet: it is marked ``uncollected``, not
    ``leaking``. The whole process's memory bounds its heap from above, so the test errs
    towards calling a leak.
    """
    pairs = [(float(x), float(y)) for x, y in zip(requests, memory_bytes, strict=True)]
    if len(pairs) > max_points:  # evenly thinned
        step = len(pairs) / max_points
        pairs = [pairs[int(k * step)] for k in range(max_points)]
    xs = [x / 1000.0 for x, _ in pairs]
    ys = [y for _, y in pairs]
    if len(pairs) < 4 or len(set(xs)) < 2:
        return Leak(False, math.nan, math.nan, math.nan, len(pairs))
    slope, lo, hi = slope_bounds(xs, ys, 0.95)
    # the whole interval above the floor: a heap that steps up once (PyPy's GC widening its
    # threshold) gives a slope just over the floor whose interval reaches far below it
    growing = lo > floor
    half = len(pairs) // 2
    if growing and len(set(xs[half:])) >= 2:
        # the last half's slope itself, not its interval: PyPy's heap grows in steps of
        # ~10 MB (its GC's arenas), and a dozen points of a staircase give a wide interval
        tail, _, _ = slope_bounds(xs[half:], ys[half:], 0.95)
        growing = tail > floor
    if growing and collector_floor is not None and max(memory_bytes) < collector_floor:
        return Leak(False, slope, lo, hi, len(pairs), uncollected=True)
    return Leak(growing, slope, lo, hi, len(pairs))
