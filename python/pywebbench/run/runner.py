"""The study runner: the matrix's cells, replicate by replicate, into the store.

Per stack it uses :mod:`pywebbench.bringup` (provision -> services -> start -> verify), the
same pipeline ``pywebbench verify`` uses; then warm-up and measured iterations; then stop.

Every iteration is committed to the store as soon as it ends. A stack that fails in any phase
is recorded with the phase and reason and the matrix carries on. Ctrl-C stops the engine
within a fraction of a second (it returns a partial result), the partial iteration is kept
flagged ``interrupted``, every server is stopped, and the run is marked interrupted so
``pywebbench run --resume`` can continue it without measuring anything twice. A run being
written holds a lock: a second writer is refused before it writes anything.
"""

from __future__ import annotations

import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pywebbench import __version__, bringup
from pywebbench.bind import Bind
from pywebbench.bringup import StackFailure, one_line
from pywebbench.load import LoadAgent, LoadProgress, LocalAgent
from pywebbench.modes import levels_disagree, replicate_figures
from pywebbench.run.config import StudyConfig
from pywebbench.run.events import Events, Outcome
from pywebbench.run.executor import Executor, LocalExecutor
from pywebbench.run.host import facts, git_revision, split_cpus
from pywebbench.run.knee import KneePhase, measured_rps
from pywebbench.run.matrix import CellPlan, Matrix, Variant
from pywebbench.run.measure import Interrupted, Measurer, no_sigint
from pywebbench.run.orphans import reap_orphan
from pywebbench.run.rows import cell_flags, replicate_rps, stack_row, started_server_columns
from pywebbench.stats import summarize_replicates
from pywebbench.store import (
    Cell,
    CellStatus,
    Failure,
    Phase,
    Replicate,
    Run,
    RunStatus,
    Store,
    new_run_id,
    run_lock,
    utcnow,
)

#: The replicate budget (``ci_target``) judges a cell's CI only from this many replicates on.
BUDGET_MIN_REPLICATES = 3

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.provision.venv import ProvisionedEnv


@dataclass
class _CellState:
    """Progress of one cell while its group runs."""

    cell: CellPlan
    cell_id: int
    ok: int  # replicates completed (this run and before a --resume)
    next_rep: int  # number of the next replicate
    failure: StackFailure | None = None


class StudyRunner:
    """Runs the cells of a :class:`Matrix` into a store, in rounds of replicates."""

    def __init__(
        self,
        config: StudyConfig,
        matrix: Matrix,
        store: Store,
        *,
        results_dir: Path,
        agent: LoadAgent | None = None,
        events: Events | None = None,
        run_id: str | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.config = config
        self.matrix = matrix
        self.store = store
        self.results_dir = Path(results_dir)
        self.agent = agent or LocalAgent()
        self.events = events or Events()
        self.executor: Executor = executor or LocalExecutor()
        self.resume = run_id is not None
        self.run_id = run_id or new_run_id()
        self.server_cpus, self.generator_cpus = split_cpus(
            config.cpus.server, config.cpus.generator
        )
        self.log_dir = self.results_dir / "logs" / self.run_id
        self._stack_ids: dict[str, int] = {}
        self._envs: dict[str, ProvisionedEnv] = {}  # variant key -> its virtualenv
        self._provision_failed: dict[str, StackFailure] = {}
        self._settings_recorded: set[str] = set()
        self._services: bringup.Services | None = None
        self._robustness: dict[int, dict[str, Any]] = {}  # cell id -> last fault phase
        self._done: set[str] | None = None
        self.outcome = Outcome(run_id=self.run_id, status=RunStatus.RUNNING)
        self._measure = Measurer(
            config,
            store,
            self.agent,
            self.generator_cpus,
            progress=self._progress,
            iteration_start=self.events.iteration_start,
            iteration_done=self.events.iteration_done,
            phase=self.events.phase,
        )
        self._knee = (
            KneePhase(
                config,
                store,
                self.agent,
                self.generator_cpus,
                progress=self._progress,
                report=self.events.knee,
            )
            if config.load.slo
            else None
        )
        self._measure.fresh_server = lambda cell: lambda: self._fresh_server(cell)

    # -- the study -------------------------------------------------------------------------

    def run(self) -> Outcome:
        """Run the whole study. Returns its :class:`Outcome`; never raises on Ctrl-C.

        Raises :class:`pywebbench.store.RunLocked`, before writing anything, when another
        process is writing the same run.
        """
        with run_lock(self.store.path, self.run_id):
            return self._run_locked()

    def _run_locked(self) -> Outcome:
        t0 = time.monotonic()
        self._create_or_reopen_run()
        status = RunStatus.FAILED
        try:
            self._register()
            with self.executor.prepared(self):  # local: provisioned, services started here
                self._run_groups(self._groups())
            status = RunStatus.COMPLETED
        except (KeyboardInterrupt, Interrupted):
            status = RunStatus.INTERRUPTED
        except BaseException:
            with no_sigint():
                self.store.add_failure(
                    Failure(
                        None,
                        self.run_id,
                        Phase.INTERRUPTED,
                        "pywebbench failed: " + one_line(sys.exc_info()[1]),
                        utcnow(),
                        detail=traceback.format_exc(),
                    )
                )
                self.store.update_run(self.run_id, status=RunStatus.FAILED, finished_at=utcnow())
            raise
        finally:
            self.outcome.wall_s = time.monotonic() - t0
            self.outcome.measured_s = self._measure.loaded_s
        with no_sigint():
            self.store.update_run(self.run_id, status=status, finished_at=utcnow())
        self.outcome.status = status
        return self.outcome

    def _create_or_reopen_run(self) -> None:
        if self.resume:
            self.store.update_run(self.run_id, status=RunStatus.RUNNING, finished_at=None)
            return
        host = facts()
        extra = dict(host["extra"])
        if self.config.app is not None:  # your own app: which commit of it was measured
            revision = git_revision(Path(self.config.app.project or "."))
            if revision is not None:
                extra["app_git"] = revision
        self.store.create_run(
            Run(
                id=self.run_id,
                created_at=utcnow(),
                finished_at=None,
                status=RunStatus.RUNNING,
                profile=self.config.profile,
                hostname=host["hostname"],
                cpu_model=host["cpu_model"],
                cpu_count=host["cpu_count"],
                kernel=host["kernel"],
                governor=host["governor"],
                memory_bytes=host["memory_bytes"],
                os=host["os"],
                pywebbench_version=__version__,
                orchestrator_python=sys.version.split()[0],
                server_cpus_json=json.dumps(self.server_cpus),
                generator_cpus_json=json.dumps(self.generator_cpus),
                config_json=json.dumps(self.config.model_dump(mode="json")),
                host_json=json.dumps(extra),
            )
        )

    def _register(self) -> None:
        """Insert (or find again, on resume) every stack and cell row; mark stale rows."""
        for variant in self.matrix.variants:
            self._stack_ids[variant.key] = self.store.add_stack(stack_row(self.run_id, variant))
        for name, reason in self.matrix.unavailable:
            if not self.resume:
                self.store.add_failure(
                    Failure(None, self.run_id, Phase.PROVISION, f"{name}: {reason}", utcnow())
                )
        for cell in self.matrix.cells:
            self.store.add_cell(self._cell_row(cell))
        if self.resume:  # a crash or Ctrl-C may have left rows "running"
            stacks = {s.id: s for s in self.store.stacks(self.run_id)}
            for row in self.store.cells(self.run_id):
                assert row.id is not None  # read back from the store
                if row.status == CellStatus.RUNNING:
                    self.store.update_cell(row.id, status=CellStatus.INTERRUPTED)
                for rep in self.store.replicates(row.id):
                    if rep.status == CellStatus.RUNNING and rep.id is not None:
                        self.store.update_replicate(rep.id, status=CellStatus.INTERRUPTED)
                        reap_orphan(rep, stacks.get(row.stack_id))

    def _cell_row(self, cell: CellPlan) -> Cell:
        return Cell(
            id=None,
            run_id=self.run_id,
            stack_id=self._stack_ids[cell.variant.key],
            key=cell.key,
            ordinal=cell.ordinal,
            workload=cell.workload.name,
            workload_params_json=json.dumps(cell.params, sort_keys=True),
            load_model=cell.load_model,
            connections=cell.connections,
            rate=cell.rate,
            load_point=cell.load_point,
            connection_mode=cell.connection_mode,
            bind=cell.bind,
            status=CellStatus.PENDING,
            server_cpus_json=json.dumps(self.server_cpus),
            generator_cpus_json=json.dumps(self.generator_cpus),
        )

    def _done_cells(self) -> set[str]:
        if self._done is None:
            finished = (CellStatus.OK, CellStatus.FAILED)
            self._done = {c.key for c in self.store.cells(self.run_id) if c.status in finished}
        return self._done

    # -- groups of cells sharing server processes ------------------------------------------

    def _groups(self) -> list[list[CellPlan]]:
        """Cells that share server processes: one cell each (``server_scope = "cell"``), or
        all cells of a stack variant with one bind (``"stack"``: one server per replicate
        serves them)."""
        if self.config.load.server_scope == "cell":
            return [[c] for c in self.matrix.cells]
        groups: dict[tuple[str, str], list[CellPlan]] = {}
        for c in self.matrix.cells:
            groups.setdefault((c.variant.key, c.bind), []).append(c)
        return list(groups.values())

    def _open_cell(self, cell: CellPlan) -> _CellState:
        cfg = self.config.load
        cell_id = self.store.add_cell(self._cell_row(cell))
        previous = self.store.replicates(cell_id)
        state = _CellState(
            cell=cell,
            cell_id=cell_id,
            ok=sum(1 for r in previous if r.status == CellStatus.OK),
            next_rep=max((r.replicate for r in previous), default=-1) + 1,
            failure=self._provision_failed.get(cell.variant.key),
        )
        if state.failure is None and self._services is not None:
            state.failure = self._services.failure_for(cell.workload)
        per_rep = cfg.iterations_per_replicate
        self.events.cell_start(cell, (cfg.replicates - state.ok) * per_rep)
        self.store.update_cell(cell_id, status=CellStatus.RUNNING, started_at=utcnow())
        return state

    def _run_groups(self, groups: list[list[CellPlan]]) -> None:
        """Run the replicates of every group of cells, round by round across the study.

        Round r runs replicate r of every group before any group gets replicate r+1, so a
        cell's replicates are spread over the study's whole time and its confidence
        interval takes in the machine's drift over that time (run one group to the end,
        then the next, and drift between groups shows up as a difference between stacks
        that no interval covers). Odd rounds visit the groups in reverse order, so no
        group is always measured first or last. Within a group, each round starts one
        fresh server process and runs every cell that still needs a replicate on it.
        A cell is finished (stored ``ok`` or ``failed``) once it needs no more replicates.
        """
        done = self._done_cells()
        opened: list[list[_CellState]] = []
        for cells in groups:
            self.outcome.cells_skipped += sum(1 for c in cells if c.key in done)
            states = [self._open_cell(c) for c in cells if c.key not in done]
            if states:
                opened.append(states)
        pending = [st for states in opened for st in states]
        try:
            for round_no in range(self._most_replicates()):
                order = opened if round_no % 2 == 0 else opened[::-1]
                batch = []
                for states in order:
                    active = [st for st in states if st.failure is None and self._wants_more(st)]
                    if not active:
                        continue
                    # Rotate the order of the group's cells (workloads) from round to round,
                    # so no workload is always the first one a fresh server serves.
                    shift = round_no % len(active)
                    batch.append(active[shift:] + active[:shift])
                self.executor.run_round(self, batch)  # local: in this order; ray: in parallel
                ran = bool(batch)
                for st in [st for st in pending if st.failure or not self._wants_more(st)]:
                    self._finish_cell(st)
                    pending.remove(st)
                if not ran:
                    break
        except (KeyboardInterrupt, Interrupted):
            with no_sigint():
                for st in pending:
                    self.store.update_cell(st.cell_id, status=CellStatus.INTERRUPTED)
            raise
        for st in pending:
            self._finish_cell(st)

    def _most_replicates(self) -> int:
        cfg = self.config.load
        return max(cfg.replicates, cfg.max_replicates)

    def _wants_more(self, st: _CellState) -> bool:
        """Another replicate for this cell? The planned ones, then more, up to
        ``max_replicates``, while its replicates settle at different levels
        (:func:`pywebbench.modes.levels_disagree`) or (replicate budget) while the CI of its
        median is wider than ``ci_target``.

        The budget judges a CI only from :data:`BUDGET_MIN_REPLICATES` on: 2 values that
        happen to agree give a narrow interval by luck, and stopping on it would leave the
        cells that stopped early with intervals that cover less than they claim."""
        cfg = self.config.load
        if st.ok < cfg.replicates:
            return True
        if st.ok >= cfg.max_replicates:
            return False
        rps = replicate_rps(self.store.replicates(st.cell_id), self.store.iterations(st.cell_id))
        if levels_disagree(replicate_figures(rps)):  # modes, not noise: show them (issue 21)
            return True
        if cfg.ci_target is None:
            return False
        if st.ok < BUDGET_MIN_REPLICATES:
            return True
        width = summarize_replicates(rps).ci_halfwidth_rel
        return math.isnan(width) or width > cfg.ci_target  # NaN: too few values for a CI

    def _round(self, active: list[_CellState]) -> None:
        """One replicate of every active cell, on one fresh server (restarted if it died)."""
        server: RunningServer | None = None
        try:
            for st in active:
                if st.failure is not None:  # the server failed to start this round
                    continue
                if server is not None and not server.alive():
                    self._stop_server(server, st)
                    server = None
                try:
                    if server is None:
                        server = self._start_server(st, [a.cell for a in active])
                    self._replicate_on(server, st)
                    st.ok += 1
                except StackFailure as exc:
                    st.failure = exc
                    if exc.phase == Phase.START:  # same stack: no point starting again
                        for other in active:
                            if other.failure is None:
                                other.failure = exc
                st.next_rep += 1
        finally:
            if server is not None:
                self._stop_server(server, active[-1])

    def _finish_cell(self, st: _CellState) -> None:
        cell, cell_id, failure = st.cell, st.cell_id, st.failure
        with no_sigint():
            why = (
                {"failure_phase": failure.phase, "failure_reason": failure.reason}
                if failure
                else {}
            )
            self.store.update_cell(
                cell_id,
                status=CellStatus.OK if failure is None else CellStatus.FAILED,
                finished_at=utcnow(),
                flags_json=json.dumps(self._flags(cell_id)),
                **why,
            )
            if failure is None:
                self.outcome.cells_ok += 1
                self.events.cell_done(cell, CellStatus.OK, None)
                return
            self.store.add_failure(
                Failure(
                    None,
                    self.run_id,
                    failure.phase,
                    failure.reason,
                    utcnow(),
                    stack_id=self._stack_ids[cell.variant.key],
                    cell_id=cell_id,
                    detail=failure.detail,
                )
            )
            self.outcome.cells_failed += 1
            self.outcome.failures.append((cell.label, failure.phase, failure.reason))
            self.events.cell_done(cell, CellStatus.FAILED, f"{failure.phase}: {failure.reason}")

    def _flags(self, cell_id: int) -> dict[str, Any]:
        flags = cell_flags(self.store.replicates(cell_id), self.store.iterations(cell_id))
        if cell_id in self._robustness:
            flags["robustness"] = self._robustness.pop(cell_id)
        return flags

    # -- one server ------------------------------------------------------------------------

    def _start_server(self, st: _CellState, round_cells: list[CellPlan]) -> RunningServer:
        """A fresh server for ``st``'s stack; a failure is recorded on ``st``'s replicate."""
        variant = st.cell.variant
        self.events.phase(f"starting {variant.key} (replicate {st.ok + 1})")
        ready = bringup.ready_path(variant.stack, [c.workload for c in round_cells])
        try:
            options = self._launch_options(variant, st.cell.bind)
            return bringup.start(variant.stack, self._envs[variant.key], options, ready)
        except StackFailure as exc:
            with no_sigint():
                self.store.add_replicate(
                    Replicate(
                        None,
                        st.cell_id,
                        st.next_rep,
                        CellStatus.FAILED,
                        utcnow(),
                        failure_phase=exc.phase,
                        failure_reason=exc.reason,
                        finished_at=utcnow(),
                        log_path=str(exc.log_path) if exc.log_path else None,
                    )
                )
            raise

    def _launch_options(self, variant: Variant, bind: Bind) -> bringup.LaunchOptions:
        return bringup.LaunchOptions(
            log_dir=self.log_dir,
            cpus=self.server_cpus,
            workers=variant.workers,
            threads=variant.threads,
            app_env=self._services.env if self._services is not None else {},
            start_timeout_s=self.config.timeouts.start_s,
            max_requests=variant.max_requests,
            server_options=self.config.matrix.server_options.get(variant.stack.server.name, {}),
            bind=bind,
        )

    @contextmanager
    def _fresh_server(self, cell: CellPlan) -> Iterator[tuple[str, Callable[[], bool]]]:
        """A server of ``cell``'s stack for one fault-sweep size (docs/faults.md)."""
        variant = cell.variant
        self.events.phase(f"starting {variant.key} for the next fault size")
        ready = bringup.ready_path(variant.stack, [cell.workload])
        options = self._launch_options(variant, cell.bind)
        server = bringup.start(variant.stack, self._envs[variant.key], options, ready)
        try:
            yield server.base_url, server.alive
        finally:
            with no_sigint():
                bringup.stop(server)

    def _stop_server(self, server: RunningServer, st: _CellState) -> None:
        """Stop the server's process group (shielded from Ctrl-C); a slow stop is recorded."""
        with no_sigint():
            took = bringup.stop(server)
            if took > self.config.timeouts.stop_s:
                self.store.add_failure(
                    Failure(
                        None,
                        self.run_id,
                        Phase.STOP,
                        f"stopping {st.cell.variant.key} took {took:.1f} s",
                        utcnow(),
                        stack_id=self._stack_ids[st.cell.variant.key],
                    )
                )

    def _replicate_on(self, server: RunningServer, st: _CellState) -> None:
        """One replicate of a cell on a running server: verify, warm-up and measured
        iterations; raises StackFailure."""
        cell, cell_id, replicate = st.cell, st.cell_id, st.next_rep
        rep_id = self.store.add_replicate(
            Replicate(None, cell_id, replicate, CellStatus.RUNNING, utcnow())
        )
        status = CellStatus.INTERRUPTED
        fail: StackFailure | None = None
        try:
            self._record_start(cell.variant, rep_id, server)
            self.events.phase(f"verifying {cell.variant.key} {cell.workload.name}")
            fail = bringup.check(
                server,
                cell.variant.stack,
                cell.workload,
                cell.params,
                timeout_s=self.config.timeouts.verify_s,
            ).failure()
            if fail is None:
                fail, robustness = self._measure.replicate(cell, cell_id, rep_id, replicate, server)
                if robustness is not None:
                    self._robustness[cell_id] = robustness
            if fail is None and self._knee is not None:  # docs/slo.md: after the iterations
                fail = self._knee.run(
                    cell, cell_id, replicate, server, measured_rps(self.store, cell_id, replicate)
                )
            status = CellStatus.FAILED if fail else CellStatus.OK
        except StackFailure as exc:
            fail, status = exc, CellStatus.FAILED
        finally:
            with no_sigint():
                self.store.update_replicate(
                    rep_id,
                    status=status,
                    finished_at=utcnow(),
                    failure_phase=fail.phase if fail else None,
                    failure_reason=fail.reason if fail else None,
                )
        if fail is not None:
            raise fail

    def _record_start(self, variant: Variant, rep_id: int, server: RunningServer) -> None:
        self.store.update_replicate(rep_id, **started_server_columns(server))
        if variant.key not in self._settings_recorded:
            self._settings_recorded.add(variant.key)
            self.store.update_stack(
                self._stack_ids[variant.key],
                settings_json=json.dumps(server.settings, sort_keys=True, default=str),
            )

    # -- iterations ------------------------------------------------------------------------

    def _progress(self, snap: LoadProgress) -> None:
        """Engine progress callback: must never raise (an exception stops the engine)."""
        try:
            self.events.live_rps(snap.rps)
        except Exception:  # noqa: BLE001 - display only; KeyboardInterrupt stops the engine
            pass


def run_study(
    config: StudyConfig,
    matrix: Matrix,
    store: Store,
    *,
    results_dir: Path,
    agent: LoadAgent | None = None,
    events: Events | None = None,
    run_id: str | None = None,
    executor: Executor | None = None,
) -> Outcome:
    """Run (or, with ``run_id``, resume) a study; see :class:`StudyRunner`."""
    runner = StudyRunner(
        config,
        matrix,
        store,
        results_dir=results_dir,
        agent=agent,
        events=events,
        run_id=run_id,
        executor=executor,
    )
    return runner.run()
