"""One replicate's load on a running, verified server: warm-up (until steady, or fixed),
measured iterations, their drift and leak tests, and the fault phase when the study has one.

Every iteration is stored the moment it ends, with the metering of the server meanwhile.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pywebbench.bringup import StackFailure
from pywebbench.load import LoadAgent, LoadProgress, LoadSpec, iteration_figures
from pywebbench.meter import Sampler, tree
from pywebbench.run.config import StudyConfig
from pywebbench.run.health import judge_iteration
from pywebbench.run.matrix import CellPlan
from pywebbench.run.robustness import FreshServer, fault_phase
from pywebbench.run.rows import iteration_row
from pywebbench.run.steadiness import (
    Snapshot,
    measured_curve,
    replicate_checks,
    warm_until_steady,
)
from pywebbench.run.syscalls import traced_window
from pywebbench.steady import (
    LEAK_FLOOR_BYTES_PER_1K,
    LEAK_FLOOR_JIT_BYTES_PER_1K,
    SteadyRule,
    WarmupVerdict,
)
from pywebbench.store import IterationKind, Phase, Sample, Store, utcnow
from pywebbench.warmup_class import classify

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.load.result import LoadResult


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
    return SteadyRule(
        window_s=load.steady_window_s,
        cap_s=load.deep_s if load.warmup == "deep" else load.warmup_cap_s,
        min_requests=load.jit_min_requests if jit else 0,
    )


class Measurer:
    """Loads one replicate of a cell through the study's load agent, into the store."""

    def __init__(
        self,
        config: StudyConfig,
        store: Store,
        agent: LoadAgent,
        generator_cpus: list[int],
        *,
        progress: Callable[[LoadProgress], None],
        iteration_start: Callable[[CellPlan, str], None],
        iteration_done: Callable[[CellPlan, str, float], None],
        phase: Callable[[str], None],
    ) -> None:
        self.config = config
        self.store = store
        self.agent = agent
        self.generator_cpus = generator_cpus
        self.rule = steady_rule(config)
        self._progress = progress
        self._iteration_start = iteration_start
        self._iteration_done = iteration_done
        self._phase = phase
        self.loaded_s = 0.0  # the sum of the load windows so far
        #: Fresh servers for a fault sweep's sizes (set by the runner; None: the same one).
        self.fresh_server: Callable[[CellPlan], FreshServer] | None = None

    def replicate(
        self, cell: CellPlan, cell_id: int, rep_id: int, replicate: int, server: RunningServer
    ) -> tuple[StackFailure | None, dict[str, Any] | None]:
        """Warm-up, measured iterations, drift and leak tests, fault phase.

        Returns the failure that ended the replicate (None when it completed) and the
        robustness of the fault phase (None without one). Raises :class:`Interrupted`.
        """
        cfg = self.config.load
        plan: list[tuple[IterationKind, int, float]] = []
        warm_curve: list[tuple[float, float]] = []
        if cfg.warmup != "fixed":
            fail = self._steady_warmup(cell, cell_id, rep_id, replicate, server, warm_curve)
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
            spec = self._spec(cell, server, duration)
            snapshots: list[Snapshot] = []
            result, alive, samples = self._iteration(
                cell, cell_id, replicate, server, kind, idx, self._runner_of(spec, snapshots)
            )
            fail = self._judge(kind, duration, result, alive, server)
            if fail is not None:
                return fail, None
            if kind == IterationKind.MEASURED:
                measured.append((result, samples, snapshots))
        jit = cell.variant.stack.interpreter.is_pypy
        trend, memory = replicate_checks(
            measured,
            max_drift=self.rule.max_drift,
            leak_floor=LEAK_FLOOR_JIT_BYTES_PER_1K if jit else LEAK_FLOOR_BYTES_PER_1K,
        )
        curve = measured_curve(measured)
        found = classify([y for _, y in warm_curve], [y for _, y in curve])
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
        if not (cfg.faults and measured):
            return None, None
        self._phase(f"faults {cell.variant.key}: {cfg.faults}")
        robustness = fault_phase(
            cell,
            server.base_url,
            server.alive,
            measured[-1][0],
            config=self.config,
            agent=self.agent,
            generator_cpus=self.generator_cpus,
            progress=self._progress,
            fresh_server=self.fresh_server(cell) if self.fresh_server else None,
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

        doc = traced_window([p.pid for p in tree(server.pid)], load)
        with no_sigint():
            self.store.update_replicate(rep_id, syscalls_json=json.dumps(doc))

    def _runner_of(
        self, spec: LoadSpec, snapshots: list[Snapshot] | None = None
    ) -> Callable[[], LoadResult]:
        """The load of ``spec``; its progress snapshots are kept in ``snapshots`` (if given)
        for the drift test."""
        if snapshots is None:
            return lambda: self.agent.run(spec, progress=self._progress)

        def progress(p: LoadProgress) -> None:
            snapshots.append((p.elapsed_s, p.requests))
            self._progress(p)

        return lambda: self.agent.run(spec, progress=progress)

    def _steady_warmup(
        self,
        cell: CellPlan,
        cell_id: int,
        rep_id: int,
        replicate: int,
        server: RunningServer,
        curve: list[tuple[float, float]],
    ) -> StackFailure | None:
        """One warm-up load, ended by the steady-state rule or its cap (``deep``: always run
        to the cap); stored as the replicate's warm-up iteration, with its curve (also put in
        ``curve``) and verdict on the replicate row."""
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
            )
            found.append(verdict)
            return result

        result, alive, _ = self._iteration(
            cell, cell_id, replicate, server, IterationKind.WARMUP, 0, warm
        )
        verdict = found[0]
        curve += verdict.curve
        with no_sigint():
            self.store.update_replicate(
                rep_id,
                warmup_end=verdict.end.value,
                warmup_s=round(verdict.elapsed_s, 3),
                steady_start_s=verdict.steady_start_s,
                warmup_curve_json=json.dumps(verdict.curve),
            )
        return self._judge(IterationKind.WARMUP, verdict.elapsed_s, result, alive, server)

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
    ) -> tuple[LoadResult, bool, list[Sample]]:
        """Run ``load`` while metering the server; store the iteration at once.

        Returns the result, whether the server was still alive at the end, and the samples."""
        started = utcnow()
        self._iteration_start(cell, kind)
        sampler = Sampler(server.pid).start()
        try:
            result = load()
        except KeyboardInterrupt:
            with no_sigint():
                sampler.stop()
            raise
        meter = sampler.stop()
        with no_sigint():
            cols = iteration_figures(result)
            alive = server.alive() and meter.alive_at_end
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
            self.store.add_iteration(row, meter.samples)
            agents_stored = getattr(self.agent, "iteration_stored", None)
            if agents_stored is not None and row.id is not None:  # several load agents
                agents_stored(self.store, row.id)
            self.loaded_s += float(cols["duration_s"] or 0.0)
        if cols["interrupted"]:
            raise Interrupted()
        self._iteration_done(cell, kind, float(cols["rps"]))
        return result, alive, list(meter.samples)


def log_tail(server: RunningServer, limit: int = 4000) -> str | None:
    """The end of the server's log, for a failure's detail."""
    try:
        return Path(server.log_path).read_text(errors="replace")[-limit:]
    except (OSError, TypeError):
        return None
