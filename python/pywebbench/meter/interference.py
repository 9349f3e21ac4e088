"""Interference: the CPU time other processes took on the cores an iteration was pinned to.

The per-CPU counters of ``/proc/stat`` say how long each core was busy (user, nice and
system time) and how long the hypervisor gave it to someone else (steal). Over an
iteration's window, the busy time of the pinned cores (the server's and the generator's)
minus what the server's process tree and pywebbench's own process (the load generator's
threads, the meter) used is the time *other* processes took from them. A process that
shares the server's core takes throughput with it and shows nowhere else: a neighbour
spinning 30% of every 100 ms took a server to 86-87% of its core and 0.74-0.82x of its
throughput, unflagged (docs/interference.md).

An iteration is *interfered* when other processes and steal took more than a share of one
core over its window (``load.interference_max``, default 5%). Counters are clock ticks
(usually 10 ms); over a window of seconds that is well under the threshold.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

_STAT = "/proc/stat"


def _ticks_per_s() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100.0


@dataclass(frozen=True)
class CoreTimes:
    """Cumulative seconds of some cores, from ``/proc/stat``: busy (user + nice + system)
    and steal."""

    busy_s: float
    steal_s: float


def core_times(cpus: Iterable[int], stat_path: str = _STAT) -> CoreTimes | None:
    """The summed counters of ``cpus`` now; None when ``/proc/stat`` is unreadable or lists
    none of them (not Linux, or CPUs that do not exist)."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = 0
    found = 0
    try:
        with open(stat_path) as f:
            for line in f:
                fields = line.split()
                if not fields or fields[0] not in wanted:
                    continue
                ticks = [int(x) for x in fields[1:]]
                ticks += [0] * (8 - len(ticks))
                busy += ticks[0] + ticks[1] + ticks[2]
                steal += ticks[7]
                found += 1
    except (OSError, ValueError):
        return None
    if not found:
        return None
    hz = _ticks_per_s()
    return CoreTimes(busy_s=busy / hz, steal_s=steal / hz)


@dataclass(frozen=True)
class Interference:
    """What other processes took from an iteration's cores over its window."""

    window_s: float
    others_cpu_s: float  # busy time of the pinned cores not used by the server or pywebbench
    steal_s: float  # time the hypervisor ran something else on them

    @property
    def share(self) -> float:
        """Others' CPU plus steal, as a share of one core over the window (0.13 = 13%)."""
        if self.window_s <= 0:
            return 0.0
        return (self.others_cpu_s + self.steal_s) / self.window_s

    def interfered(self, max_share: float) -> bool:
        """Whether others took more than ``max_share`` of a core over the window."""
        return self.share > max_share

    def without(self, cpu_s: float) -> Interference:
        """The same window with ``cpu_s`` more of the busy time accounted for (the load
        generator's, when it ran in other processes of this host: Ray load agents)."""
        return Interference(
            self.window_s, max(0.0, self.others_cpu_s - max(0.0, cpu_s)), self.steal_s
        )

    def to_dict(self) -> dict[str, float]:
        """The figures, rounded for the store (seconds and the share)."""
        return {
            "window_s": round(self.window_s, 3),
            "others_cpu_s": round(self.others_cpu_s, 3),
            "steal_s": round(self.steal_s, 3),
            "share": round(self.share, 4),
        }


class InterferenceWindow:
    """Reads the pinned cores' counters and pywebbench's own CPU at the start of a window;
    :meth:`close` gives the :class:`Interference` over it, given the server tree's CPU."""

    def __init__(self, cpus: Iterable[int]) -> None:
        self.cpus = sorted(set(cpus))
        self._start = core_times(self.cpus)
        self._own = time.process_time()
        self._at = time.monotonic()

    def close(self, server_cpu_s: float | None) -> Interference | None:
        """The interference over the window; None without counters or the server's CPU."""
        end = core_times(self.cpus)
        if self._start is None or end is None or server_cpu_s is None:
            return None
        own = time.process_time() - self._own
        busy = end.busy_s - self._start.busy_s
        return Interference(
            window_s=time.monotonic() - self._at,
            others_cpu_s=max(0.0, busy - server_cpu_s - own),
            steal_s=max(0.0, end.steal_s - self._start.steal_s),
        )
