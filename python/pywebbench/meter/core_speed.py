"""Core speed: how much work a CPU-second of the server's core did over an iteration.

On a virtual machine the host changes how much work a CPU-second buys, and nothing in the
guest shows it: no steal, no other process, the server still at 100% of its core. On the
2-vCPU VM of docs/interference.md a fixed loop's rate moved between two levels about 1.45x
apart (the host's other hyperthread busy or idle), for seconds to minutes at a time. A
deterministic fib(20) server followed it: over 1 s windows its requests per CPU-second
correlated 0.945 with the loop's rate, and dividing by that rate took the windows' spread
from 19.8% to 6.0% (``benchmarks/core_speed_tracking.py``).

:class:`CoreSpeedProbe` runs that loop in a thread pinned to the server's cores, for
``sample_s`` of its own CPU time every ``every_s`` (1-2% of a core, taken from the server
like any neighbour's), and gives the median rate over an iteration: loop steps per
CPU-second of the probe's thread (``time.thread_time``: waiting for the core does not
count). :class:`SpeedTracker` gives the same per warm-up bucket. :class:`SpeedScaling`
puts req/s measured at different core rates at one reference rate, with the elasticity
each group of cells shows (docs/interference.md#core-speed).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pywebbench import formatting as fmt
from pywebbench.analysis.elasticity import UNIDENTIFIED_ELASTICITY, at_one_speed, pooled_slope

#: The name of the probe's thread (the rotation leaves its scheduling alone).
CORE_SPEED_THREAD = "pwb-core-speed"


class IterationRow(Protocol):
    """What the scaling reads of an iteration: a stored
    :class:`pywebbench.store.model.Iteration` (the meter does not import the store, which
    reads the meter)."""

    @property
    def cell_id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def rps(self) -> float: ...
    @property
    def requests(self) -> int: ...
    @property
    def cpu_s(self) -> float | None: ...
    @property
    def core_rate(self) -> float | None: ...


class _Stack(Protocol):
    @property
    def id(self) -> int | None: ...
    @property
    def interpreter(self) -> str: ...


class _Cell(Protocol):
    @property
    def id(self) -> int | None: ...
    @property
    def stack_id(self) -> int: ...
    @property
    def workload(self) -> str: ...


class StudyRows(Protocol):
    """What :func:`study_scaling` reads of a study: a :class:`pywebbench.store.model.Study`."""

    @property
    def stacks(self) -> Sequence[_Stack]: ...
    @property
    def cells(self) -> Sequence[_Cell]: ...
    @property
    def iterations(self) -> Sequence[IterationRow]: ...


#: Loop steps between two reads of the thread's CPU clock.
STEPS = 500


def loop_rate(cpu_s: float) -> float:
    """Run the fixed loop for ``cpu_s`` of this thread's CPU time; its steps per CPU-second."""
    start = time.thread_time()
    n = 0
    while (spent := time.thread_time() - start) < cpu_s:
        for _ in range(STEPS):
            n += 1
    return n / spent if spent > 0 else 0.0


class CoreSpeedProbe:
    """Samples the loop's rate on ``cpus`` in a daemon thread until :meth:`stop`.

    >>> probe = CoreSpeedProbe([0]).start()
    >>> ...  # the iteration's load
    >>> probe.stop()  # median steps per CPU-second, or None without a reading
    """

    def __init__(
        self, cpus: Iterable[int], *, every_s: float = 0.1, sample_s: float = 0.002
    ) -> None:
        self.cpus = sorted(set(cpus))
        self.every_s = every_s
        self.sample_s = sample_s
        #: (time.monotonic() at the reading's end, rate), one per reading
        self.readings: list[tuple[float, float]] = []
        #: CPU seconds the probe's thread used on the server's cores (the interference
        #: guard counts them as pywebbench's own there, not a neighbour's)
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> CoreSpeedProbe:
        """Start sampling."""
        self.readings = []
        self.cpu_s = 0.0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=CORE_SPEED_THREAD, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            os.sched_setaffinity(0, self.cpus)  # 0: this thread only
        except (OSError, ValueError):
            return  # cores this process may not use: no readings, no figure
        start = time.thread_time()
        while not self._stop.is_set():
            rate = loop_rate(self.sample_s)
            self.readings.append((time.monotonic(), rate))
            self.cpu_s = time.thread_time() - start
            self._stop.wait(self.every_s)
        self.cpu_s = time.thread_time() - start

    def stop(self) -> float | None:
        """Stop sampling; the median rate over the window (None without a reading)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        rates = [r for _, r in self.readings if r > 0]
        return statistics.median(rates) if rates else None


class SpeedTracker:
    """The core's speed over each bucket of a warm-up curve, relative to a fixed rate.

    Each call gives the median of the probe's readings since the previous call divided by
    ``reference`` (the rate the curve is put at; without one, the first reading's), or the
    previous value when no reading came in between. A warm-up curve divided by it is at one
    core speed: a jump of the host's speed is not a change of the server's regime."""

    def __init__(self, probe: CoreSpeedProbe, reference: float | None = None) -> None:
        self.probe = probe
        self.reference = reference
        self._seen = 0
        self._last = 1.0

    def __call__(self) -> float:
        readings = self.probe.readings[self._seen :]  # appended by the probe's thread
        self._seen += len(readings)
        rates = [r for _, r in readings if r > 0]
        if rates:
            if self.reference is None:
                self.reference = rates[0]
            self._last = statistics.median(rates) / self.reference
        return self._last


def reference_rate(rates: Iterable[float | None]) -> float | None:
    """The rate figures are scaled to: the median of the known ``rates`` (None without one)."""
    known = [r for r in rates if r]
    return statistics.median(known) if known else None


def _measured(its: Iterable[IterationRow]) -> list[IterationRow]:
    return [i for i in its if i.kind == "measured" and not i.interrupted]


def speed_reference(its: Iterable[IterationRow]) -> float | None:
    """The reference rate of a set of iterations: the median core rate of the measured ones
    (a study's, or two studies' pooled for a comparison).

    None, so that every figure stays raw, when a measured iteration has no rate (not probed,
    ``--no-core-speed``, or stored before the probe existed): figures are scaled all
    together or not at all."""
    rates = [i.core_rate for i in _measured(its)]
    if not rates or any(not r for r in rates):
        return None
    return reference_rate(rates)


def elasticity(cells: Iterable[Sequence[IterationRow]]) -> float:
    """How much a group of cells' req/s follow the core's rate: the least-squares slope of
    log req/s on log core rate over their measured iterations, each cell centred on its own
    means (a regression adjustment, as CUPED's: the cells' levels differ, the slope is
    shared).

    Measured in a quick study here: CPython cpu 1.25, CPython hello 0.73, PyPy cpu 0.61,
    PyPy hello 0.80 (correlations 0.74-0.97), so one slope for all would over- or
    under-correct (docs/interference.md#core-speed). The slope is
    :func:`pywebbench.analysis.elasticity.pooled_slope`'s: as measured when the group cannot
    identify one (too few points, or rates that barely moved)."""
    return pooled_slope(
        [(i.core_rate, i.rps) for i in _measured(its) if i.core_rate] for its in cells
    )


#: The group of cells that share an elasticity: (interpreter, workload).
Group = tuple[str, str]


@dataclass(frozen=True)
class SpeedScaling:
    """How a study's (or two compared studies') req/s are put at one core speed: the
    reference rate, and the elasticity of each group of cells."""

    reference: float | None
    elasticities: dict[Group, float] = field(default_factory=dict)
    group_of: dict[int, Group] = field(default_factory=dict)  # cell id -> its group

    def rps(self, its: Sequence[IterationRow]) -> list[float]:
        """The req/s of ``its`` (one cell's iterations) at the reference rate, scaled with
        their group's elasticity; raw when the reference is unknown."""
        if not its:
            return []
        beta = self.elasticity_of(its[0].cell_id)
        return at_one_speed([i.rps for i in its], [i.core_rate for i in its], self.reference, beta)

    def cpu_per_request(self, its: Sequence[IterationRow]) -> list[float]:
        """The server tree's CPU seconds per request of each of ``its`` (one cell's
        iterations, each with its CPU time and requests) at the reference rate: each times
        ``(rate / reference) ** elasticity``, the inverse of :meth:`rps`, so that CPU per
        request times req/s (the share of a core the server used) is left as measured."""
        if not its:
            return []
        beta = self.elasticity_of(its[0].cell_id)
        raw = [float(i.cpu_s or 0.0) / i.requests for i in its]
        return at_one_speed(raw, [i.core_rate for i in its], self.reference, -beta)

    def elasticity_of(self, cell_id: int | None) -> float:
        """The elasticity of the group of cell ``cell_id`` (when unknown,
        :data:`~pywebbench.analysis.elasticity.UNIDENTIFIED_ELASTICITY`)."""
        group = self.group_of.get(cell_id) if cell_id is not None else None
        if group is None:
            return UNIDENTIFIED_ELASTICITY
        return self.elasticities.get(group, UNIDENTIFIED_ELASTICITY)

    def elasticity_range(self) -> tuple[float, float] | None:
        """The lowest and highest elasticity of the groups (None without one)."""
        values = list(self.elasticities.values())
        return (min(values), max(values)) if values else None


def speed_scaling(cells: Iterable[tuple[Group, Sequence[IterationRow]]]) -> SpeedScaling:
    """The scaling of some cells, each given as (its group, its iterations)."""
    grouped: dict[Group, list[Sequence[IterationRow]]] = defaultdict(list)
    group_of: dict[int, Group] = {}
    every: list[IterationRow] = []
    for group, its in cells:
        grouped[group].append(its)
        every += its
        for it in its:
            group_of[it.cell_id] = group
    return SpeedScaling(
        reference=speed_reference(every),
        elasticities={g: elasticity(c) for g, c in grouped.items()},
        group_of=group_of,
    )


def study_scaling(*studies: StudyRows) -> SpeedScaling:
    """The scaling of a study (a report, the console) or of two compared: one reference
    rate over all their measured iterations, one elasticity per (interpreter, workload)."""
    pairs: list[tuple[Group, Sequence[IterationRow]]] = []
    for study in studies:
        interpreters = {s.id: s.interpreter for s in study.stacks}
        by_cell: dict[int, list[IterationRow]] = defaultdict(list)
        for it in study.iterations:
            by_cell[it.cell_id].append(it)
        for cell in study.cells:
            if cell.id is not None:
                group = (interpreters.get(cell.stack_id, ""), cell.workload)
                pairs.append((group, by_cell[cell.id]))
    return speed_scaling(pairs)


def speed_note(scaling: SpeedScaling, its: Iterable[IterationRow]) -> str:
    """One line for a study's console table and report: how its req/s were judged and how
    far the server's core strayed from the reference rate."""
    measured = _measured(its)
    if scaling.reference is None or not measured:
        return "req/s as measured (core speed not probed on every iteration)"
    low = min(float(i.core_rate or 0) for i in measured) / scaling.reference
    high = max(float(i.core_rate or 0) for i in measured) / scaling.reference
    betas = scaling.elasticity_range() or (UNIDENTIFIED_ELASTICITY,) * 2
    if betas[1] <= 0:
        return (
            f"req/s as measured: the server's core ran {fmt.ratio_range(low, high)} the study's "
            "median rate, but no group of cells showed req/s that follow it "
            "(docs/interference.md#core-speed)"
        )
    return (
        f"req/s at one core speed: the server's core ran {fmt.ratio_range(low, high)} the study's "
        f"median rate; elasticity {betas[0]:.2f}-{betas[1]:.2f} "
        "(docs/interference.md#core-speed)"
    )
