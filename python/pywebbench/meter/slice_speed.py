"""Slices at one core speed: how fast the server cores ran over each slice, and the slices'
figures put at the run's median speed (docs/ab.md, "Core speed").

On a virtual machine the host changes how much work a CPU-second of the guest's core does,
in dips and steps that last from one second to minutes (docs/interference.md#core-speed).
A step that falls between the two slices of a round is not cancelled by the pairing. The
probe of :mod:`pywebbench.meter.core_speed` (a fixed loop pinned to the server cores, 2 ms
of every 100 ms) gives each slice its core's rate; each slice's requests/s is then scaled by
``(reference / rate) ** elasticity``, the reference being the median rate of the run's
slices and the elasticity the slope of log requests/s on log rate that the run's own slices
show, each side centred on its own level (:func:`pywebbench.analysis.elasticity.pooled_slope`,
:func:`~pywebbench.analysis.elasticity.speed_factor`).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pywebbench.analysis.elasticity import pooled_slope, speed_factor
from pywebbench.analysis.stats import median
from pywebbench.load.sliced import SliceStats
from pywebbench.meter.core_speed import CoreSpeedProbe


@dataclass
class SliceSpeeds:
    """The probe running on the server cores, read per slice."""

    probe: CoreSpeedProbe
    #: Unix time minus the monotonic clock the probe's readings use (slices are in Unix time).
    offset: float = field(default_factory=lambda: time.time() - time.monotonic())
    #: A slice's rate once read (a slice is complete when the engine reports it).
    _rates: dict[int, float | None] = field(default_factory=dict)

    @classmethod
    def start(cls, cpus: Iterable[int]) -> SliceSpeeds:
        """Start probing ``cpus``."""
        return cls(CoreSpeedProbe(cpus).start())

    def stop(self) -> None:
        """Stop probing (the readings stay)."""
        self.probe.stop()

    def rate(self, s: SliceStats) -> float | None:
        """The median rate of the readings taken during slice ``s`` (None without one)."""
        if s.index not in self._rates:
            readings = list(self.probe.readings)  # appended, in time order, by its thread
            at = bisect.bisect_left(readings, s.started_at - self.offset, key=lambda x: x[0])
            rates = []
            for t, r in readings[at:]:
                if t + self.offset > s.ended_at:
                    break
                if r > 0:
                    rates.append(r)
            self._rates[s.index] = median(rates) if rates else None
        return self._rates[s.index]


@dataclass(frozen=True)
class Scaled:
    """Slices at one core speed (or as measured, when a slice had no reading)."""

    slices: list[SliceStats]
    rates: dict[int, float]  # a slice's index -> its core's rate
    reference: float | None  # None: the slices are as measured
    elasticity: float = 1.0

    def span(self) -> tuple[float, float] | None:
        """The lowest and highest slice rate relative to the reference."""
        if self.reference is None or not self.rates:
            return None
        values = [r / self.reference for r in self.rates.values()]
        return min(values), max(values)


def at_one_speed(slices: Sequence[SliceStats], speeds: SliceSpeeds | None) -> Scaled:
    """``slices`` with their requests/s at the median core rate (module doc); as measured
    when not probed or when any slice that served requests had no reading: slices are scaled
    all together or not at all."""
    served = [s for s in slices if s.requests > 0]
    rates = {s.index: speeds.rate(s) for s in served} if speeds is not None else {}
    known = {i: r for i, r in rates.items() if r}
    if speeds is None or not served or len(known) < len(served):
        return Scaled(list(slices), known, None)
    reference = median(list(known.values()))
    targets = sorted({s.target for s in served})
    beta = pooled_slope([(known[s.index], s.rps) for s in served if s.target == t] for t in targets)
    out = [
        s.model_copy(update={"rps": s.rps * speed_factor(known[s.index], reference, beta)})
        if s.index in known
        else s
        for s in slices
    ]
    return Scaled(out, known, reference, beta)
