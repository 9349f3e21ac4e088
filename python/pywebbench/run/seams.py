"""Where a study's runner reaches the world: one small object, the real things by default.

A :class:`Seams` is handed to the runner's executor
(:class:`~pywebbench.run.executor.LocalExecutor`) and its host bench
(:class:`~pywebbench.run.bench.HostBench`), which hand it on to what they call: the bring-up
of a stack (:class:`pywebbench.bringup.BringUp`: provision, services, start, check and
stop), the resource sampler of an iteration, the readings of a
server's process tree (its idle memory, its CPU time), the core-speed probe of a sampled
window, the syscalls tracer, the stack sampler of ``--flamegraph``, the fault clients and the
fault phase's interference window. The CLI passes ``Seams()``, the real implementations; a
test passes fakes (``tests/fake_bench.py``), so a whole study runs without a server in
about a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pywebbench.bringup import BringUp
from pywebbench.faults import measure_robustness
from pywebbench.meter.core_speed import CoreSpeedProbe
from pywebbench.meter.flame import sampled_window
from pywebbench.meter.interference import Interference, InterferenceWindow
from pywebbench.meter.sampler import MeterSummary, Sampler, TreeSnapshot, snapshot, trees_cpu_s
from pywebbench.run.syscalls import traced_window

if TYPE_CHECKING:
    from pywebbench.faults import FaultSpec, RobustnessRun

#: A window's load: it returns the requests completed and the seconds it took.
WindowLoad = Callable[[], tuple[int, float]]


class SpeedProbe(Protocol):
    """A core-speed probe over a window (:class:`~pywebbench.meter.core_speed.CoreSpeedProbe`)."""

    def start(self) -> SpeedProbe: ...

    def stop(self) -> float | None: ...


class ResourceSampler(Protocol):
    """The metering of a server's process tree over an iteration
    (:class:`~pywebbench.meter.sampler.Sampler`)."""

    @property
    def probe(self) -> CoreSpeedProbe | None: ...

    def start(self) -> ResourceSampler: ...

    def stop(self) -> MeterSummary: ...


class SamplerFactory(Protocol):
    """Makes the :class:`ResourceSampler` of one iteration."""

    def __call__(
        self,
        pid: int,
        *,
        cpus: Iterable[int] = (),
        probe_cpus: Iterable[int] = (),
        server_cpus: Iterable[int] = (),
    ) -> ResourceSampler: ...


class StackSampler(Protocol):
    """:func:`pywebbench.meter.flame.sampled_window`: a process tree's stacks sampled while
    a load runs."""

    def __call__(
        self,
        pid: int,
        tree: Callable[[], list[int]],
        load: WindowLoad,
        *,
        packages: Mapping[str, str],
        app_paths: Sequence[str],
    ) -> dict[str, Any]: ...


class FaultClients(Protocol):
    """:func:`pywebbench.faults.measure_robustness`: a server's good load, clean and with the
    fault clients running."""

    def __call__(
        self,
        url: str,
        specs: Sequence[FaultSpec],
        run_load: Callable[[], Any],
        *,
        alive: Callable[[], bool] | None = None,
        clean_result: Any = None,
        settle_s: float = 1.0,
    ) -> RobustnessRun: ...


class Window(Protocol):
    """What other processes took from pinned cores over a window
    (:class:`~pywebbench.meter.interference.InterferenceWindow`)."""

    def close(self, server_cpu_s: float | None) -> Interference | None: ...


@dataclass(frozen=True)
class Seams:
    """Everything the study's runner does to the world beside its load agent (module doc)."""

    bringup: BringUp = field(default_factory=BringUp)
    sampler: SamplerFactory = Sampler
    #: A process tree read once (a started server's idle memory and processes).
    tree_snapshot: Callable[[int], TreeSnapshot] = snapshot
    #: The CPU seconds of process trees (the fault phase's interference guard).
    trees_cpu_s: Callable[[Sequence[int]], float] = trees_cpu_s
    core_speed_probe: Callable[[Sequence[int]], SpeedProbe] = CoreSpeedProbe
    #: The traced window of ``--syscalls`` (the pids to trace, the load).
    syscalls_tracer: Callable[[Sequence[int], WindowLoad], dict[str, Any]] = traced_window
    stack_sampler: StackSampler = sampled_window
    fault_clients: FaultClients = measure_robustness
    #: The fault phase's interference window over the pinned cores (all, the server's).
    interference_window: Callable[[Sequence[int], Sequence[int]], Window] = InterferenceWindow
