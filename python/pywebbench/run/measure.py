"""One replicate's load on a running, verified server: warm-up (until steady, or fixed),
measured iterations, their drift and leak tests, and the fault phase when the study has one.

Every iteration is stored the moment it ends, with the metering of the server meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pywebbench.analysis.steady import preload
from pywebbench.analysis.warmup import SteadyRule, WarmupEnd, WarmupVerdict
from pywebbench.analysis.warmup_class import classify
from pywebbench.bringup import StackFailure
from pywebbench.faults.outcome import CellRobustness
from pywebbench.load import LoadAgent, LoadProgress, LoadSpec, iteration_figures
from pywebbench.meter import tree
from pywebbench.meter.core_speed import CoreSpeedProbe, SpeedTracker
from pywebbench.meter.interference import AvailableShare
from pywebbench.meter.owners import app_paths, stack_packages
from pywebbench.meter.vmprof import vmprof_env, vmprof_window
from pywebbench.run import instructions
from pywebbench.run.health import judge_iteration
from pywebbench.run.robustness import FaultTarget, FreshServer, fault_phase
from pywebbench.run.rows import iteration_row
from pywebbench.run.seams import Seams
from pywebbench.run.steadiness import (
    Snapshot,
    leak_floors,
    measured_curve,
    replicate_checks,
    warm_until_steady,
)
from pywebbench.store import IterationKind, Phase, Sample, StoreWriter, utcnow
from pywebbench.study.config import StudyConfig
from pywebbench.study.matrix import CellPlan

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.load.result import LoadResult


#: Another server of a cell with its launch options changed, stopped after the block.
ExtraServer = Callable[..., AbstractContextManager["RunningServer"]]


class Interrupted(Exception):
    """Ctrl-C arrived; the partial state is stored, the run must stop."""


_SHIELDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def no_sigint() -> Iterator[None]:
    """Ignore Ctrl-C (and SIGTERM/SIGHUP) for the duration: cleanup and store writes must
    finish, so no process is left behind and no row is half written."""
    try:
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _SHIELDED}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def steady_rule(config: StudyConfig, *, jit: bool = False) -> SteadyRule:
    """The steady-state rule a study's load settings ask for (``jit``: a JIT interpreter)."""
    load = config.load
    cap = load.jit_warmup_cap_s if jit else load.warmup_cap_s
    return SteadyRule(
        window_s=load.steady_window_s,
        cap_s=load.deep_s if load.warmup == "deep" else cap,
        min_requests=load.jit_min_requests if jit else 0,
    )


class Measurer:
    """Loads one replicate of a cell through the study's load agent, into the store."""

    def __init__(
        self,
        config: StudyConfig,
        store: StoreWriter,
        agent: LoadAgent,
        generator_cpus: list[int],
        *,
        progress: Callable[[LoadProgress], None],
        iteration_start: Callable[[CellPlan, str], None],
        iteration_done: Callable[[CellPlan, str, float], None],
        phase: Callable[[str], None],
        fresh_server: Callable[[CellPlan], FreshServer] | None = None,
        seams: Seams | None = None,
    ) -> None:
        self.config = config
        #: The sampler, probe, tracer, stack sampler and fault clients (the real ones unless
        #: given: run/seams.py).
        self.seams = seams or Seams()
        self.store = store
        self.agent = agent
        self.generator_cpus = generator_cpus
        self.rule = steady_rule(config)
        self._progress = progress
        self._iteration_start = iteration_start
        self._iteration_done = iteration_done
        self._phase = phase
        self.loaded_s = 0.0  # the sum of the load windows so far
        #: Fresh servers for a fault sweep's sizes (None: the sizes share the cell's server).
        self.fresh_server = fresh_server
        #: Another server of a cell, its launch options changed (set by the host bench; the
        #: counted server of ``--instructions``).
        self.extra_server: ExtraServer | None = None
        #: The core-speed probe of the iteration running now (None: none, or not probed).
        self._probe: CoreSpeedProbe | None = None
        #: The core rates of the iterations measured so far (warm-up curves are put at
        #: their median: docs/interference.md#core-speed).
        self._core_rates: list[float] = []

    def replicate(
        self, cell: CellPlan, cell_id: int, rep_id: int, replicate: int, server: RunningServer
    ) -> tuple[StackFailure | None, CellRobustness | None]:
        """Warm-up, measured iterations, drift and leak tests, fault phase.

        Returns the failure that ended the replicate (None when it completed) and the
        robustness of the fault phase (None without one). Raises :class:`Interrupted`.
        """
        preload()  # the first warm-up does not wait on its imports
        cfg = self.config.load
        plan: list[tuple[IterationKind, int, float]] = []
        warmed: list[WarmupVerdict] = []
        if cfg.warmup != "fixed":
            fail = self._steady_warmup(cell, cell_id, rep_id, replicate, server, warmed)
            if fail is not None:
                return fail, None
        else:
            plan += [
                (IterationKind.WARMUP, i, cfg.warmup_duration_s)
                for i in range(cfg.warmup_iterations)
            ]
        plan += [(IterationKind.MEASURED, i, cfg.duration_s) for i in range(cfg.iterations)]
        measured: list[tuple[LoadResult, list[Sample], list[Snapshot]]] = []
        for kind, idx, duration in plan:
            if cfg.pause_s:
                time.sleep(cfg.pause_s)
            # A measured iteration that other processes interfered with is measured again, up
            # to load.interference_retries times (docs/interference.md).
            remeasured: list[dict[str, float]] | None = (
                [] if kind == IterationKind.MEASURED else None
            )
            done = None
            while done is None:
                spec = self._spec(cell, server, duration)
                snapshots: list[Snapshot] = []
                done = self._iteration(
                    cell,
                    cell_id,
                    replicate,
                    server,
                    kind,
                    idx,
                    self._runner_of(spec, snapshots),
                    remeasured=remeasured,
                )
            result, alive, samples = done
            fail = self._judge(kind, duration, result, alive, server)
            if fail is not None:
                return fail, None
            if kind == IterationKind.MEASURED:
                measured.append((result, samples, snapshots))
        jit = cell.variant.stack.interpreter.is_pypy
        floor, collector_floor = leak_floors(cell.variant.stack.interpreter)
        trend, memory = replicate_checks(
            measured,
            max_drift=self.rule.max_drift,
            leak_floor=floor,
            collector_floor=collector_floor,
        )
        curve = measured_curve(measured)
        # a capped warm-up is a steady state only if its rule holds with the measured series
        rule = steady_rule(self.config, jit=jit)
        capped = rule if warmed and warmed[0].end == WarmupEnd.CAP else None
        warm_curve = warmed[0].curve if warmed else []
        found = classify([y for _, y in warm_curve], [y for _, y in curve], capped=capped)
        with no_sigint():
            self.store.update_replicate(
                rep_id,
                drift_json=json.dumps(trend.to_dict()),
                leak_json=json.dumps(memory.to_dict()),
                warmup_class=found.value if found else None,
                measured_curve_json=json.dumps([[t, round(y, 1)] for t, y in curve]),
            )
        if cfg.syscalls and measured:
            self._syscalls_window(cell, rep_id, server)
        if cfg.flamegraph and measured:
            self._flame_window(cell, rep_id, server)
        if cfg.instructions and measured and replicate < cfg.instructions_replicates:
            self.count_instructions(cell, rep_id)
        if not (cfg.faults and measured) or cell.protocol != "http1":
            return None, None  # the fault clients and the phase's good clients are HTTP/1.1
        self._phase(f"faults {cell.variant.key}: {cfg.faults}")
        robustness = fault_phase(
            cell,
            FaultTarget(server.base_url, server.alive, server.pid),
            measured[-1][0],
            config=self.config,
            agent=self.agent,
            server_cpus=server_cores(server),
            generator_cpus=self.generator_cpus,
            progress=self._progress,
            fresh_server=self.fresh_server(cell) if self.fresh_server else None,
            phase=self._phase,
            seams=self.seams,
        )
        return None, robustness

    def _syscalls_window(self, cell: CellPlan, rep_id: int, server: RunningServer) -> None:
        """The unmeasured traced window (docs/syscalls.md), stored on the replicate."""
        self._phase(f"tracing syscalls of {cell.variant.key}")
        duration = self.config.load.syscalls_duration_s

        def load() -> tuple[int, float]:
            result = self.agent.run(self._spec(cell, server, duration), progress=self._progress)
            if result.interrupted:
                raise Interrupted()
            return result.requests, result.duration_s

        doc = self.seams.syscalls_tracer([p.pid for p in tree(server.pid)], load)
        with no_sigint():
            self.store.update_replicate(rep_id, syscalls_json=json.dumps(doc))

    def _flame_window(self, cell: CellPlan, rep_id: int, server: RunningServer) -> None:
        """The unmeasured sampled window (docs/flamegraphs.md), stored on the replicate:
        py-spy on CPython, vmprof (switched on inside the server) on PyPy."""
        self._phase(f"sampling stacks of {cell.variant.key}")
        cfg = self.config.load
        duration = cfg.flamegraph_duration_s
        stack = cell.variant.stack

        def load() -> tuple[int, float]:
            result = self.agent.run(self._spec(cell, server, duration), progress=self._progress)
            if result.interrupted:
                raise Interrupted()
            return result.requests, result.duration_s

        def pids() -> list[int]:
            return [p.pid for p in tree(server.pid)]

        packages, paths = stack_packages(stack), app_paths(stack)
        env = vmprof_env(True, stack)
        # The core's speed over the window, so that compare can put both sides' CPU times
        # at one speed (docs/flamegraphs.md#compare).
        probe = (
            self.seams.core_speed_probe(server_cores(server)).start() if cfg.core_speed else None
        )
        try:
            if env:
                where = Path(env["PWB_VMPROF_DIR"])
                doc = vmprof_window(where, pids, load, packages=packages, app_paths=paths)
            else:
                doc = self.seams.stack_sampler(
                    server.pid, pids, load, packages=packages, app_paths=paths
                )
        finally:
            rate = probe.stop() if probe is not None else None
        if rate and "error" not in doc:
            doc["core_rate"] = round(rate)
        with no_sigint():
            self.store.update_replicate(rep_id, flame_json=json.dumps(doc))

    def count_instructions(self, cell: CellPlan, rep_id: int) -> None:
        """Instructions per request on a separate server under valgrind
        (docs/instructions.md), stored on replicate ``rep_id``: after a replicate's
        iterations, or after an interleaved group (:meth:`HostBench.run_group`)."""
        cfg = self.config.load
        why = instructions.cannot_count(cell.variant.stack.interpreter.is_pypy)
        if why is None and self.extra_server is None:
            why = "no server of the cell can be started here under valgrind"
        if why is not None or self.extra_server is None:
            doc: dict[str, Any] = {"error": why}
        else:
            self._phase(f"counting instructions of {cell.variant.key} {cell.workload.name}")
            extra_server = self.extra_server

            def start(
                wrapper: list[str], start_timeout_s: float
            ) -> AbstractContextManager[RunningServer]:
                return extra_server(
                    cell, "under valgrind", wrapper=wrapper, start_timeout_s=start_timeout_s
                )

            doc = instructions.count_fresh_server(
                start,
                self.config.timeouts.start_s,
                cell,
                cfg,
                self.generator_cpus,
                self._batch_load,
            )
        with no_sigint():
            self.store.update_replicate(rep_id, instructions_json=json.dumps(doc))

    def _batch_load(self, spec: LoadSpec) -> LoadResult:
        """A counted batch's load; Ctrl-C ends the study."""
        result = self.agent.run(spec, progress=self._progress)
        if result.interrupted:
            raise Interrupted()
        return result

    def _runner_of(
        self, spec: LoadSpec, snapshots: list[Snapshot] | None = None
    ) -> Callable[[], LoadResult]:
        """The load of ``spec``; its progress snapshots are kept in ``snapshots`` (if given)
        for the drift test and the replicate's class, their request counts at one core speed
        (each snapshot's new requests divided by the core's speed since the last one, as the
        warm-up curve: docs/interference.md#core-speed)."""
        if snapshots is None:
            return lambda: self.agent.run(spec, progress=self._progress)

        def run() -> LoadResult:
            speed = self._speed_tracker()
            counted = [0, 0.0]  # requests so far: as the engine counts them, at one speed

            def progress(p: LoadProgress) -> None:
                step = p.requests - counted[0]
                counted[0] = p.requests
                counted[1] += step / ((speed() if speed else 1.0) or 1.0)
                snapshots.append((p.elapsed_s, counted[1]))
                self._progress(p)

            return self.agent.run(spec, progress=progress)

        return run

    def _steady_warmup(
        self,
        cell: CellPlan,
        cell_id: int,
        rep_id: int,
        replicate: int,
        server: RunningServer,
        warmed: list[WarmupVerdict],
    ) -> StackFailure | None:
        """One warm-up load, ended by the steady-state rule or its cap (``deep``: always run
        to the cap); stored as the replicate's warm-up iteration, with its curve and verdict
        on the replicate row (the verdict also put in ``warmed``)."""
        found: list[WarmupVerdict] = []
        rule = steady_rule(self.config, jit=cell.variant.stack.interpreter.is_pypy)
        deep = self.config.load.warmup == "deep"

        def warm() -> LoadResult:
            result, verdict = warm_until_steady(
                self.agent,
                lambda d: self._spec(cell, server, d),
                rule,
                self._progress,
                stop_when_steady=not deep,
                speed=self._bucket_scale(server, self._spec(cell, server, 1.0).mode != "open"),
            )
            found.append(verdict)
            return result

        done = self._iteration(cell, cell_id, replicate, server, IterationKind.WARMUP, 0, warm)
        assert done is not None  # only measured iterations are measured again
        result, alive, _ = done
        verdict = found[0]
        warmed.append(verdict)
        with no_sigint():
            self.store.update_replicate(
                rep_id,
                warmup_end=verdict.end.value,
                warmup_s=round(verdict.elapsed_s, 3),
                steady_start_s=verdict.steady_start_s,
                warmup_curve_json=json.dumps(verdict.curve),
            )
        return self._judge(IterationKind.WARMUP, verdict.elapsed_s, result, alive, server)

    def _speed_tracker(self) -> SpeedTracker | None:
        """The core's speed per bucket of the iteration loading now (its probe is set by
        :meth:`_iteration` before it loads), relative to the median core rate of this host's
        iterations so far (before the first, to the curve's own first reading); None when
        not probed."""
        if self._probe is None:
            return None
        reference = statistics.median(self._core_rates) if self._core_rates else None
        return SpeedTracker(self._probe, reference)

    def _bucket_scale(
        self, server: RunningServer, paced_by_generator: bool
    ) -> Callable[[], float] | None:
        """What each bucket of the warm-up loading now is divided by: the core's speed
        (:meth:`_speed_tracker`) times the share of its cores the server had
        (:class:`AvailableShare`: a neighbour's burst is not a change of regime; with
        ``paced_by_generator``, a load that waits for the generator, the server's idle time
        while the hypervisor held the generator's cores is lost too). None when neither is
        known."""
        speed = self._speed_tracker()
        cores = server_cores(server)
        if not cores or set(cores) & set(self.generator_cpus):
            return speed
        probe = self._probe

        def own_cpu_s() -> float:
            return probe.cpu_s if probe is not None else 0.0

        share = AvailableShare(
            cores,
            lambda: self.seams.trees_cpu_s([server.pid]),
            threshold=self.config.load.interference_max,
            own_cpu_s=own_cpu_s,
            generator_cpus=self.generator_cpus if paced_by_generator else (),
        )
        if speed is None:
            return share
        return lambda: speed() * share()

    def _spec(self, cell: CellPlan, server: RunningServer, duration_s: float) -> LoadSpec:
        return cell.load_spec(
            server.base_url, self.config.load, self.generator_cpus, duration_s=duration_s
        )

    def _judge(
        self,
        kind: IterationKind,
        duration: float,
        result: LoadResult,
        alive: bool,
        server: RunningServer,
    ) -> StackFailure | None:
        lost = getattr(self.agent, "lost", None)
        if lost is not None and lost():  # a load agent died: its share was not measured
            phase = Phase.WARMUP if kind == IterationKind.WARMUP else Phase.MEASURE
            return StackFailure(phase, f"load agents failed: {lost()}")
        cols = iteration_figures(result)
        return judge_iteration(
            kind,
            duration_s=duration,
            requests=int(cols["requests"]),
            errors=int(cols["errors"]),
            timeouts=int(cols["timeouts"]),
            stalled_tail_s=result.stalled_tail_s(),
            alive=alive,
            exit_code=server.group.poll(),
            log_tail=log_tail(server),
        )

    def _iteration(
        self,
        cell: CellPlan,
        cell_id: int,
        replicate: int,
        server: RunningServer,
        kind: IterationKind,
        idx: int,
        load: Callable[[], LoadResult],
        *,
        remeasured: list[dict[str, float]] | None = None,
    ) -> tuple[LoadResult, bool, list[Sample]] | None:
        """Run ``load`` while metering the server and what other processes took from its
        cores; store the iteration at once.

        Returns the result, whether the server was still alive at the end, and the samples.
        With ``remeasured`` (a measured iteration), an interfered attempt that has
        re-measures left is not stored: it is appended there and None is returned, so the
        caller measures it again."""
        started = utcnow()
        self._iteration_start(cell, kind)
        cores = server_cores(server)
        sampler = self.seams.sampler(
            server.pid,
            cpus=pinned_cores(server, self.generator_cpus),
            probe_cpus=cores if self.config.load.core_speed else (),
            # each side's cores accounted apart, when they are apart
            server_cpus=cores if not set(cores) & set(self.generator_cpus) else (),
        ).start()
        self._probe = sampler.probe
        try:
            result = load()
        except KeyboardInterrupt:
            with no_sigint():
                sampler.stop()
            raise
        except BaseException:
            sampler.stop()  # its thread and probe end, this thread's cores are given back
            raise
        finally:
            self._probe = None
        meter = sampler.stop()
        if meter.core_rate:
            self._core_rates.append(meter.core_rate)
        cols = iteration_figures(result)
        alive = server.alive() and meter.alive_at_end
        interference = meter.interference
        if interference is not None and getattr(self.agent, "name", "local") != "local":
            # Load agents in their own processes: their CPU is the generator's, not others'.
            interference = interference.without(float(cols["generator_cpu_s"] or 0.0))
        interfered = interference is not None and interference.interfered(
            self.config.load.interference_max
        )
        if (
            interfered
            and interference is not None
            and remeasured is not None
            and len(remeasured) < self.config.load.interference_retries
            and alive
            and not cols["interrupted"]
        ):
            remeasured.append({"rps": round(float(cols["rps"]), 1), **interference.to_dict()})
            self._phase(
                f"re-measuring {cell.variant.key}: other processes took "
                f"{interference.share:.0%} of a core from its cores"
            )
            return None
        with no_sigint():
            row = iteration_row(
                result,
                meter,
                cell_id=cell_id,
                replicate=replicate,
                kind=kind,
                idx=idx,
                started_at=started,
                workers=cell.variant.workers,
                server_alive=alive,
            )
            if interference is not None:
                row.others_cpu_s = round(interference.others_cpu_s, 3)
                row.steal_s = round(interference.steal_s, 3)
            row.interfered = interfered
            row.core_rate = round(meter.core_rate) if meter.core_rate else None
            row.remeasured_json = json.dumps(remeasured or [])
            self.store.add_iteration(row, meter.samples)
            agents_stored = getattr(self.agent, "iteration_stored", None)
            if agents_stored is not None and row.id is not None:  # several load agents
                agents_stored(self.store, row.id)
            self.loaded_s += float(cols["duration_s"] or 0.0)
        if cols["interrupted"]:
            raise Interrupted()
        self._iteration_done(cell, kind, float(cols["rps"]))
        return result, alive, list(meter.samples)


def server_cores(server: RunningServer) -> list[int]:
    """The cores the server may run on (its affinity; none when it is gone)."""
    try:
        return sorted(os.sched_getaffinity(server.pid))
    except OSError:  # gone, or not Linux
        return []


def pinned_cores(server: RunningServer, generator_cpus: list[int]) -> list[int]:
    """The cores an iteration runs on: the server's (its affinity) and the generator's."""
    return sorted(set(server_cores(server)) | set(generator_cpus))


def log_tail(server: RunningServer, limit: int = 4000) -> str | None:
    """The end of the server's log, for a failure's detail."""
    try:
        return Path(server.log_path).read_text(errors="replace")[-limit:]
    except (OSError, TypeError):
        return None
