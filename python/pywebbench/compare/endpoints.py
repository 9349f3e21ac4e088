"""Which endpoint of a traffic mix got slower (docs/mix.md, docs/compare.md): for a pair of
cells that both ran a mix, each endpoint's p50 and p99 latency NEW/BASE, ratios of medians
of its per-iteration figures with their CI over replicates (:mod:`pywebbench.analysis.ratio`,
as the cell's own latency ratios), and the endpoint whose p50 grew most.

A whole-mix figure hides a slow endpoint behind fast ones (a cheap health check at 40% of
the requests): the ratio per endpoint names it. The endpoints are ranked by their p50 ratio
(the median latency answers "which got slower"; a p99 moves with queueing behind any slow
request, on every endpoint alike).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from pywebbench.analysis.ratio import RatioEstimate, ratio_of_medians, seed_for
from pywebbench.store.endpoints import iteration_endpoints
from pywebbench.store.model import Iteration

#: Per endpoint (in the mix's order): its p50 and p99 (us) per replicate, per measured
#: iteration.
EndpointValues = dict[str, tuple[list[list[float]], list[list[float]]]]


def endpoint_values(measured: Sequence[Iteration]) -> EndpointValues:
    """Each endpoint's p50 and p99 of every measured iteration, grouped by replicate."""
    p50: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    p99: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for it in measured:
        for e in iteration_endpoints(it):
            summary = e["latency"].get("summary", {})
            if not e["requests"] or "p50" not in summary:
                continue
            p50[e["name"]][it.replicate].append(float(summary["p50"]))
            p99[e["name"]][it.replicate].append(float(summary["p99"]))
    return {
        name: (
            [reps[r] for r in sorted(reps)],
            [p99[name][r] for r in sorted(p99[name])],
        )
        for name, reps in p50.items()
    }


@dataclass(frozen=True)
class EndpointChange:
    """One endpoint of a pair's mix: its p50 and p99 latency NEW/BASE."""

    name: str
    p50: RatioEstimate
    p99: RatioEstimate | None

    @property
    def slower(self) -> bool:
        """Its p50's whole interval lies above 1 (no interval with one replicate a side:
        then it is not called slower, only named as the one that grew most)."""
        return not math.isnan(self.p50.low) and self.p50.low > 1.0


def endpoint_changes(
    base: EndpointValues, new: EndpointValues, name: str, level: float
) -> list[EndpointChange]:
    """The endpoints both sides measured, the one whose p50 grew most first (``name``
    seeds the intervals, as the pair's own ratios)."""
    out = []
    for endpoint, (b50, b99) in base.items():
        if endpoint not in new:
            continue
        n50, n99 = new[endpoint]
        seed = f"{name}|endpoint {endpoint}"
        p50 = ratio_of_medians(b50, n50, seed=seed_for(seed + "|p50"), level=level)
        if p50 is None:
            continue
        p99 = ratio_of_medians(b99, n99, seed=seed_for(seed + "|p99"), level=level)
        out.append(EndpointChange(endpoint, p50, p99))
    return ranked(out)


def ranked(changes: Sequence[EndpointChange]) -> list[EndpointChange]:
    """``changes`` with the endpoint whose p50 grew most first."""
    return sorted(changes, key=lambda c: -c.p50.ratio)


def grew_most(changes: Sequence[EndpointChange]) -> EndpointChange | None:
    """The endpoint whose p50 grew most, when one grew at all."""
    return changes[0] if changes and changes[0].p50.ratio > 1.0 else None


def grew_most_doc(changes: Sequence[EndpointChange]) -> dict[str, object] | None:
    """The JSON form of :func:`grew_most`: its name, and whether its interval says slower."""
    top = grew_most(changes)
    return {"name": top.name, "slower": top.slower} if top is not None else None
