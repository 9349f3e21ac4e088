"""Ties between ranked stacks, as a rule on plain data: the ratio of two stacks' throughput
with its CI, and when two neighbours are tied.

A ranking lists stacks by median requests/s. Two neighbours are *tied* when the 95% CI of
the ratio of their medians contains 1. The interval is
:func:`pywebbench.analysis.ratio.ratio_of_medians`'s, built on replicates (Welch's t on
their log figures below 10 a side, else a two-level bootstrap), so the spread between
server processes is in it. Fewer than two replicates on a side give no interval: the
ratio then says why (``RankRatio.why``) instead of carrying a zero-width one.

Two members of one interleaved group take the group's own ratio and interval instead
(:func:`group_neighbour`: slices of the same rounds, over the server processes). Two rows
measured in different groups, or a group's row beside one measured on its own, were measured
minutes apart in different rounds: their ratio gets no interval and is never a tie
(:func:`ranked_gaps`, :data:`ACROSS_GROUPS`). The console (:mod:`pywebbench.run.console`) and
the report (:mod:`pywebbench.report.build`) both rank with :func:`ranked_gaps`, and
:mod:`pywebbench.formatting` writes their results.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pywebbench.analysis.ratio import ratio_of_medians, seed_for


@dataclass(frozen=True)
class RankRatio:
    """How many times faster one stack is than another: ``ratio`` with its 95% CI.

    ``low``/``high`` are None when there is no interval (fewer than two replicates on a
    side); ``why`` then says so ("1 replicate").
    """

    ratio: float
    low: float | None = None
    high: float | None = None
    why: str = ""

    @property
    def tie(self) -> bool:
        """The CI contains 1: the difference is not significant."""
        return self.low is not None and self.high is not None and self.low <= 1.0 <= self.high


#: Replicates a side needs before its ratio gets a CI.
MIN_REPLICATES = 2


def rank_ratio(
    faster: Sequence[Sequence[float]], slower: Sequence[Sequence[float]], *, name: str
) -> RankRatio | None:
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
        return RankRatio(statistics.median(v for r in fast for v in r) / base, why="1 replicate")
    est = ratio_of_medians(slow, fast, seed=seed_for(name))
    if est is None:
        return None
    return RankRatio(est.ratio, est.low, est.high)


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
) -> RankRatio | None:
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
        return RankRatio(float(ratio), why="no interval")
    return RankRatio(float(ratio), float(low), float(high))


#: Why a ranked row's gap has no interval: the row above was measured in another interleaved
#: group, or one of the two in a group and the other on its own, minutes apart.
ACROSS_GROUPS = "different groups"


def group_id(flags: Mapping[str, Any]) -> tuple[str, str] | None:
    """The interleaved group a cell was measured in: its label and time span
    (``flags["group"]``); None for a cell measured on its own (a sequential study's, or one
    that took the per-cell path)."""
    g = flags.get("group")
    if not isinstance(g, Mapping):
        return None
    return (str(g.get("group")), str(g.get("span")))


def ranked_gaps(
    rps: Sequence[float],
    replicates: Sequence[Sequence[Sequence[float]]],
    flags: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    stacks: Sequence[str],
    *,
    workload: str,
) -> list[RankRatio | None]:
    """For rows ranked fastest first: each row's ratio to the row above (None for the first),
    with an interval only where both were measured in the same rounds.

    Both in one interleaved group: the group's fit (:func:`group_neighbour`). Both measured on
    their own (replicates spread over the study in rounds, so each interval takes in the
    host's drift): Welch's t over replicates (:func:`rank_ratio`; ``keys`` name the rows,
    "stack key@load point", and with ``workload`` seed its bootstrap). Otherwise the two were
    measured in different groups, minutes apart: the ratio of ``rps`` alone, ``why`` =
    :data:`ACROSS_GROUPS`, never a tie. ``stacks`` are the rows' stack keys (a group's
    ratios are stored by them)."""
    out: list[RankRatio | None] = [None]
    for i in range(1, len(rps)):
        upper, lower = group_id(flags[i - 1]), group_id(flags[i])
        if upper is None and lower is None:
            name = f"{workload}|{keys[i - 1]}|{keys[i]}"
            out.append(rank_ratio(replicates[i - 1], replicates[i], name=name))
        elif upper == lower:
            out.append(group_neighbour(flags[i - 1], flags[i], stacks[i]))
        elif rps[i] > 0:
            out.append(RankRatio(rps[i - 1] / rps[i], why=ACROSS_GROUPS))
        else:
            out.append(None)
    return out
