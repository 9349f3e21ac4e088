"""Compare paired cells: ratios with CIs, memory change and a verdict per pair.

The verdict rule (docs/compare.md) is on throughput, the figure people rank stacks by:

- *slower*: the whole confidence interval of NEW/BASE requests/s lies below 1 and the
  median ratio is at least ``min_change`` below 1;
- *faster*: the mirror image;
- *no significant change*: anything else.

The interval is :mod:`pywebbench.analysis.ratio`'s (over replicates) at
``level`` (99% by default: like asv's p < 0.002 rule, a verdict is a strong claim; on a
busy machine run-to-run drift is larger than within-run spread suggests). A cell that
failed in NEW while it worked in BASE gets the verdict *failed*; the reverse *recovered*.
A cell that other processes interfered with on either side (docs/interference.md) gets the
verdict *interfered*, whatever its ratio: its figure measured the machine, not the stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pywebbench.analysis.ratio import RatioEstimate, count_span, ratio, ratio_of_medians, seed_for
from pywebbench.compare.endpoints import EndpointChange, endpoint_changes
from pywebbench.compare.match import Pair
from pywebbench.meter.breakdown import (
    Growth,
    cpu_at_one_speed,
    growth,
    probed,
)
from pywebbench.meter.flame import FlameWindow

SLOWER = "slower"
FASTER = "faster"
SAME = "no significant change"
FAILED = "failed"
RECOVERED = "recovered"
BOTH_FAILED = "failed in both"
NO_DATA = "no data"
INTERFERED = "interfered"

DEFAULT_LEVEL = 0.99
DEFAULT_MIN_CHANGE = 0.02


@dataclass
class PairComparison:
    """The comparison of one pair of cells."""

    pair: Pair
    verdict: str
    rps: RatioEstimate | None = None
    p50: RatioEstimate | None = None  # of per-iteration p50 latencies
    p99: RatioEstimate | None = None  # of per-iteration p99 latencies
    memory_change_bytes: int | None = None  # NEW - BASE peak RSS of the server tree
    memory_ratio: float | None = None
    #: The server tree's CPU seconds per request in the measured iterations (the same ones
    #: as ``rps``, at the same core speed), NEW/BASE of medians with its CI. Its medians are
    #: each side's CPU per request; times req/s it gives the share of a core used.
    cpu: RatioEstimate | None = None
    #: With sampled windows on both sides (``run --flamegraph``): the functions whose CPU per
    #: request changed most (docs/flamegraphs.md#compare); shown for slower and faster cells.
    grown: list[Growth] = field(default_factory=list)
    #: The sampled windows, BASE and NEW (what ``grown`` and the differential flame graph
    #: read): their CPU times at the core speed the req/s are put at when every window of
    #: both sides has its core's rate (``cpu_at_one_speed``).
    flames: tuple[list[FlameWindow], list[FlameWindow]] | None = None
    cpu_at_one_speed: bool = False
    #: ``--instructions``: NEW/BASE instructions per request (medians over the counts), and
    #: its least and most (the smallest NEW count over the largest BASE one, and back).
    instructions: tuple[float, float, float] | None = None
    #: Both sides ran a mix: each endpoint's p50 and p99 NEW/BASE, the one whose p50 grew
    #: most first (:mod:`pywebbench.compare.endpoints`).
    endpoints: list[EndpointChange] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.pair.label

    @property
    def significant(self) -> bool:
        return self.verdict in (SLOWER, FASTER)


def throughput_verdict(rps: RatioEstimate | None, min_change: float) -> str:
    """The verdict on a requests/s ratio (see the module docstring)."""
    if rps is None:
        return NO_DATA
    if rps.high < 1.0 and rps.ratio <= 1.0 - min_change:
        return SLOWER
    if rps.low > 1.0 and rps.ratio >= 1.0 + min_change:
        return FASTER
    return SAME


def compare_pair(
    pair: Pair,
    *,
    level: float = DEFAULT_LEVEL,
    min_change: float = DEFAULT_MIN_CHANGE,
) -> PairComparison:
    """Ratios, CIs, memory change and verdict of one pair."""
    base, new = pair.base, pair.new
    if new.failed or base.failed:
        verdict = BOTH_FAILED if new.failed and base.failed else FAILED if new.failed else RECOVERED
        return PairComparison(pair, verdict)
    name = f"{base.label} -> {new.label}"
    rps = ratio_of_medians(base.rps, new.rps, seed=seed_for(name + "|rps"), level=level)
    verdict = (
        INTERFERED if base.interfered or new.interfered else throughput_verdict(rps, min_change)
    )
    out = PairComparison(pair, verdict, rps=rps)
    out.p50 = ratio_of_medians(base.p50_us, new.p50_us, seed=seed_for(name + "|p50"), level=level)
    out.p99 = ratio_of_medians(base.p99_us, new.p99_us, seed=seed_for(name + "|p99"), level=level)
    out.cpu = ratio_of_medians(
        base.cpu_per_request, new.cpu_per_request, seed=seed_for(name + "|cpu"), level=level
    )
    if base.peak_rss_bytes and new.peak_rss_bytes:
        out.memory_change_bytes = new.peak_rss_bytes - base.peak_rss_bytes
        out.memory_ratio = ratio(new.peak_rss_bytes, base.peak_rss_bytes)
    if base.flames and new.flames:
        flames_b, flames_n = base.flames, new.flames
        reference = base.speed_reference
        scaled = base.elasticity > 0 or new.elasticity > 0
        if reference and scaled and probed([*flames_b, *flames_n]):
            flames_b = cpu_at_one_speed(flames_b, reference, base.elasticity)
            flames_n = cpu_at_one_speed(flames_n, reference, new.elasticity)
            out.cpu_at_one_speed = True
        out.flames = (flames_b, flames_n)
        out.grown = growth(flames_b, flames_n)
    if base.instructions and new.instructions:
        out.instructions = count_span(base.instructions, new.instructions)
    out.endpoints = endpoint_changes(base.endpoints, new.endpoints, name, level)
    return out


def compare_pairs(
    pairs: Sequence[Pair],
    *,
    level: float = DEFAULT_LEVEL,
    min_change: float = DEFAULT_MIN_CHANGE,
) -> list[PairComparison]:
    """:func:`compare_pair` of every pair, in order."""
    return [compare_pair(p, level=level, min_change=min_change) for p in pairs]
