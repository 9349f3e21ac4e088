"""Honest comparisons: the ratio of two stacks' throughput with its CI, and ties.

A ranking lists stacks by median requests/s. Two neighbours are *tied* when the 95% CI of
the ratio of their medians contains 1. The interval is
:func:`pywebbench.analysis.ratio.ratio_of_medians`'s, built on replicates (Welch's t on
their log figures below 10 a side, else a two-level bootstrap), so the spread between
server processes is in it. Fewer than two
replicates on a side give no interval: the report says so instead of a zero-width one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pywebbench.analysis.ratio import ratio_of_medians, seed_for
from pywebbench.report.view import RatioView

#: Replicates a side needs before its ratio gets a CI.
MIN_REPLICATES = 2


def ratio_view(
    faster: Sequence[Sequence[float]], slower: Sequence[Sequence[float]], *, name: str
) -> RatioView | None:
    """``faster`` / ``slower`` median requests/s with its CI (None without data).

    Each side is a list of replicates, each a list of measured iterations' requests/s.
    ``name`` seeds the bootstrap (10+ replicates), so the same data give the same interval.
    """
    fast = [list(r) for r in faster if r]
    slow = [list(r) for r in slower if r]
    if not fast or not slow:
        return None
    fewest = min(len(fast), len(slow))
    if fewest < MIN_REPLICATES:
        base = statistics.median(v for r in slow for v in r)
        if base <= 0:
            return None
        return RatioView(statistics.median(v for r in fast for v in r) / base, why="1 replicate")
    est = ratio_of_medians(slow, fast, seed=seed_for(name))
    if est is None:
        return None
    return RatioView(est.ratio, est.low, est.high)


def neighbour_ratios(
    rows: Sequence[Sequence[Sequence[float]]], keys: Sequence[str], *, workload: str
) -> list[RatioView | None]:
    """For rows ranked fastest first: each row's ratio to the row above (None for the first).

    ``keys`` name the rows ("stack key@load point"); with ``workload`` they seed each pair's
    bootstrap, so the console and the report give the same interval for the same data.
    """
    out: list[RatioView | None] = [None]
    for i in range(1, len(rows)):
        name = f"{workload}|{keys[i - 1]}|{keys[i]}"
        out.append(ratio_view(rows[i - 1], rows[i], name=name))
    return out


def group_estimate(flags: Mapping[str, Any]) -> tuple[float, float, float, int] | None:
    """An interleaved group's figure for a cell (``flags["group"]``,
    :mod:`pywebbench.run.interleaved`): (req/s at the group's average round, its interval's
    low and high, processes); NaN bounds without an interval; None when the cell was not
    measured in a group."""
    g = flags.get("group")
    if not isinstance(g, Mapping) or g.get("rps") is None:
        return None
    low, high = g.get("rps_low"), g.get("rps_high")
    return (
        float(g["rps"]),
        float(low) if low is not None else math.nan,
        float(high) if high is not None else math.nan,
        int(g.get("processes") or 0),
    )


def group_neighbour(
    above: Mapping[str, Any], below: Mapping[str, Any], below_key: str
) -> RatioView | None:
    """The row above's req/s over the row below's from their interleaved group's fit
    (``flags["group"]["vs"]``): the interval over server processes of slices of the same
    rounds. None unless both were measured in the same group."""
    a, b = above.get("group"), below.get("group")
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return None
    if (a.get("group"), a.get("span")) != (b.get("group"), b.get("span")):
        return None
    got = (a.get("vs") or {}).get(below_key)
    if got is None:
        return None
    ratio, low, high = got
    if low is None or high is None:
        return RatioView(float(ratio), why="no interval")
    return RatioView(float(ratio), float(low), float(high))


def fmt_ratio_ci(r: RatioView | None) -> str:
    """ "1.83× (95% CI 1.71–1.95)", or "1.83× (95% CI n/a: 1 replicate)"."""
    if r is None or math.isnan(r.ratio):
        return "–"
    return f"{r.ratio:.2f}× ({fmt_ci_only(r)})"


def fmt_ci_only(r: RatioView) -> str:
    """The CI part of a ratio: "95% CI 1.71–1.95" or "95% CI n/a (1 replicate)"."""
    if r.low is None or r.high is None:
        return f"95% CI n/a ({r.why})"
    return f"95% CI {r.low:.2f}–{r.high:.2f}"


def rank_marker(rank: int, tied: bool) -> str:
    """The rank as shown: "2", or "=2" when not significantly slower than the one above."""
    return f"={rank}" if tied else str(rank)
