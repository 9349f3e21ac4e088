"""Warm-up: when a server process has stopped warming up. One rule, for every design
(docs/steady-state.md#the-steady-state-rule).

A process is judged on the series of its throughput that is freest of the host:

- **a lone process** (``--design sequential``; the knee and the fault phase load a server
  that warmed up so): its requests/s per bucket of ``bucket_s`` during one warm-up load,
  divided by the core's speed and by the share of its cores the server had (the core-speed
  probe and the CPU accounting, the only reference a lone process has). Fed online to
  :class:`WarmupWatch`, which stops the warm-up load once the rule has held ``confirm``
  times in a row, or at its cap: "not steady" is a legitimate answer (Barrett et al., OOPSLA
  2017: some VMs never reach one).
- **a process of an interleaved group** (the quick study, ``ab``): its *share* of each round
  (:func:`round_shares`: its slice over the round's level), which the host's drift hits
  alike in every slice of a round. Judged after every round by :func:`warm_round`.

**The rule** (:func:`settled`) is the same for both series. The whole series so far is cut at
its changepoints (PELT, :func:`pywebbench.analysis.steady.segments`); the current regime is
the one since the last. The process is steady from the regime's first point once the regime

- holds ``points`` points (the shortest steady regime),
- is not chaos: its robust spread (1.4826 MAD / median) is at most ``max_spread``,
- and has stopped moving: its Theil-Sen slope's 99% interval (``scipy.stats``), carried over
  ``horizon``, keeps the series within ``max_drift`` of the regime's level, up or down.

A JIT compiles a path only after it ran many times, and before that a series can look flat
at interpreter speed: nothing is judged before the JIT floor (a lone process's
``min_requests``) or the first touch and the first round (a group's, :class:`WarmRule`).

**What the two series differ in**, and why (:attr:`Settling.no_trend_is_steady`). A lone
process's regime of 8 buckets spans 2 s: a slow ramp under the host's noise shows no trend
there (a 5%/s ramp under 4% noise a bucket gives a 99% slope interval of about +-12%/s,
which holds 0 in 93% of such windows), so the rule asks for *evidence of flatness*, the
bound above, which needs the regime to be long and quiet enough. A group's regime of 6
rounds spans 6 slices of every process of the group (30-105 s in the quick study of
2026-12-05): a ramp has that long to show, and PELT cuts a regime that still climbs. There
the bound alone is not met (a share's 6 points at 3% noise give an interval of about +-5% a
round, +-30% over 6 rounds against the 5% asked: met in 0 of 300 such windows), so a regime
whose slope interval holds 0 (no trend its points can show) is steady too. The same points
judged with the same setting get the same answer from both (tests/analysis/test_warmup.py).

Small inputs: tens to a few hundred points.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from pywebbench.analysis.group import Observation
from pywebbench.analysis.steady import (
    SLOPE_CONFIDENCE,
    noise,
    robust_spread,
    segments,
    slope_bounds,
)


@dataclass(frozen=True)
class Settling:
    """The rule of :func:`settled`, in the series' own units (module doc)."""

    points: int  # the shortest steady regime, in points
    horizon: float  # how far ahead (in the series' x) the trend may move it ``max_drift``
    max_drift: float = 0.05
    max_spread: float = 0.25  # 1.4826 MAD / median: beyond this the regime is chaos
    #: A regime whose slope interval holds 0 is steady too (a group's shares: module doc).
    no_trend_is_steady: bool = False


def settled(
    xs: Sequence[float], ys: Sequence[float], rule: Settling, *, rel_noise: float
) -> int | None:
    """The index where the series' current regime starts, if that regime is steady (module
    doc); None while it is not. ``rel_noise``: one point's noise relative to the median,
    which scales PELT's penalty."""
    if len(ys) < rule.points:
        return None
    start, _ = segments(ys, rel_noise=rel_noise)[-1]
    if len(ys) - start < rule.points:
        return None
    regime = list(ys[start:])
    level = statistics.median(regime)
    if level <= 0 or robust_spread(regime) > rule.max_spread:
        return None
    _, low, high = slope_bounds(list(xs[start:]), regime, SLOPE_CONFIDENCE)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    if rule.no_trend_is_steady and low <= 0.0 <= high:
        return start
    if max(high, -low) * rule.horizon > rule.max_drift * level:
        return None
    return start


# ------------------------------------------------------------------------- a lone process


class WarmupEnd(str, Enum):
    """Why a warm-up ended."""

    STEADY = "steady"
    CAP = "cap"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SteadyRule:
    """A lone process's warm-up rule and its budget (stored in the fairness manifest)."""

    bucket_s: float = 0.25  # throughput is counted per bucket of this length
    window_s: float = 2.0  # the shortest steady regime, and the horizon of the trend bound
    max_drift: float = 0.05  # the most the trend may move throughput over window_s
    max_spread: float = 0.25  # 1.4826 MAD / median: beyond this the regime is chaos
    confirm: int = 3  # consecutive judgements (one bucket apart) that must all pass
    min_requests: int = 0  # none is steady before this many requests (JIT interpreters)
    cap_s: float = 20.0  # warm-up stops here, steady or not

    @property
    def points(self) -> int:
        """Buckets of the shortest steady regime."""
        return max(3, round(self.window_s / self.bucket_s))

    @property
    def settling(self) -> Settling:
        """The shared rule, on a curve of (seconds, req/s)."""
        return Settling(self.points, self.window_s, self.max_drift, self.max_spread)

    def describe(self) -> dict[str, float | str]:
        """The rule as manifest entries."""
        return {
            "method": "whole warm-up: PELT regimes, Theil-Sen slope bound (docs/steady-state.md)",
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
    """Judges a lone process's warm-up online from cumulative ``(elapsed_s, requests)``
    snapshots.

    Feed it with :meth:`observe`; it returns the verdict once the current regime is steady
    (``confirm`` consecutive judgements, one bucket apart) or the cap is reached, None while
    warm-up must go on. ``stop_when_steady=False`` (the deep mode) records the curve to the
    cap and still reports where steadiness was first met.
    """

    def __init__(self, rule: SteadyRule, *, stop_when_steady: bool = True) -> None:
        self.rule = rule
        self.stop_when_steady = stop_when_steady
        self.curve: list[tuple[float, float]] = []
        self._counts: list[int] = []
        self._last: tuple[float, int] = (0.0, 0)
        self._starts: list[float] = []  # bucket start times
        self._passed: list[float] = []  # steady starts of the consecutive passing judgements
        self._found: float | None = None

    def observe(
        self, elapsed_s: float, requests: int, speed: Callable[[], float] | None = None
    ) -> WarmupVerdict | None:
        """Add a snapshot; the verdict when warm-up is over.

        ``speed()``, asked once per bucket, is the core's speed over it relative to a fixed
        rate (:class:`pywebbench.meter.core_speed.SpeedTracker`), times the share of its cores
        the server had (:class:`pywebbench.meter.interference.AvailableShare`): the curve
        holds req/s divided by it, at one core speed and with the cores to itself. The
        request counts (the JIT floor) stay raw."""
        last_t, last_n = self._last
        if elapsed_s - last_t >= self.rule.bucket_s:
            span = elapsed_s - last_t
            done = max(0, requests - last_n)
            factor = speed() if speed is not None else 1.0
            self.curve.append((round(elapsed_s, 3), done / span / (factor or 1.0)))
            self._starts.append(last_t)
            self._counts.append(done)
            self._last = (elapsed_s, requests)
            if self._found is None:
                self._found = self._steady_start()
            if self._found is not None and self.stop_when_steady:
                return WarmupVerdict(WarmupEnd.STEADY, self._found, elapsed_s, list(self.curve))
        if elapsed_s >= self.rule.cap_s:
            return self.verdict_at_cap(elapsed_s)
        return None

    def verdict_at_cap(self, elapsed_s: float) -> WarmupVerdict:
        """The verdict when the load ended before the rule was met (or, in the deep mode,
        at the cap: steady if the rule was met on the way)."""
        if self._found is not None:
            return WarmupVerdict(WarmupEnd.STEADY, self._found, elapsed_s, list(self.curve))
        return WarmupVerdict(WarmupEnd.CAP, None, elapsed_s, list(self.curve))

    def _steady_start(self) -> float | None:
        """The start of the current regime once ``confirm`` consecutive judgements passed."""
        if sum(self._counts) < self.rule.min_requests:
            return None
        start = regime_start(self.curve, self._counts, self.rule)
        if start is None:
            self._passed.clear()
            return None
        self._passed.append(round(self._starts[start], 3))
        if len(self._passed) < self.rule.confirm:
            return None
        return self._passed[0]


def regime_start(
    curve: Sequence[tuple[float, float]], counts: Sequence[int], rule: SteadyRule
) -> int | None:
    """The index where a lone process's curve (``(bucket end s, req/s)``, with each bucket's
    request count) starts its steady regime (:func:`settled`); None while it has none. A
    bucket of the last window that served nothing is no steady state; a point's noise is
    read from the last four windows, never below the counting noise of their buckets."""
    size = rule.points
    ys = [y for _, y in curve]
    if len(ys) < size or min(counts[-size:], default=0) <= 0:
        return None
    sigma = noise(ys[-size * 4 :], statistics.median(counts[-size:]))
    return settled([t for t, _ in curve], ys, rule.settling, rel_noise=sigma)


# ----------------------------------------------------------------- a process of a group


def round_shares(observations: Iterable[Observation]) -> dict[int, list[tuple[int, float]]]:
    """Each process's share of every round it served, ``(round, share)`` in round order: its
    slice's requests/s over the round's level. A round's level is the median, over the
    round's slices, of each slice relative to its own process's median (so that stacks ten
    times apart do not make the median jump between them); a share is then the slice over
    its process's median and that level, 1.0 for a process at its usual place. Rounds with
    fewer than two slices give no share (nothing to compare with)."""
    kept = [o for o in observations if o.rps > 0]
    own: dict[int, list[float]] = {}
    for o in kept:
        own.setdefault(o.process, []).append(math.log(o.rps))
    usual = {p: statistics.median(v) for p, v in own.items()}
    by_round: dict[int, list[Observation]] = {}
    for o in kept:
        by_round.setdefault(o.round, []).append(o)
    out: dict[int, list[tuple[int, float]]] = {}
    for r in sorted(by_round):
        got = by_round[r]
        if len(got) < 2:
            continue
        level = statistics.median(math.log(o.rps) - usual[o.process] for o in got)
        for o in got:
            out.setdefault(o.process, []).append(
                (r, math.exp(math.log(o.rps) - usual[o.process] - level))
            )
    return out


@dataclass(frozen=True)
class WarmRule:
    """A group's warm-up rule, in rounds (module doc)."""

    window: int = 6  # rounds of the shortest steady regime, and the trend's horizon
    max_drift: float = 0.05  # the most the trend may move the share over ``window`` rounds
    max_spread: float = 0.25  # 1.4826 MAD / median of the regime: beyond it, chaos
    skip: int = 1  # first rounds never judged (connections and caches still filling)

    @property
    def settling(self) -> Settling:
        """The shared rule, on a series of (round, share)."""
        return Settling(
            self.window, self.window, self.max_drift, self.max_spread, no_trend_is_steady=True
        )


def warm_round(series: Sequence[tuple[int, float]], rule: WarmRule = WarmRule()) -> int | None:
    """The round from which a process's share (``(round, share)`` in round order) is steady
    (:func:`settled`, after the ``skip`` first rounds); None while it is not. A point's noise
    is read from the whole series."""
    points = list(series[rule.skip :])
    ys = [y for _, y in points]
    found = settled([float(r) for r, _ in points], ys, rule.settling, rel_noise=noise(ys))
    return points[found][0] if found is not None else None
