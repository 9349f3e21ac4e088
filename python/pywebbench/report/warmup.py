"""A point's warm-up curves and memory, from its replicates' rows (docs/report.md).

- Warm-up curve: requests/s per 0.25 s bucket since the warm-up began (``warmup_curve_json``
  of a steady warm-up), then the measured iterations' per-second requests/s on the same
  clock, laid end to end after the warm-up. A fixed warm-up has no stored curve: its
  iterations' per-second series stands in. Each replicate carries its class (flat,
  warm-up, slowdown, no steady state: pywebbench.analysis.warmup_class).
- Memory: idle RSS at startup, RSS at the end of the warm-up and at the end of the last
  measured iteration, medians over replicates; the leak slope is the median of the
  replicates' Theil-Sen slopes, its interval the lowest to highest bound of their 95% CIs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pywebbench.analysis import stats
from pywebbench.analysis.warmup_class import unsettled
from pywebbench.report.series import per_second_rps
from pywebbench.report.view import MemoryView, WarmupCurve
from pywebbench.store.model import Iteration, Replicate

MIB = 1024 * 1024


def _median_mib(values: Sequence[int | None]) -> float | None:
    vals = [float(v) for v in values if v]
    return stats.median(vals) / MIB if vals else None


def _finite(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def memory_view(reps: Sequence[Replicate], its_by_rep: Sequence[list[Iteration]]) -> MemoryView:
    """The memory of a point: ``reps`` and, for each, its iterations (warm-up first)."""
    warm_end = []
    last_end = []
    for its in its_by_rep:
        warm = [i for i in its if i.kind == "warmup"]
        measured = [i for i in its if i.kind == "measured"]
        if warm:
            warm_end.append(warm[-1].rss_end_bytes)
        if measured:
            last_end.append(measured[-1].rss_end_bytes)
    slopes, lows, highs, points = [], [], [], 0
    for r in reps:
        leak = r.leak
        slope = _finite(leak, "bytes_per_1k")
        if slope is None:
            continue
        slopes.append(slope / 1024)
        points += int(leak.get("points", 0) or 0)
        lo, hi = _finite(leak, "ci_low"), _finite(leak, "ci_high")
        if lo is not None and hi is not None:
            lows.append(lo / 1024)
            highs.append(hi / 1024)
    return MemoryView(
        startup_mib=_median_mib([r.idle_rss_bytes for r in reps]),
        warm_mib=_median_mib(warm_end),
        end_mib=_median_mib(last_end),
        leak_kb_per_1k=stats.median(slopes) if slopes else None,
        leak_ci_kb=(min(lows), max(highs)) if lows else None,
        leak_points=points,
    )


def _laid_out(its: Sequence[Iteration], start_s: float) -> tuple[list[tuple[float, float]], float]:
    """Per-second req/s of ``its`` laid end to end from ``start_s``; and where they end."""
    out: list[tuple[float, float]] = []
    t0 = start_s
    for it in its:
        ts, rps = per_second_rps(it)
        out += [(round(t0 + t, 3), v) for t, v in zip(ts, rps, strict=True)]
        t0 += it.duration_s
    return out, t0


def warmup_curve(
    index: int, rep: Replicate | None, its: Sequence[Iteration], *, cap_judged: bool = True
) -> WarmupCurve:
    """Replicate ``index`` of a point: its warm-up curve and its measured per-second series.
    ``cap_judged``: its class says whether a capped warm-up had settled (stores written
    since a capped warm-up is judged again with its measured series: the cell's flags hold
    a ``classification``); else any cap is unsettled, as the cell's flag then meant."""
    warm = [i for i in its if i.kind == "warmup"]
    measured = [i for i in its if i.kind == "measured"]
    stored = rep.warmup_curve if rep is not None else []
    curve = [(float(t), float(v)) for t, v in stored if isinstance(t, int | float)]
    if curve:
        warmup_s = rep.warmup_s if rep is not None and rep.warmup_s else curve[-1][0]
    else:  # a fixed warm-up: its iterations' per-second series
        curve, warmup_s = _laid_out(warm, 0.0)
    after, _ = _laid_out(measured, float(warmup_s or 0.0))
    return WarmupCurve(
        replicate=index,
        end=(rep.warmup_end or "") if rep is not None else "",
        warmup_s=float(warmup_s) if warmup_s else None,
        steady_start_s=rep.steady_start_s if rep is not None else None,
        curve=curve,
        measured=after,
        warmup_class=(rep.warmup_class or "") if rep is not None else "",
        unsettled=rep is not None
        and (
            unsettled(rep.warmup_end, rep.warmup_class) if cap_judged else rep.warmup_end == "cap"
        ),
    )
