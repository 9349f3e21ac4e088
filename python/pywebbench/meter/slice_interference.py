"""Other processes' CPU on the cores of an interleaved run, sampled over time: what the
rotation's interference rule reads per slice (:func:`pywebbench.run.rotation.burst_rule`,
docs/ab.md#interference), and each server tree's own CPU (its requests per CPU-second).

The minimal honest guard, from what the kernel reports: the busy time of the server cores
(``/proc/stat`` per-CPU counters, read as the interference guard reads them: user, nice,
system, irq and softirq where the kernel charges those to tasks, and steal) minus the CPU
time of the variants' own server trees (every process of every variant, so the idle
variant's drain and housekeeping are not counted as interference). What is left is other
processes' work (and the kernel's for them) on those cores: the neighbours. A neighbour that
is there all the time slows both variants alike and is cancelled by the pairing; one that
comes and goes biases the ratio, and that is what the rule drops: a slice in which others
took more than the limit beyond their usual share.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pywebbench.meter.interference import core_times, tick_resolution_share
from pywebbench.meter.sampler import Trees, process_cpu_s


def cores_busy_s(cores: Sequence[int]) -> float:
    """Busy seconds of ``cores`` since boot, steal included: the meter's reading of
    ``/proc/stat`` (:func:`pywebbench.meter.interference.core_times`); NaN without it."""
    got = core_times(cores)
    return math.nan if got is None else got.busy_s + got.steal_s


@dataclass
class CoreAccounting:
    """Samples of the server cores' busy time and the server trees' CPU time, over time.
    With ``trees`` False, ``pids`` count as their own threads only (not their children):
    the generator cores' accounting, whose own process is this one, with the servers among
    its children (:meth:`generator`)."""

    cores: Sequence[int]
    pids: Sequence[int]
    trees: bool = True
    at: list[float] = field(default_factory=list)  # Unix time
    busy_s: list[float] = field(default_factory=list)
    own_s: list[float] = field(default_factory=list)  # all the trees
    #: Per tree (the index in ``pids``): its CPU seconds at each sample.
    tree_s: list[list[float]] = field(default_factory=list)
    #: The trees' processes, read cheaply (built at the first sample).
    _trees: Trees | None = field(default=None, repr=False)

    @classmethod
    def generator(cls, cores: Sequence[int]) -> CoreAccounting:
        """The load generator's cores, this process's own CPU set apart: what others took
        from the engine (a burst there slows a fast server's slices more than a slow one's,
        which a round does not cancel)."""
        import os

        return cls(cores, [os.getpid()], trees=False)

    def sample(self) -> None:
        """Take one sample now."""
        if not self.trees:
            trees = [process_cpu_s(pid) or math.nan for pid in self.pids]
        else:
            if self._trees is None:
                self._trees = Trees(self.pids)
            trees = self._trees.cpu_s()
        self.busy_s.append(cores_busy_s(self.cores))
        self.own_s.append(sum(trees))
        self.tree_s.append(trees)
        self.at.append(time.time())

    def _span(self, started_at: float, ended_at: float) -> tuple[int, int, float] | None:
        """The first and last samples inside [started_at, ended_at] and the time between."""
        i = bisect.bisect_left(self.at, started_at)
        j = bisect.bisect_right(self.at, ended_at) - 1
        if j <= i or self.at[j] <= self.at[i]:
            return None
        return i, j, self.at[j] - self.at[i]

    def other_share(self, started_at: float, ended_at: float) -> float | None:
        """Other processes' CPU on the server cores over the widest sampled span inside
        [started_at, ended_at], as a share of the cores' time; None without two samples."""
        got = self.other_share_read(started_at, ended_at)
        return got[0] if got is not None else None

    def other_share_read(self, started_at: float, ended_at: float) -> tuple[float, float] | None:
        """:meth:`other_share` and how finely it was read: the kernel counts CPU time in
        clock ticks, so a share over a span is known to about two ticks (one at each end)
        over the span's core time."""
        span = self._span(started_at, ended_at)
        if span is None:
            return None
        i, j, seconds = span
        other = (self.busy_s[j] - self.busy_s[i]) - (self.own_s[j] - self.own_s[i])
        if math.isnan(other):
            return None
        core_s = seconds * len(self.cores)
        return max(0.0, other) / core_s, tick_resolution_share(seconds, len(self.cores))

    def tree_share(self, tree: int, started_at: float, ended_at: float) -> float | None:
        """CPU seconds per second that tree ``tree`` (its index in ``pids``) used over the
        widest sampled span inside [started_at, ended_at]; None without two samples."""
        span = self._span(started_at, ended_at)
        if span is None:
            return None
        i, j, seconds = span
        return (self.tree_s[j][tree] - self.tree_s[i][tree]) / seconds
