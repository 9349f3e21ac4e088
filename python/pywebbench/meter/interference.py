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

Interrupt time is counted where the kernel charges it. A kernel that accounts CPU time by
clock tick without ``CONFIG_IRQ_TIME_ACCOUNTING`` (this project's machine, many VMs) charges
a tick spent in an interrupt or softirq to the task it interrupted, while ``/proc/stat``
files it under ``irq``/``softirq``, not ``system``: the server's own network processing is
then in its CPU time but not in the cores' busy time. Busy time includes those columns on
such kernels, or a hello server's softirq (1.3 s of a 4.2-s window here) would hide a
neighbour's whole share. A kernel with precise interrupt accounting (on at run time)
charges interrupts to no task, so there busy time leaves them out (:func:`irq_time_in_tasks`).
"""

from __future__ import annotations

import functools
import gzip
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

_STAT = "/proc/stat"
_USER, _NICE, _SYSTEM, _IDLE, _IOWAIT, _IRQ, _SOFTIRQ, _STEAL = range(8)
_CONFIGS = ("/proc/config.gz", f"/boot/config-{os.uname().release}")


def _ticks_per_s() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100.0


@dataclass(frozen=True)
class CoreTimes:
    """Cumulative seconds of some cores, from ``/proc/stat``: busy (user + nice + system,
    plus irq + softirq where the kernel charges those to tasks), steal, idle (idle +
    iowait), and the irq + softirq time charged to no task (0 where it is in busy); ``cores``:
    how many of the cores asked for ``/proc/stat`` listed (an offline CPU has no line)."""

    busy_s: float
    steal_s: float
    idle_s: float = 0.0
    untasked_irq_s: float = 0.0
    cores: int = 1


def _kernel_config_says(configs: Iterable[str]) -> bool | None:
    """What the first readable kernel config says of ``CONFIG_IRQ_TIME_ACCOUNTING``:
    True when it is set, False when it is not, None without a readable config."""
    for path in configs:
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                text = f.read()
        except OSError:
            continue
        return "CONFIG_IRQ_TIME_ACCOUNTING=y" in text
    return None


def irq_time_in_tasks(configs: tuple[str, ...] = _CONFIGS, stat_path: str = _STAT) -> bool:
    """Whether the kernel charges interrupt and softirq time to the interrupted task (tick
    accounting without precise interrupt accounting). First from ``/proc/stat``: tick
    accounting almost never finds a tick inside a hard interrupt, so its ``irq`` column
    stays 0, while precise interrupt accounting adds every timer interrupt's microseconds to
    it. A kernel built with ``CONFIG_IRQ_TIME_ACCOUNTING`` may still have it off at run time
    (``tsc=noirqtime``, an unstable TSC on a VM): the column says what it does. With a
    moving ``irq`` column, the kernel's config decides (False without one)."""
    try:
        with open(stat_path) as f:
            fields = f.readline().split()  # the "cpu" line: all cores
        if fields[0] == "cpu" and int(fields[1 + _IRQ]) == 0:
            return True
    except (OSError, ValueError, IndexError):
        pass
    return _kernel_config_says(configs) is False


@functools.cache
def _irq_time_in_tasks_here() -> bool:
    """:func:`irq_time_in_tasks` of this machine's kernel, read once."""
    return irq_time_in_tasks()


def core_times(
    cpus: Iterable[int], stat_path: str = _STAT, irq_in_tasks: bool | None = None
) -> CoreTimes | None:
    """The summed counters of ``cpus`` now; None when ``/proc/stat`` is unreadable or lists
    none of them (not Linux, or CPUs that do not exist). Busy time includes interrupt time
    when the kernel charges it to tasks (``irq_in_tasks``; None: :func:`irq_time_in_tasks`)."""
    if irq_in_tasks is None:
        irq_in_tasks = _irq_time_in_tasks_here()
    busy_columns = (_USER, _NICE, _SYSTEM) + ((_IRQ, _SOFTIRQ) if irq_in_tasks else ())
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = idle = untasked_irq = 0
    found = 0
    try:
        with open(stat_path) as f:
            for line in f:
                fields = line.split()
                if not fields or fields[0] not in wanted:
                    continue
                ticks = [int(x) for x in fields[1:]]
                ticks += [0] * (8 - len(ticks))
                busy += sum(ticks[i] for i in busy_columns)
                steal += ticks[_STEAL]
                idle += ticks[_IDLE] + ticks[_IOWAIT]
                if not irq_in_tasks:
                    untasked_irq += ticks[_IRQ] + ticks[_SOFTIRQ]
                found += 1
    except (OSError, ValueError):
        return None
    if not found:
        return None
    hz = _ticks_per_s()
    return CoreTimes(
        busy_s=busy / hz,
        steal_s=steal / hz,
        idle_s=idle / hz,
        untasked_irq_s=untasked_irq / hz,
        cores=found,
    )


@dataclass(frozen=True)
class Interference:
    """What other processes took from an iteration's cores over its window."""

    window_s: float
    others_cpu_s: float  # busy time of the pinned cores not used by the server or pywebbench
    steal_s: float  # time the hypervisor ran something else on them
    #: With the two sides accounted apart: what was left over on the server's cores and on
    #: the generator's, before each is clamped at 0 (others_cpu_s sums the clamped ones).
    sides: tuple[float, float] | None = None

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
        generator's, when it ran in other processes of this host: Ray load agents). With
        the sides apart it comes off the generator's side only: a neighbour of the server
        stays counted."""
        cpu_s = max(0.0, cpu_s)
        if self.sides is None:
            return Interference(self.window_s, max(0.0, self.others_cpu_s - cpu_s), self.steal_s)
        server, generator = self.sides[0], self.sides[1] - cpu_s
        return Interference(
            self.window_s,
            max(0.0, server) + max(0.0, generator),
            self.steal_s,
            (server, generator),
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
    :meth:`close` gives the :class:`Interference` over it, given the server tree's CPU.

    With the server's cores apart from the generator's (``server_cpus``), each side is
    accounted on its own and only what is left over on each counts: the server's cores
    hold the server and pywebbench's threads pinned there (the core-speed probe); the
    generator's hold the rest of pywebbench. Summed over all the cores instead, the
    generator's shortfall hides a neighbour of the server: a clock tick charges a whole
    tick to the task it lands on, and a generator that wakes and sleeps between ticks is
    under-counted on its core (0.12 s of a 2-s io_uring hello window here, 6% of a core,
    against the 5% threshold)."""

    def __init__(
        self, cpus: Iterable[int], server_cpus: Iterable[int] = (), *, stat_path: str = _STAT
    ) -> None:
        self.cpus = sorted(set(cpus))
        server = sorted(set(server_cpus) & set(self.cpus))
        rest = sorted(set(self.cpus) - set(server))
        #: the server's cores and the generator's, or all of them as one when not apart
        self.groups = [server, rest] if server and rest else [self.cpus]
        self._stat_path = stat_path
        self._start = [core_times(g, stat_path) for g in self.groups]
        self._own = time.process_time()
        self._at = time.monotonic()

    def close(
        self, server_cpu_s: float | None, own_on_server_cpus_s: float = 0.0
    ) -> Interference | None:
        """The interference over the window; None without counters or the server's CPU.
        ``own_on_server_cpus_s``: CPU seconds of pywebbench's threads pinned to the
        server's cores over the window (the core-speed probe's)."""
        end = [core_times(g, self._stat_path) for g in self.groups]
        pairs = [(b, e) for b, e in zip(self._start, end, strict=True) if b and e]
        if server_cpu_s is None or len(pairs) < len(self.groups):
            return None
        own = time.process_time() - self._own
        busy = [e.busy_s - b.busy_s for b, e in pairs]
        steal = sum(e.steal_s - b.steal_s for b, e in pairs)
        window_s = time.monotonic() - self._at
        if len(self.groups) == 1:
            others = max(0.0, busy[0] - server_cpu_s - own)
            return Interference(window_s, others, max(0.0, steal))
        sides = (
            busy[0] - server_cpu_s - own_on_server_cpus_s,
            busy[1] - (own - own_on_server_cpus_s),
        )
        others = max(0.0, sides[0]) + max(0.0, sides[1])
        return Interference(window_s, others, max(0.0, steal), sides)


def tick_resolution_share(span_s: float, cores: int = 1) -> float:
    """How finely a share of ``cores`` over ``span_s`` is known from ``/proc/stat``: one
    clock tick at each end of the span (2% of a 1-s span of one core, 8% of a 0.25-s one)."""
    return 2.0 / _ticks_per_s() / (span_s * cores) if span_s > 0 and cores > 0 else math.inf


class AvailableShare:
    """The share of the server's cores the server had over each bucket of a warm-up curve.

    Each call reads the server tree's CPU (``server_cpu_s()``, to the nanosecond:
    :func:`~pywebbench.meter.sampler.trees_cpu_s`), pywebbench's own CPU there
    (``own_cpu_s()``: the core-speed probe's), the server cores' idle time, the steal of the
    generator's cores (``generator_cpus``) and the clock. The server lost, since the
    previous call:

    - the cores' time that was neither idle, nor the server's or pywebbench's, nor
      interrupts charged to no task: other processes', and the hypervisor's steal on a VM.
      It is read against the clock rather than the cores' busy ticks: tick-sampled busy
      time is off by a tick at each end, and a share known to four ticks (16% of a 0.25-s
      bucket) let a neighbour's 24% pass as nothing;
    - the time its cores sat idle while the hypervisor held the generator's (its steal
      there, up to the server's idle time): a generator that is not running sends nothing,
      and a load that waits for the generator (closed loop, a connection per request) waits.
      Pass no ``generator_cpus`` for an open-loop load, or when they are unknown. Steal on
      the generator's cores while the server stayed busy cost nothing: the requests in
      flight kept it going.

    The generator's steal is averaged over its cores: one generator thread on one of two
    held cores reads as half its loss. That the server's idle time and the generator's
    steal fell together is assumed, not seen (the counters are per bucket).

    It gives ``1 - that share`` when the loss is over ``threshold`` of the cores plus what
    the counters cannot resolve over the bucket (:func:`tick_resolution_share` of one core:
    a tick per core for each of the idle and iowait columns, twice that where interrupts are
    charged to no task and their two columns are read too), and the cores were not left idle
    by as much otherwise (a server that left its core idle lost nothing to a neighbour that
    used the idle time); else 1. A reading that cannot be right (the server's CPU went down: a
    worker ended between listing and reading; a loss above the whole core) gives 1 too, and
    no bucket is divided by less than ``floor``. A warm-up curve divided by it reads what
    the server did with its cores to itself: a neighbour's burst on the server's core is not
    a change of the server's regime (docs/interference.md, "Warm-ups")."""

    def __init__(
        self,
        cpus: Iterable[int],
        server_cpu_s: Callable[[], float],
        *,
        threshold: float,
        own_cpu_s: Callable[[], float] = lambda: 0.0,
        generator_cpus: Iterable[int] = (),
        floor: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        stat_path: str = _STAT,
        irq_in_tasks: bool | None = None,
    ) -> None:
        self.cpus = sorted(set(cpus))
        self.irq_in_tasks = _irq_time_in_tasks_here() if irq_in_tasks is None else irq_in_tasks
        self.generator_cpus = sorted(set(generator_cpus) - set(self.cpus))
        self.threshold = threshold
        self.floor = floor
        self._server_cpu_s = server_cpu_s
        self._own_cpu_s = own_cpu_s
        self._clock = clock
        self._stat_path = stat_path
        self._last = self._read()

    def _read(self) -> tuple[float, float, float, float, float] | None:
        """(time, the cores' idle seconds and interrupt seconds charged to no task, the
        server's and own CPU seconds, the generator cores' steal seconds); None when a core
        is not listed. The server's tree is walked first (the slow part), so that its times,
        the cores' counters and the clock are read back to back: the loss is the clock's
        span less the others, and any time between those reads would count as lost."""
        server = self._server_cpu_s()
        times = core_times(self.cpus, self._stat_path, self.irq_in_tasks)
        at = self._clock()
        if times is None or times.cores != len(self.cpus):
            return None
        stolen = 0.0
        if self.generator_cpus:
            generator = core_times(self.generator_cpus, self._stat_path, self.irq_in_tasks)
            if generator is None or generator.cores != len(self.generator_cpus):
                return None
            stolen = generator.steal_s
        own = server + self._own_cpu_s()
        return at, times.idle_s, times.untasked_irq_s, own, stolen

    def __call__(self) -> float:
        now, before = self._read(), self._last
        self._last = now
        if now is None or before is None:
            return 1.0
        span = now[0] - before[0]
        if span <= 0:
            return 1.0
        core_s = span * len(self.cpus)
        idle, irq, known, stolen = (now[k] - before[k] for k in (1, 2, 3, 4))
        # the cores' time the server did not have and did not leave: other processes', and
        # the time the hypervisor gave to other machines (a VM's steal: in no task's time
        # where the kernel accounts steal, as paravirtualised guests' do)
        share = (core_s - idle - irq - known) / core_s
        columns = 1 if self.irq_in_tasks else 2  # (idle, iowait), and (irq, softirq)
        unresolved = self.threshold + columns * tick_resolution_share(span)
        if known < 0 or share > 1.0:
            return 1.0  # a reading that cannot be right
        idle_share = idle / core_s
        waited = 0.0  # idle while the generator's cores were held by the hypervisor
        if self.generator_cpus:
            held = stolen / (span * len(self.generator_cpus))
            if held > self.threshold + tick_resolution_share(span):
                waited = min(idle_share, held)
        share += waited
        if share <= unresolved or idle_share - waited > unresolved:
            return 1.0  # others took little, or took time the server did not want
        return max(self.floor, 1.0 - share)
