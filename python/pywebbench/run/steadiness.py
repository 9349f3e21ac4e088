"""The runner's side of steady state: warm up until steady, then test what was measured.

:func:`warm_until_steady` runs one warm-up load that stops as soon as the rule of
:class:`pywebbench.analysis.warmup.WarmupWatch` is met (or at its cap). :func:`replicate_checks`
runs the drift and leak tests over a replicate's measured iterations.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pywebbench.analysis.steady import (
    LEAK_FLOOR_BYTES_PER_1K,
    LEAK_FLOOR_JIT_BYTES_PER_1K,
    Drift,
    Leak,
    drift,
    leak,
)
from pywebbench.analysis.warmup import SteadyRule, WarmupVerdict, WarmupWatch
from pywebbench.load import LoadAgent, LoadProgress
from pywebbench.load.result import LoadResult
from pywebbench.meter import pypy_gc
from pywebbench.store import Sample

if TYPE_CHECKING:
    from pywebbench.catalogue.base import Interpreter


def warm_until_steady(
    agent: LoadAgent,
    spec_for: Callable[[float], Any],
    rule: SteadyRule,
    display: Callable[[LoadProgress], None] | None = None,
    *,
    stop_when_steady: bool = True,
    speed: Callable[[], float] | None = None,
) -> tuple[LoadResult, WarmupVerdict]:
    """One warm-up load of at most ``rule.cap_s`` seconds, stopped once steady (unless
    ``stop_when_steady`` is False: the deep mode records the whole curve to the cap).

    ``spec_for(duration_s)`` builds the load spec; ``display`` gets every progress snapshot;
    ``speed`` (the core's speed times the share of its cores the server had, per bucket)
    puts the curve at one core speed, with the cores to the server
    (:meth:`pywebbench.analysis.warmup.WarmupWatch.observe`).
    """
    watch = WarmupWatch(rule, stop_when_steady=stop_when_steady)
    found: list[WarmupVerdict] = []

    def progress(snapshot: LoadProgress) -> bool:
        if display is not None:
            display(snapshot)
        done = snapshot.requests + snapshot.warmup_requests
        verdict = watch.observe(snapshot.elapsed_s, done, speed)
        if verdict is not None and not found:
            found.append(verdict)
        return bool(found)

    result = agent.run(spec_for(rule.cap_s), progress=progress)
    verdict = found[0] if found else watch.verdict_at_cap(float(result.duration_s or 0.0))
    return result, verdict


def _per_second(result: LoadResult) -> list[tuple[float, int]]:
    """(second, completed) of the whole seconds of the measured window."""
    whole = int(float(result.duration_s or 0.0) + 1e-6)
    return [(float(s.t), int(s.completed)) for s in result.per_second if s.t < whole]


def _requests_at(result: LoadResult, times: Sequence[float]) -> list[float]:
    """Cumulative requests completed at each time (seconds since the iteration began),
    interpolated within the per-second counts."""
    seconds = sorted((s.t, s.completed) for s in result.per_second)
    starts = [t for t, _ in seconds]
    cumulative = [0]
    for _, n in seconds:
        cumulative.append(cumulative[-1] + n)
    out: list[float] = []
    for t in times:
        k = bisect.bisect_right(starts, t) - 1
        if k < 0:
            out.append(0.0)
            continue
        within = min(1.0, max(0.0, t - starts[k]))
        out.append(cumulative[k] + within * seconds[k][1])
    return out


#: Fewest points of a series the drift test can call significant: Mann-Kendall reaches
#: p < 0.01 only from 6 values on (and then only for a strictly monotone series).
DRIFT_MIN_POINTS = 6

#: A progress snapshot: (seconds since the load started, requests completed so far; at one
#: core speed in a study's measured iterations, so not always whole).
Snapshot = tuple[float, float]


def snapshot_curve(
    snapshots: Sequence[Snapshot], *, min_gap_s: float = 0.2
) -> list[tuple[float, float]]:
    """``(t, requests/s)`` between consecutive progress snapshots (the engine's, every
    0.25 s), each interval at least ``min_gap_s`` long; ``t`` is the interval's end."""
    out: list[tuple[float, float]] = []
    last: Snapshot | None = None
    for t, n in sorted(snapshots):
        if last is None:
            last = (t, n)
            continue
        if t - last[0] >= min_gap_s:
            out.append((t, (n - last[1]) / (t - last[0])))
            last = (t, n)
    return out


def snapshot_series(snapshots: Sequence[Snapshot], *, min_gap_s: float = 0.2) -> list[float]:
    """Requests/s between consecutive progress snapshots (:func:`snapshot_curve`)."""
    return [rps for _, rps in snapshot_curve(snapshots, min_gap_s=min_gap_s)]


def measured_curve(
    measured: Sequence[tuple[LoadResult, Sequence[Sample], Sequence[Snapshot]]],
) -> list[tuple[float, float]]:
    """The measured iterations' throughput between progress snapshots, end to end: ``t`` runs
    on from one iteration to the next (their pauses left out)."""
    out: list[tuple[float, float]] = []
    offset = 0.0
    for result, _, snapshots in measured:
        out += [(round(offset + t, 3), rps) for t, rps in snapshot_curve(snapshots)]
        offset += float(result.duration_s or 0.0)
    return out


def leak_floors(interpreter: Interpreter) -> tuple[float, float | None]:
    """The leak test's two floors for a stack on ``interpreter``: bytes per 1,000 requests
    below which growth is no leak (higher on PyPy, whose JIT and heap grow for a while), and
    memory below which it is not one yet (the collection floor this PyPy reported on this
    host, :func:`pywebbench.meter.pypy_gc.probe`; None off PyPy, and when that PyPy could not
    be asked: growth is then judged without a floor, erring towards a leak)."""
    if not interpreter.is_pypy:
        return LEAK_FLOOR_BYTES_PER_1K, None
    try:
        return LEAK_FLOOR_JIT_BYTES_PER_1K, pypy_gc.probe(interpreter.path).floor_bytes
    except pypy_gc.ProbeError:
        return LEAK_FLOOR_JIT_BYTES_PER_1K, None


def replicate_checks(
    measured: Sequence[tuple[LoadResult, Sequence[Sample], Sequence[Snapshot]]],
    *,
    max_drift: float,
    leak_floor: float = LEAK_FLOOR_BYTES_PER_1K,
    collector_floor: float | None = None,
) -> tuple[Drift, Leak]:
    """The drift test over the measured throughput, and the leak test of memory (RSS of the
    process tree) against requests served, over a replicate's measured iterations in order.

    The drift series is the throughput between progress snapshots (about 4 a second): the
    engine's per-second series gives a 3 s iteration 3 points, too few for any trend test
    to reach p < 0.01. Without enough snapshots (below :data:`DRIFT_MIN_POINTS`), the
    per-second series is used. ``leak_floor``: bytes per 1,000 requests below which growth is
    not a leak (higher on a JIT interpreter: ``steady.LEAK_FLOOR_JIT_BYTES_PER_1K``);
    ``collector_floor``: memory below which growth is not yet a leak (PyPy's collection
    floor, :func:`pywebbench.analysis.steady.leak`)."""
    fine: list[float] = []
    series: list[float] = []
    requests: list[float] = []
    memory: list[float] = []
    served = 0.0
    for result, samples, snapshots in measured:
        fine += snapshot_series(snapshots)
        series += [float(n) for _, n in _per_second(result)]
        times = [s.t_s for s in samples]
        requests += [served + r for r in _requests_at(result, times)]
        memory += [float(s.rss_bytes) for s in samples]
        served += float(sum(s.completed for s in result.per_second))
    if len(fine) >= DRIFT_MIN_POINTS:
        series = fine
    return drift(series, max_drift=max_drift), leak(
        requests, memory, floor=leak_floor, collector_floor=collector_floor
    )
