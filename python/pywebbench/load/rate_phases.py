"""Open-loop rate phases: the command line's ``--rate`` forms, and offered vs achieved rate
per phase of a result.

``--rate`` takes a constant rate (``5000``), a linear ramp (``1000:20000:30s``: from 1000 to
20000 requests/s over 30 s) or steps (``1000,5000,10000@10s``: 10 s at each rate). After the
phases the last rate is held; the measured duration defaults to the phases' length, so by
default the run ends with them. The engine follows the phases with constant or Poisson
arrivals (docs/load-engine.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pywebbench.load.result import LoadResult
from pywebbench.load.spec import RatePhase

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_NUMBER = r"\d+(?:\.\d*)?|\.\d+"
FORMS = "R, FROM:TO:DURATION (a ramp) or R1,R2,...@DURATION (steps), e.g. 1000:20000:30s"


def _seconds(text: str) -> float:
    m = re.fullmatch(rf"\s*({_NUMBER})\s*(ms|s|m|h)?\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a duration like 10s, 500ms, 1m")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _rate(text: str) -> float:
    if not re.fullmatch(rf"\s*({_NUMBER})\s*", text):
        raise ValueError(f"{text!r} is not a rate (requests/s)")
    return float(text)


def parse_rate(text: str) -> float | list[RatePhase]:
    """A ``--rate`` value: a constant rate, or the phases of a ramp or of steps.

    Raises:
        ValueError: one line saying which forms are accepted. The engine checks the ranges.
    """
    try:
        if "@" in text:
            rates, _, step = text.partition("@")
            seconds = _seconds(step)
            return [RatePhase(rate=_rate(r), duration_s=seconds) for r in rates.split(",")]
        parts = text.split(":")
        if len(parts) == 3:
            start, end, over = parts
            return [RatePhase(rate=_rate(start), end_rate=_rate(end), duration_s=_seconds(over))]
        if len(parts) == 1:
            return _rate(text)
        raise ValueError("a ramp has three parts")
    except ValueError as e:
        raise ValueError(f"expected {FORMS}; got {text!r} ({e})") from None


def describe(phases: Sequence[RatePhase]) -> str:
    """Rate phases in words: ``ramp 1,000 -> 20,000/s over 30 s``, ``steps 1,000, 5,000/s, 10 s
    each``, or the phases one by one."""
    if len(phases) == 1 and phases[0].end_rate is not None:
        p = phases[0]
        return f"ramp {p.rate:,.0f} -> {p.last_rate:,.0f}/s over {p.duration_s:g} s"
    if all(p.end_rate is None and p.duration_s == phases[0].duration_s for p in phases):
        rates = ", ".join(f"{p.rate:,.0f}" for p in phases)
        return f"steps {rates}/s, {phases[0].duration_s:g} s each"
    return "; ".join(_phase_words(p) for p in phases)


def _phase_words(p: RatePhase) -> str:
    if p.end_rate is None:
        return f"{p.rate:,.0f}/s for {p.duration_s:g} s"
    return f"{p.rate:,.0f} -> {p.last_rate:,.0f}/s over {p.duration_s:g} s"


def _mean_over(result: LoadResult, a: float, b: float, offered: bool) -> float:
    """The mean achieved (or offered) rate from the per-second series over [a, b) of the
    measured phase, each second weighted by its overlap (its measured part for the last)."""
    total = 0.0
    weight = 0.0
    for s in result.per_second:
        lo, hi = max(a, float(s.t)), min(b, s.t + 1.0, result.duration_s)
        end = min(s.t + 1.0, result.duration_s)
        if hi <= lo or end <= s.t:
            continue
        per_s = (s.offered_rate or 0.0) if offered else s.completed / (end - s.t)
        total += per_s * (hi - lo)
        weight += hi - lo
    return total / weight if weight else 0.0


def phase_lines(result: LoadResult) -> list[str]:
    """Offered vs achieved rate per phase (and for the held last rate, when the run went on
    past the phases), and how closely each whole second tracked the offered rate."""
    phases = result.spec.rate_phases
    if not phases or result.mode != "open":
        return []
    spans: list[tuple[str, float, float]] = []
    t = 0.0
    for p in phases:
        spans.append((_phase_words(p), t, t + p.duration_s))
        t += p.duration_s
    if result.duration_s > t + 0.5:
        spans.append((f"{phases[-1].last_rate:,.0f}/s held", t, result.duration_s))
    lines = []
    for i, (words, a, b) in enumerate(spans, 1):
        b = min(b, result.duration_s)
        if b <= a:
            break
        offered = _mean_over(result, a, b, offered=True)
        achieved = _mean_over(result, a, b, offered=False)
        share = f" ({100 * achieved / offered:.1f}%)" if offered > 0 else ""
        lines.append(
            f"    phase {i}  {a:>6.1f}-{b:<6.1f}s  {words:<34} offered {offered:>10,.0f}/s  "
            f"achieved {achieved:>10,.0f}/s{share}"
        )
    tracked = tracking_error(result)
    if tracked is not None:
        worst_t, error = tracked
        lines.append(
            f"    per second: achieved within {100 * abs(error):.1f}% of offered "
            f"(whole seconds after the first; worst at t={worst_t} s)"
        )
    return lines


def tracking_error(result: LoadResult) -> tuple[int, float] | None:
    """The second (after the first, whole seconds only) whose achieved rate strayed furthest
    from its offered rate, and by how much (achieved / offered - 1); None without such
    seconds."""
    worst: tuple[int, float] | None = None
    for s in result.per_second:
        if s.t < 1 or s.t + 1 > result.duration_s or not s.offered_rate:
            continue
        error = s.completed / s.offered_rate - 1.0
        if worst is None or abs(error) > abs(worst[1]):
            worst = (s.t, error)
    return worst
