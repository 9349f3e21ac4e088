"""The runner's side of steady state: warm up until steady, then test what was measured.

:func:`warm_until_steady` runs one warm-up load that stops as soon as the rule of
:class:`pywebbench.steady.WarmupWatch` is met (or at its cap). :func:`replicate_checks`
runs the drift and leak tests over a replicate's measured iterations.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from pywebbench.load import LoadAgent, LoadProgress
from pywebbench.load.result import LoadResult
from pywebbench.steady import Drift, Leak, SteadyRule, WarmupVerdict, WarmupWatch, drift, leak
from pywebbench.store import Sample


def warm_until_steady(
    agent: LoadAgent,
    spec_for: Callable[[float], Any],
    rule: SteadyRule,
    display: Callable[[LoadProgress], None] | None = None,
) -> tuple[LoadResult, WarmupVerdict]:
    """One warm-up load of at most ``rule.cap_s`` seconds, stopped once steady.

    ``spec_for(duration_s)`` builds the load spec; ``display`` gets every progress snapshot.
    """
    watch = WarmupWatch(rule)
    found: list[WarmupVerdict] = []

    def progress(snapshot: LoadProgress) -> bool:
        if display is not None:
            display(snapshot)
        done = snapshot.requests + snapshot.warmup_requests
        verdict = watch.observe(snapshot.elapsed_s, done)
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


def replicate_checks(
    measured: Sequence[tuple[LoadResult, Sequence[Sample]]], *, max_drift: float
) -> tuple[Drift, Leak]:
    """The drift test over the measured per-second throughput, and the leak test of memory
    (RSS of the process tree) against requests served, over a replicate's measured
    iterations in order."""
    series: list[float] = []
    requests: list[float] = []
    memory: list[float] = []
    served = 0.0
    for result, samples in measured:
        series += [float(n) for _, n in _per_second(result)]
        times = [s.t_s for s in samples]
        requests += [served + r for r in _requests_at(result, times)]
        memory += [float(s.rss_bytes) for s in samples]
        served += float(sum(s.completed for s in result.per_second))
    return drift(series, max_drift=max_drift), leak(requests, memory)
