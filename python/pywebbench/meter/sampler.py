"""Resource metering of a server's whole process tree (master and workers), with psutil.

:func:`snapshot` reads the tree once (idle memory); :class:`Sampler` samples it in a
background thread (about 4 Hz) while the load generator runs and summarizes the iteration:
CPU user/system seconds, RSS and USS/PSS (peak and end), threads, open fds, context switches.

CPU of workers that exited and were reaped during the window is still counted (psutil's
``children_user``/``children_system`` of their parent). USS/PSS come from
``/proc/PID/smaps_rollup``; where it is unreadable they are None.

Given the cores the iteration was pinned to, the sampler also measures the CPU time other
processes took from them over the window (:mod:`pywebbench.meter.interference`); given the
server's cores, how fast they ran (:mod:`pywebbench.meter.core_speed`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import psutil

from pywebbench.meter.core_speed import CoreSpeedProbe
from pywebbench.meter.interference import Interference, InterferenceWindow

DEFAULT_INTERVAL_S = 0.25


@dataclass
class Sample:
    """One sample of the server process tree (about 4 per second during iterations): a row of
    the store's ``samples`` table (docs/store-schema.md), ``iteration_id`` set when it is stored."""

    iteration_id: int
    t_s: float  # seconds since the iteration started
    cpu_user_s: float  # cumulative over the tree, since the iteration started
    cpu_sys_s: float
    rss_bytes: int
    uss_bytes: int | None
    pss_bytes: int | None
    threads: int
    fds: int | None
    processes: int
    ctx_voluntary: int | None = None  # cumulative since the iteration started
    ctx_involuntary: int | None = None
    processes_seen: int | None = None  # distinct PIDs of the tree since the iteration started


@dataclass(frozen=True)
class TreeSnapshot:
    """Totals over a process tree at one instant (CPU and switches are cumulative)."""

    at: float  # time.monotonic()
    processes: int
    cpu_user_s: float
    cpu_sys_s: float
    rss_bytes: int
    uss_bytes: int | None
    pss_bytes: int | None
    threads: int
    fds: int | None
    ctx_voluntary: int
    ctx_involuntary: int
    alive: bool = True  # the root process still existed
    pids: frozenset[int] = frozenset()  # the tree's processes at that instant


def tree(pid: int) -> list[psutil.Process]:
    """The process ``pid`` and all its descendants (empty when it is gone)."""
    try:
        root = psutil.Process(pid)
        if root.status() == psutil.STATUS_ZOMBIE:
            return []
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of process ``pid`` (all its threads, ended ones too) to the nanosecond,
    from its CPU-time clock; None when the clock cannot be read (the process is gone, or not
    Linux). ``/proc/<pid>/stat`` gives the same time cut to clock ticks (10 ms): 4% of a
    0.25-s warm-up bucket at each reading."""
    clock = ((~pid) << 3) | 2  # the kernel's CPU clock of a process: MAKE_PROCESS_CPUCLOCK
    try:
        return time.clock_gettime(clock)
    except (OSError, OverflowError, AttributeError):  # AttributeError: no clock_gettime
        return None


#: Seconds between two readings of which processes make up a :class:`Trees`' trees.
MEMBERS_EVERY_S = 1.0
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat_fields(pid: int) -> list[bytes] | None:
    """``/proc/<pid>/stat``'s fields after the command name (state first); None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].split()


def children_by_parent() -> dict[int, list[int]]:
    """Every live process's children, from one scan of ``/proc`` (zombies left out)."""
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None or fields[0] == b"Z":
            continue
        kids.setdefault(int(fields[1]), []).append(int(name))
    return kids


class Trees:
    """The process trees rooted at ``roots`` (server processes and their workers), read
    often and cheaply: which processes make up each tree is read with one scan of ``/proc``
    for all of them, again at most every ``members_every_s`` or when a member is gone; a
    reading between is one CPU clock and one small file per member. (psutil's
    ``children()`` scans all of ``/proc`` for every root at every reading: 18 roots sampled
    10 times a second took half of the generator's core in an interleaved group.) A worker
    forked since the last scan counts from the next one, with the CPU it used until then."""

    def __init__(self, roots: Sequence[int], members_every_s: float = MEMBERS_EVERY_S) -> None:
        self.roots = list(roots)
        self.members_every_s = members_every_s
        self._members: list[list[int]] = [[] for _ in self.roots]
        self._read_at = -math.inf

    def members(self) -> list[list[int]]:
        """Each tree's processes (root first; empty when the root is gone)."""
        now = time.monotonic()
        if now - self._read_at >= self.members_every_s:
            self._read_at = now
            kids = children_by_parent()
            alive = {p for ps in kids.values() for p in ps}
            found: list[list[int]] = []
            for root in self.roots:
                if root not in alive:
                    found.append([])
                    continue
                tree, todo = [root], [root]
                while todo:
                    for child in kids.get(todo.pop(), []):
                        tree.append(child)
                        todo.append(child)
                found.append(tree)
            self._members = found
        return self._members

    def cpu_s(self) -> list[float]:
        """Each tree's CPU seconds (:func:`trees_cpu_s`'s reading, per tree)."""
        out = []
        stale = False
        for tree in self.members():
            total = 0.0
            for pid in tree:
                own = process_cpu_s(pid)
                fields = _stat_fields(pid)
                if own is None or fields is None or fields[0] == b"Z":
                    stale = True
                    continue
                total += own + (int(fields[13]) + int(fields[14])) * _TICK_S
            out.append(total)
        if stale:
            self._read_at = -math.inf
        return out

    def rss(self) -> list[int | None]:
        """Each tree's resident memory in bytes (None: its root is gone)."""
        out: list[int | None] = []
        for tree in self.members():
            total = 0
            for pid in tree:
                try:
                    with open(f"/proc/{pid}/statm", "rb") as f:
                        total += int(f.read().split()[1]) * _PAGE
                except (OSError, IndexError, ValueError):
                    self._read_at = -math.inf
            out.append(total if tree else None)
        return out


def trees_cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds (user + system, reaped children included) of the trees rooted at ``pids``;
    each process's own time to the nanosecond (:func:`process_cpu_s`), its reaped
    children's to the clock tick (a worker reaped between two readings moves from the
    first to the second: the sum can drop by up to a tick)."""
    total = 0.0
    for pid in pids:
        for proc in tree(pid):
            try:
                t = proc.cpu_times()
            except Exception:  # noqa: BLE001 - a process that ended between listing and reading
                continue
            own = process_cpu_s(proc.pid)
            reaped = t.children_user + t.children_system
            total += (t.user + t.system if own is None else own) + reaped
    return total


def snapshot(pid: int, *, memory_detail: bool = True) -> TreeSnapshot:
    """Read the tree rooted at ``pid`` once. A vanished root gives ``alive=False`` and zeros."""
    procs = tree(pid)
    user = system = 0.0
    rss = threads = vol = invol = 0
    uss: int | None = 0 if memory_detail else None
    pss: int | None = 0 if memory_detail else None
    fds: int | None = 0
    counted = 0
    pids: set[int] = set()
    for p in procs:
        try:
            with p.oneshot():
                t = p.cpu_times()
                mem = p.memory_info()
                n_threads = p.num_threads()
                ctx = p.num_ctx_switches()
                try:
                    n_fds: int | None = p.num_fds()
                except psutil.AccessDenied:
                    n_fds = None
            full = None
            if memory_detail:
                try:
                    full = p.memory_full_info()
                except (psutil.AccessDenied, OSError):
                    full = None
        except psutil.Error:
            continue  # exited between listing and reading
        counted += 1
        pids.add(p.pid)
        user += t.user + t.children_user
        system += t.system + t.children_system
        rss += mem.rss
        threads += n_threads
        vol += ctx.voluntary
        invol += ctx.involuntary
        fds = None if fds is None or n_fds is None else fds + n_fds
        if memory_detail:
            if full is None:
                uss = pss = None
            else:
                uss = None if uss is None else uss + full.uss
                pss_value = getattr(full, "pss", None)
                pss = None if pss is None or pss_value is None else pss + pss_value
    return TreeSnapshot(
        at=time.monotonic(),
        processes=counted,
        cpu_user_s=user,
        cpu_sys_s=system,
        rss_bytes=rss,
        uss_bytes=uss,
        pss_bytes=pss,
        threads=threads,
        fds=fds,
        ctx_voluntary=vol,
        ctx_involuntary=invol,
        alive=counted > 0,
        pids=frozenset(pids),
    )


@dataclass
class MeterSummary:
    """What one iteration cost the server (all deltas relative to the start of sampling)."""

    samples: list[Sample] = field(default_factory=list)
    cpu_user_s: float | None = None
    cpu_sys_s: float | None = None
    rss_peak_bytes: int | None = None
    rss_end_bytes: int | None = None
    uss_peak_bytes: int | None = None
    uss_end_bytes: int | None = None
    pss_peak_bytes: int | None = None
    pss_end_bytes: int | None = None
    threads_peak: int | None = None
    fds_peak: int | None = None
    processes_peak: int | None = None
    processes_end: int | None = None
    # Distinct PIDs seen in the tree over the samples: above processes_peak when workers
    # were replaced (recycled or crashed) meanwhile; a lower bound between samples.
    processes_seen: int | None = None
    ctx_voluntary: int | None = None
    ctx_involuntary: int | None = None
    alive_at_end: bool = True
    # CPU other processes took from the pinned cores over the window (None: no cores given,
    # or no /proc/stat).
    interference: Interference | None = None
    # The core-speed probe's median rate on the server's cores over the window (loop steps
    # per CPU-second; None: not probed; pywebbench.meter.core_speed).
    core_rate: float | None = None

    @property
    def cpu_s(self) -> float | None:
        if self.cpu_user_s is None or self.cpu_sys_s is None:
            return None
        return self.cpu_user_s + self.cpu_sys_s


def _peak(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


class Sampler:
    """Samples the process tree of ``pid`` every ``interval_s`` in a daemon thread.

    >>> with Sampler(server.pid) as sampler:
    ...     result = run_load(spec)
    >>> sampler.summary.cpu_user_s
    """

    def __init__(
        self,
        pid: int,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        memory_detail: bool = True,
        cpus: Iterable[int] = (),
        probe_cpus: Iterable[int] = (),
        server_cpus: Iterable[int] = (),
    ) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.memory_detail = memory_detail
        self.cpus = sorted(set(cpus))  # the pinned cores whose interference is measured
        self.server_cpus = sorted(set(server_cpus))  # those of them that are the server's
        self._window: InterferenceWindow | None = None
        probe = sorted(set(probe_cpus))  # the server's cores, whose speed is probed
        self._probe = CoreSpeedProbe(probe) if probe else None
        self._snaps: list[TreeSnapshot] = []
        self._caller_cpus: set[int] | None = None  # the starting thread's, while it is moved
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.summary = MeterSummary()

    def start(self) -> Sampler:
        """Take the baseline sample and start the thread. With the server's cores apart from
        the others (``server_cpus``), the calling thread runs on the others until
        :meth:`stop` (and the threads it starts meanwhile, unless they pin themselves): the
        interference on the server's cores counts what pywebbench runs there as a
        neighbour's, except the core-speed probe's."""
        self._snaps = [snapshot(self.pid, memory_detail=self.memory_detail)]
        self._caller_cpus = pin_this_thread(self._away())
        self._window = InterferenceWindow(self.cpus, self.server_cpus) if self.cpus else None
        self._stop.clear()
        if self._probe is not None:
            self._probe.start()
        # started on the caller's cores, as they are now: none of its reads lands on the
        # server's
        self._thread = threading.Thread(target=self._loop, name="pwb-sampler", daemon=True)
        self._thread.start()
        return self

    def _away(self) -> list[int]:
        """The pinned cores that are not the server's (none when those are unknown)."""
        return sorted(set(self.cpus) - set(self.server_cpus)) if self.server_cpus else []

    @property
    def probe(self) -> CoreSpeedProbe | None:
        """The core-speed probe on the server's cores (None: not asked for)."""
        return self._probe

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            snap = snapshot(self.pid, memory_detail=self.memory_detail)
            self._snaps.append(snap)
            if not snap.alive:
                return

    def stop(self) -> MeterSummary:
        """Stop the thread, take a final sample, and summarize."""
        self._stop.set()
        core_rate = self._probe.stop() if self._probe is not None else None
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not self._snaps or self._snaps[-1].alive:
            self._snaps.append(snapshot(self.pid, memory_detail=self.memory_detail))
        self.summary = summarize(self._snaps)
        self.summary.core_rate = core_rate
        if self._window is not None:
            probe_s = self._probe.cpu_s if self._probe is not None else 0.0
            self.summary.interference = self._window.close(self.summary.cpu_s, probe_s)
        if self._caller_cpus is not None:
            pin_this_thread(self._caller_cpus)  # the caller's cores as they were
            self._caller_cpus = None
        return self.summary

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pin_this_thread(cpus: Iterable[int]) -> set[int] | None:
    """Run the calling thread on ``cpus``; the cores it had before, or None when nothing
    was changed (no cores given, or cores this process may not use)."""
    wanted = set(cpus)
    if not wanted:
        return None
    try:
        before = os.sched_getaffinity(0)  # 0: this thread only
        os.sched_setaffinity(0, wanted)
    except (OSError, ValueError):
        return None
    return before


def yield_to_others(threads: Iterable[int] = (0,)) -> Callable[[], None] | None:
    """Put ``threads`` (native thread ids; 0: the calling thread) under ``SCHED_IDLE``: on
    their cores any other runnable thread (the engine's generator threads) runs first, the
    moment it wakes, and these get what is left. Threads they start later inherit the
    policy, so call it after starting the engine's. Returns what puts them back as they
    were, or None when the kernel refused them all (nothing changed)."""
    changed: list[tuple[int, int, os.sched_param]] = []
    for tid in threads:
        try:
            policy, param = os.sched_getscheduler(tid), os.sched_getparam(tid)
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except (OSError, AttributeError):
            continue
        changed.append((tid, policy, param))
    if not changed:
        return None

    def restore() -> None:
        for tid, policy, param in changed:
            try:
                os.sched_setscheduler(tid, policy, param)
            except OSError:
                pass  # the thread has ended

    return restore


def summarize(snaps: list[TreeSnapshot]) -> MeterSummary:
    """Turn cumulative snapshots (the first is the baseline) into per-iteration figures."""
    if not snaps:
        return MeterSummary(alive_at_end=False)
    base = snaps[0]
    live = [s for s in snaps if s.alive]
    seen: list[int] = []  # distinct PIDs up to each live snapshot
    pids: set[int] = set()
    for s in live:
        pids |= s.pids
        seen.append(len(pids))
    samples = [
        Sample(
            iteration_id=0,
            t_s=round(s.at - base.at, 4),
            cpu_user_s=max(0.0, s.cpu_user_s - base.cpu_user_s),
            cpu_sys_s=max(0.0, s.cpu_sys_s - base.cpu_sys_s),
            rss_bytes=s.rss_bytes,
            uss_bytes=s.uss_bytes,
            pss_bytes=s.pss_bytes,
            threads=s.threads,
            fds=s.fds,
            processes=s.processes,
            ctx_voluntary=max(0, s.ctx_voluntary - base.ctx_voluntary),
            ctx_involuntary=max(0, s.ctx_involuntary - base.ctx_involuntary),
            processes_seen=n_seen or None,
        )
        for s, n_seen in zip(live, seen, strict=True)
    ]
    if not samples:
        return MeterSummary(alive_at_end=False)
    end = samples[-1]
    return MeterSummary(
        samples=samples,
        cpu_user_s=end.cpu_user_s,
        cpu_sys_s=end.cpu_sys_s,
        rss_peak_bytes=max(s.rss_bytes for s in samples),
        rss_end_bytes=end.rss_bytes,
        uss_peak_bytes=_peak([s.uss_bytes for s in samples]),
        uss_end_bytes=end.uss_bytes,
        pss_peak_bytes=_peak([s.pss_bytes for s in samples]),
        pss_end_bytes=end.pss_bytes,
        threads_peak=max(s.threads for s in samples),
        fds_peak=_peak([s.fds for s in samples]),
        processes_peak=max(s.processes for s in samples),
        processes_end=end.processes,
        processes_seen=end.processes_seen,
        ctx_voluntary=end.ctx_voluntary,
        ctx_involuntary=end.ctx_involuntary,
        alive_at_end=snaps[-1].alive,
    )
