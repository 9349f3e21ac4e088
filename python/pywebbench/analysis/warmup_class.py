"""The class of a replicate's curve, after Barrett et al. ("Virtual Machine Warmup Blows Hot
and Cold", OOPSLA 2017): **flat**, **warm-up**, **slowdown** or **no steady state**.

The curve is the replicate's throughput in quarter-second points: its warm-up curve (less
its first half second, the load's own start), then its measured iterations (the progress
snapshots). Changepoints (PELT, :func:`segments`) cut it into regimes. A small change is
held for a second at least: a segment shorter than that, next to a regime that is not and
within :data:`BLIP_SIZE` of it, is a blip. It joins both its neighbours when they are
equivalent (a neighbour's burst, a pause: the level went away and came back), as Barrett et
al. take outliers out before they look for changepoints; else it joins that regime (the
edge of a step). A short segment at the curve's end stays: it cannot be told from the start
of a change. Adjacent regimes whose levels differ by at most ``tolerance`` are one
(Barrett's "equivalent" segments).

The measured series is a new load on fresh connections, and that alone moves a settled
server's level (:data:`SEAM_TOLERANCE`). A measured series that holds one level within that
fraction of the level the warm-up's last regime ended at continues it: its points are scaled
to that level before the regimes are cut (the trend test reads them as they are). So a
change of at most :data:`SEAM_TOLERANCE` exactly between warm-up and measurement is not
seen. Then:

- **no steady state**: the last regime starts inside the measured part (the level changed
  while it was measured; a changepoint at its first points is where the new load settled),
  or the measured part has a significant trend (Mann-Kendall
  p < 0.01) of more than ``max_trend`` (a slow ramp that no single changepoint marks);
- **flat**: one regime from the first point to the last;
- **warm-up**: the last regime is the fastest (no earlier regime above it);
- **slowdown**: an earlier regime was faster than the one the replicate settled at.

Throughput is higher-is-better, so Barrett's "slower" is a lower level here.

The first three are steady states (at the replicate's best level or below an earlier one).
A warm-up that reached its cap was not seen to settle while it ran. It is a steady state only
if the warm-up's own rule (:func:`pywebbench.analysis.warmup.regime_start`, with its JIT floor)
holds at the end of the whole curve, the measured series included: a curve whose level had
settled just before the cap then has the measured points it lacked, and a ramp still has
none. Otherwise it is classed **no steady state** (and :func:`unsettled`).

A cell's classification is Barrett's over its replicates (:func:`cell_class`): their one
class when all agree, else *good inconsistent* (a mix of flat and warm-up: every replicate
settled at its best) or *bad inconsistent*.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from pywebbench.analysis.steady import TREND_ALPHA, segments, trend
from pywebbench.analysis.warmup import SteadyRule, regime_start

#: Regimes whose levels differ by at most this fraction are one. This machine's noise is
#: 1-4% within a minute, and two loads of one settled reference server a second apart
#: differed by 8% while other tests ran (benchmarks/warmup_curves.py's shapes), so a
#: regime of its own needs more than 10%.
LEVEL_TOLERANCE = 0.10
#: A small change is held for at least this many points (1 s); a shorter segment is a blip.
#: The quick studies of 2026-11-28 saw half-second blips of 9-23% on settled CPython servers
#: (gunicorn-gthread flask hello 7,184 -> 8,334 -> 7,331; granian-wsgi raw-wsgi cpu
#: 1,401 -> 1,600 -> 1,391), each then classed slowdown, warm-up or no steady state: a JIT
#: does not change state for half a second and go back. At the curve's end a blip cannot be
#: told from the start of a change, and is read as one.
MIN_REGIME_POINTS = 4
#: A measured series that holds one level within this fraction (either way) of where the
#: warm-up's last regime ended continues it. The same studies saw settled CPython servers
#: measured 11% below their warm-up's level on the new load (gunicorn-gthread raw-wsgi hello
#: 12,525 -> 11,124, cpu 1,375 -> 1,228), then classed slowdown; the largest such shift seen
#: on this machine was 13%.
SEAM_TOLERANCE = 0.15
#: A short segment is a blip only this close to the regime it joins (the gap over the larger
#: level: a fall of 25% or a rise of 33%; the blips above were at most 23% off); further off
#: it is a level of its own, however short: PyPy's first second on hello (2,000-7,000 req/s,
#: then ~23,000), or the reference server's saw-tooth (a quarter second at ~22,000 every 3 s,
#: between ~1,100 and ~2,500).
BLIP_SIZE = 0.25
#: Where the warm-up ended: the median of its last regime's last 2 s (the steady rule's
#: window). A last regime shorter than that is no level to continue.
SEAM_POINTS = 8
#: A trend across the measured series larger than this (and significant) is no steady state.
MAX_TREND = 0.05
#: Points of the warm-up curve left out at its start: the load's own start (connections
#: opening, the first requests; the reference server, steady from its first request, served
#: 690 and 950 req/s in its first two quarter-seconds, then ~1,100), not the server's
#: warm-up. 2 points: the first half second. (With the blips above, leaving the first second
#: out hid most of PyPy's warm-up on hello: gunicorn-gthread/raw-wsgi ran at 2,000-7,000
#: req/s for its first 1.25-1.5 s, then at ~23,000, and its replicates were classed flat.)
#: A load start that stays more than BLIP_SIZE low past its first half second is classed a
#: warm-up.
LOAD_START_POINTS = 2
#: The measured series is a new load: a changepoint this many points from its start is the
#: boundary between the two loads (the level the measured load settled at), not a change
#: while it was measured.
BOUNDARY_POINTS = 2


class WarmupClass(str, Enum):
    """Barrett's classes of one process execution (a replicate)."""

    FLAT = "flat"
    WARMUP = "warm-up"
    SLOWDOWN = "slowdown"
    NO_STEADY_STATE = "no steady state"

    def __str__(self) -> str:
        return self.value


#: The classes of a replicate that reached a steady state (as stored: their values).
STEADY_CLASSES = frozenset(
    c.value for c in (WarmupClass.FLAT, WarmupClass.WARMUP, WarmupClass.SLOWDOWN)
)
#: A cell whose replicates' classes differ: all flat or warm-up, or not (warmup_stats).
GOOD_INCONSISTENT = "good inconsistent"
BAD_INCONSISTENT = "bad inconsistent"


def unsettled(end: str | None, found: str | None) -> bool:
    """Whether a replicate's measured figure may still include warm-up: its warm-up ended
    at the cap (``end``, ``replicates.warmup_end``) and its class (``found``) is not a steady
    state, or it has none (a measured series too short to judge). A capped warm-up whose
    whole curve shows that the level had settled before it was measured (flat, warm-up or
    slowdown) is a steady state the rule, judging the warm-up alone, could not yet bound."""
    return end == "cap" and found not in STEADY_CLASSES


def cell_class(classes: Sequence[str]) -> str:
    """Barrett et al.'s classification of a cell from its replicates' classes (as
    softdevteam/warmup_stats reports a <VM, benchmark> pair): the one class when all
    agree, :data:`GOOD_INCONSISTENT` when they are a mix of flat and warm-up, else
    :data:`BAD_INCONSISTENT`. ``classes`` must not be empty."""
    found = set(classes)
    if not found:
        raise ValueError("a cell's classification needs at least one replicate's class")
    if len(found) == 1:
        return classes[0]
    if found == {WarmupClass.FLAT.value, WarmupClass.WARMUP.value}:
        return GOOD_INCONSISTENT
    return BAD_INCONSISTENT


@dataclass(frozen=True)
class Regime:
    """A stretch of the curve at one level: points ``[start, end)``, median level."""

    start: int
    end: int
    level: float


def _joined(ys: Sequence[float], a: Regime, b: Regime) -> Regime:
    return Regime(a.start, b.end, statistics.median(ys[a.start : b.end]))


def _gap(a: Regime, b: Regime) -> float:
    return abs(b.level - a.level) / max(abs(a.level), abs(b.level), 1e-9)


def regimes(
    ys: Sequence[float],
    *,
    tolerance: float = LEVEL_TOLERANCE,
    min_points: int = MIN_REGIME_POINTS,
) -> list[Regime]:
    """The curve's PELT segments; each one shorter than ``min_points`` (but the last), next
    to a regime that is not and within :data:`BLIP_SIZE` of it, joined to both its
    neighbours when they are equivalent (a blip: an excursion that came back), else to that
    regime (a step's edge); then adjacent equivalent ones merged (module doc)."""
    found = [Regime(a, b, statistics.median(ys[a:b])) for a, b in segments(ys)]

    def short(r: Regime) -> bool:
        return r.end - r.start < min_points

    kept: set[int] = set()  # the starts of short regimes that are levels of their own
    while len(found) > 1:
        blips = [k for k, r in enumerate(found) if short(r) and r.start not in kept]
        if not blips:
            break
        k = blips[0]
        if k == len(found) - 1:
            kept.add(found[k].start)  # the curve's end: the start of a change, maybe
            continue
        sides = [j for j in (k - 1, k + 1) if 0 <= j < len(found) and not short(found[j])]
        near = [j for j in sides if _gap(found[j], found[k]) <= BLIP_SIZE]
        if not near:
            kept.add(found[k].start)  # no regime near it: a level, however short
            continue
        if len(sides) == 2 and _gap(found[k - 1], found[k + 1]) <= tolerance:
            lo, hi = k - 1, k + 1  # an excursion that came back: one regime
        else:
            j = min(near, key=lambda i: _gap(found[i], found[k]))
            lo, hi = min(j, k), max(j, k)  # the edge of a step
        found[lo : hi + 1] = [_joined(ys, found[lo], found[hi])]
        kept.clear()  # a short level kept before may now sit beside a regime near it
    merged = True
    while merged and len(found) > 1:
        merged = False
        gaps = [_gap(a, b) for a, b in zip(found, found[1:], strict=False)]
        k = min(range(len(gaps)), key=gaps.__getitem__)
        if gaps[k] <= tolerance:
            found[k : k + 2] = [_joined(ys, found[k], found[k + 1])]
            merged = True
    return found


def classify(
    warmup: Sequence[float],
    measured: Sequence[float],
    *,
    tolerance: float = LEVEL_TOLERANCE,
    max_trend: float = MAX_TREND,
    capped: SteadyRule | None = None,
) -> WarmupClass | None:
    """The class of a replicate from its warm-up curve and measured series (module doc);
    None without a measured series to judge. ``capped``: the warm-up ended at its cap, and
    this is its rule (the replicate is no steady state unless :func:`holds_at_end`)."""
    if len(measured) < 3:
        return None
    if capped is not None and not holds_at_end(warmup, measured, capped):
        return WarmupClass.NO_STEADY_STATE
    warm = (
        [float(v) for v in warmup[LOAD_START_POINTS:]]
        if len(warmup) > 2 * LOAD_START_POINTS
        else []
    )
    found = regimes([*warm, *_across_the_seam(warm, measured, tolerance)], tolerance=tolerance)
    last = found[-1]
    if last.start > len(warm) + BOUNDARY_POINTS:
        return WarmupClass.NO_STEADY_STATE
    change, p = trend(list(measured))
    if p < TREND_ALPHA and abs(change) > max_trend:
        return WarmupClass.NO_STEADY_STATE
    if len(found) == 1:
        return WarmupClass.FLAT
    if any(r.level > last.level * (1.0 + tolerance) for r in found[:-1]):
        return WarmupClass.SLOWDOWN
    return WarmupClass.WARMUP


def _across_the_seam(
    warm: Sequence[float], measured: Sequence[float], tolerance: float
) -> list[float]:
    """The measured series, scaled to where the warm-up's last regime ended (the median of
    its last :data:`SEAM_POINTS`) when that regime holds that many points, the measured
    series holds one level, and its median is within :data:`SEAM_TOLERANCE` of it (the new
    load's own shift, module doc); as it is otherwise."""
    ys = [float(v) for v in measured]
    if not all(math.isfinite(v) for v in (*warm, *ys)):
        return ys  # a gap in the series: nothing to scale by
    if not warm or len(regimes(ys, tolerance=tolerance)) > 1:
        return ys  # no warm-up to continue, or a measured series that changed level itself
    last = regimes(warm, tolerance=tolerance)[-1]
    if last.end - last.start < SEAM_POINTS:
        return ys
    before = statistics.median(warm[last.end - SEAM_POINTS : last.end])
    after = statistics.median(ys)
    if not (before > 0 and after > 0 and abs(after / before - 1.0) <= SEAM_TOLERANCE):
        return ys
    return [y * before / after for y in ys]


def holds_at_end(warmup: Sequence[float], measured: Sequence[float], rule: SteadyRule) -> bool:
    """Whether the steady-state rule holds at the end of the whole curve, as the warm-up
    judged it (``rule.confirm`` consecutive judgements, the last at the last point): the
    warm-up's points then the measured series', one ``rule.bucket_s`` apart (the measured
    series is taken between progress snapshots, about as often), their requests past the
    JIT floor."""
    ys = [float(v) for v in (*warmup, *measured)]
    counts = [max(0, round(y * rule.bucket_s)) for y in ys]
    if sum(counts) < rule.min_requests:
        return False
    curve = [((k + 1) * rule.bucket_s, y) for k, y in enumerate(ys)]
    n = len(curve)
    return all(
        regime_start(curve[: n - k], counts[: n - k], rule) is not None
        for k in range(max(1, rule.confirm))
    )
