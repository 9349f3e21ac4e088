"""Rows of the knee search (docs/slo.md): every probe, and the knee of each replicate.

Two tables of the results store (docs/store-schema.md), written by
:mod:`pywebbench.run.knee`. A ``knees`` row is written only when a search ends by itself, so
a search that was interrupted leaves its probes but no knee; the reports draw the probes of
replicates that have one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class KneeProbe:
    """One open-loop load window of a knee search, at one offered rate."""

    id: int | None
    cell_id: int
    replicate: int
    idx: int  # 0-based, in the order the search ran them
    phase: str  # "bracket" | "bisect"
    started_at: str
    rate_offered: float  # requests/s scheduled
    rate_achieved: float  # requests/s completed
    duration_s: float  # measured window (after the probe's warm-up)
    requests: int
    errors: int  # errors + timeouts
    latency_us: float  # the SLO's percentile, from the intended send time (CO corrected)
    latency_p50_us: float
    samples: int  # latency values behind the percentile
    verdict: str  # "pass" | "latency" | "errors" | "rate"
    schedule_lag_p99_us: float | None = None  # how late the generator sent (its own CPU wait)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


@dataclass
class Knee:
    """How one replicate's knee search ended."""

    id: int | None
    cell_id: int
    replicate: int
    slo: str  # "p99=50ms"
    percentile: float
    target_us: float
    status: str  # "found" | "not_met"
    knee_rps: float | None  # the highest rate that met the SLO (None: not met)
    fail_rps: float | None  # the lowest rate above it that did not (None: none probed)
    lowest_rps: float  # the lowest rate probed
    ended: str  # "tolerance" | "budget" | "ceiling" | "floor"
    probes: int
    search_s: float
    min_samples: int  # samples each probe aimed for
    finished_at: str
    # The highest rate whose probes disagreed (the edge flips up to it; None: none did),
    # and the probes per rate (docs/slo.md).
    flip_rps: float | None = None
    repeats: int = 1
