"""Pre-flight: what on this machine will disturb a study, before it starts.

pyperf's ``system tune`` checks the same things before it measures. Each finding is one line
with what to do; the check never blocks a study, it warns (docs/interference.md). What it
looks at:

- busy processes: other processes that used more than :data:`BUSY_SHARE` of a core over a
  short sample and may run on the study's cores (their affinity includes them);
- SMT siblings: a study core whose hyper-thread sibling is not a study core shares its
  execution units with whatever runs there;
- frequency scaling: a governor other than ``performance`` changes the clock under load;
- swap: swapped-out pages of the server come back at page-fault cost mid-measurement;
- ASLR: address-space randomisation makes each process's layout, and so its cache
  behaviour, differ between replicates;
- PyPy's collector (a study that measures PyPy): a nursery PyPy sized from a large reported
  cache, and the floor below which it collects nothing, as that PyPy reports them
  (:mod:`pywebbench.meter.pypy_gc`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from pywebbench.meter import pypy_gc

#: A process busier than this share of one core over the sample is "busy".
BUSY_SHARE = 0.05

_SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class Finding:
    """One thing that will disturb the study, and what to do about it."""

    check: str  # busy, smt, frequency, swap, aslr, pypy-gc
    problem: str
    advice: str
    pids: tuple[int, ...] = ()  # busy: every busy process (the line names the busiest five)

    def line(self) -> str:
        """``check: problem; advice``, the one line the console prints."""
        return f"{self.check}: {self.problem}; {self.advice}"


def _busy_processes(cpus: set[int], sample_s: float) -> list[Finding]:
    """Other processes that used more than :data:`BUSY_SHARE` of a core over ``sample_s``
    and may run on ``cpus``."""
    mine = os.getpid()
    procs: list[tuple[psutil.Process, float]] = []
    for p in psutil.process_iter(["pid"]):
        if p.pid == mine:
            continue
        try:
            t = p.cpu_times()
            procs.append((p, t.user + t.system))
        except psutil.Error:
            continue
    start = time.monotonic()
    time.sleep(sample_s)
    elapsed = time.monotonic() - start
    busy: list[tuple[float, str, int]] = []
    for p, before in procs:
        try:
            with p.oneshot():
                t = p.cpu_times()
                share = (t.user + t.system - before) / elapsed
                if share <= BUSY_SHARE:
                    continue
                if not set(p.cpu_affinity() or []) & cpus:
                    continue
                busy.append((share, f"{p.name()} (pid {p.pid}, {share:.0%} of a core)", p.pid))
        except psutil.Error:
            continue
    if not busy:
        return []
    busy.sort(reverse=True)
    shown = ", ".join(name for _, name, _ in busy[:5])
    more = f" and {len(busy) - 5} more" if len(busy) > 5 else ""
    return [
        Finding(
            "busy",
            f"{len(busy)} other process(es) busy on cores {sorted(cpus)}: {shown}{more}",
            "stop them, or move the study to idle cores (--server-cpus, --generator-cpus); "
            "interfered iterations are measured again, and flagged if they stay interfered",
            tuple(pid for _, _, pid in busy),
        )
    ]


def _smt(cpus: set[int]) -> list[Finding]:
    """Study cores whose SMT siblings are outside the study."""
    shared: list[str] = []
    for cpu in sorted(cpus):
        path = _SYS_CPU / f"cpu{cpu}" / "topology" / "thread_siblings_list"
        try:
            siblings = _cpu_list(path.read_text())
        except (OSError, ValueError):
            continue
        outside = sorted(siblings - cpus)
        if outside:
            shared.append(f"{cpu} with {','.join(map(str, outside))}")
    if not shared:
        return []
    return [
        Finding(
            "smt",
            "study cores share a physical core with cores outside the study: " + "; ".join(shared),
            "keep the siblings idle (or turn SMT off: echo off > "
            "/sys/devices/system/cpu/smt/control)",
        )
    ]


def _cpu_list(text: str) -> set[int]:
    """``"0-2,5"`` -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _frequency(cpus: set[int]) -> list[Finding]:
    """Study cores whose frequency governor is not ``performance``."""
    scaled: dict[str, list[int]] = {}
    for cpu in sorted(cpus):
        path = _SYS_CPU / f"cpu{cpu}" / "cpufreq" / "scaling_governor"
        try:
            gov = path.read_text().strip()
        except OSError:
            continue  # no cpufreq (a VM): the host decides, nothing to set here
        if gov != "performance":
            scaled.setdefault(gov, []).append(cpu)
    return [
        Finding(
            "frequency",
            f"cores {cs} scale their frequency (governor {gov})",
            f"set the performance governor: cpupower -c {','.join(map(str, cs))} "
            "frequency-set -g performance (pyperf system tune does it too)",
        )
        for gov, cs in scaled.items()
    ]


def _swap() -> list[Finding]:
    """Swap in use."""
    swap = psutil.swap_memory()
    if not swap.used:
        return []
    return [
        Finding(
            "swap",
            f"{swap.used / 2**20:,.0f} MiB of swap in use",
            "free memory, or turn swap off for the study (swapoff -a)",
        )
    ]


def _aslr(path: Path = Path("/proc/sys/kernel/randomize_va_space")) -> list[Finding]:
    """Address-space layout randomisation on."""
    try:
        value = path.read_text().strip()
    except OSError:
        return []
    if value == "0":
        return []
    return [
        Finding(
            "aslr",
            f"address-space layout randomisation is on (randomize_va_space = {value}): "
            "replicates differ in memory layout",
            "keep it (replicates then sample layouts, as they should) or turn it off for "
            "repeatable layouts: sysctl kernel.randomize_va_space=0",
        )
    ]


def pypy_collector(found: pypy_gc.Collector) -> list[Finding]:
    """PyPy's nursery sized from a large reported cache (:attr:`pypy_gc.Collector.large`)."""
    if not found.large:
        return []
    mib = pypy_gc.MIB
    return [
        Finding(
            "pypy-gc",
            f"PyPy's nursery is {found.nursery_bytes // mib} MiB here ({found.source}) and it "
            f"collects nothing below {found.floor_bytes / 1024 / mib:.1f} GiB: a PyPy server "
            "may grow towards that before its first major collection (not a leak), and PyPy's "
            "figures depend on the nursery (docs/interpreters.md#pypys-collector)",
            "keep it to measure PyPy as it runs on this host, or run with PYPY_GC_NURSERY=4MB "
            "(passed to the servers) to measure it as on a host with a usual cache",
        )
    ]


def pypy_collectors(interpreters: Iterable[str]) -> list[Finding]:
    """:func:`pypy_collector` of each PyPy (their paths), asked of it
    (:func:`pypy_gc.probe`); one that cannot be asked is a finding too."""
    found: list[Finding] = []
    for path in dict.fromkeys(interpreters):
        try:
            found += pypy_collector(pypy_gc.probe(path))
        except pypy_gc.ProbeError as exc:
            found.append(
                Finding(
                    "pypy-gc",
                    f"PyPy's collector could not be asked: {exc}",
                    "the leak test then judges PyPy's growth without its collection floor",
                )
            )
    return found


def preflight(cpus: Iterable[int], *, sample_s: float = 0.5) -> list[Finding]:
    """Everything that will disturb a study on ``cpus`` (server and generator cores)."""
    wanted = set(cpus)
    return [
        *_busy_processes(wanted, sample_s),
        *_smt(wanted),
        *_frequency(wanted),
        *_swap(),
        *_aslr(),
    ]


def study_preflight(
    server_cpus: Sequence[int], generator_cpus: Sequence[int], *, pypy: Sequence[str] = ()
) -> list[Finding]:
    """The pre-flight of a study's cores as asked (empty: the defaults), and of the
    collector of each PyPy the study measures (``pypy``: their paths); no core check when
    those cores are unusable, which the study itself then reports. ``run`` and ``ab`` print
    it."""
    collector = pypy_collectors(pypy)
    from pywebbench.run.host import split_cpus

    try:
        server, generator = split_cpus(list(server_cpus), list(generator_cpus))
    except ValueError:
        return collector
    return preflight(server + generator) + collector
