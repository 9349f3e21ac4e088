"""The study runner: the matrix's cells, replicate by replicate, into the store.

It writes the run, its stacks and cells, and opens each cell (its :class:`CellProgress`, from
the replicates already stored on ``--resume``); the scheduler (:mod:`~pywebbench.run.schedule`)
forms the groups and rounds and the executor (:mod:`~pywebbench.run.executor`) runs each
round on a host bench (:mod:`~pywebbench.run.bench`: per stack :mod:`pywebbench.bringup`,
provision -> services -> start -> verify, the same pipeline ``pywebbench verify`` uses; then
warm-up and measured iterations; then stop); the runner closes each cell when the scheduler
is done with it.

Every iteration is committed to the store as soon as it ends. A stack that fails in any phase
is recorded with the phase and reason and the matrix carries on. Ctrl-C stops the engine
within a fraction of a second (it returns a partial result), the partial iteration is kept
flagged ``interrupted``, every server is stopped, and the run is marked interrupted so
``pywebbench run --resume`` can continue it without measuring anything twice. A run being
written holds a lock: a second writer is refused before it writes anything.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from pywebbench.bringup import one_line
from pywebbench.load import LoadAgent, LocalAgent
from pywebbench.meter import pypy_gc
from pywebbench.meter.core_speed import Group, SpeedScaling, speed_scaling
from pywebbench.run.bench import StudyContext, StudySetup
from pywebbench.run.events import Events, Outcome
from pywebbench.run.executor import Executor, LocalExecutor
from pywebbench.run.host import git_revision, split_cpus
from pywebbench.run.interleaved import interleaved_groups, why_not_interleaved
from pywebbench.run.measure import Interrupted, no_sigint
from pywebbench.run.orphans import reap_orphan
from pywebbench.run.rotation import OVER_BUDGET
from pywebbench.run.rows import (
    cell_flags,
    cell_row,
    replicate_rps,
    run_row,
    slices_generator_bound,
    stack_row,
)
from pywebbench.run.schedule import (
    CellProgress,
    done_keys,
    groups_of,
    most_rounds,
    run_rounds,
    wants_another_replicate,
)
from pywebbench.store import (
    Cell,
    CellFlags,
    CellStatus,
    Failure,
    Phase,
    RunStatus,
    StoreWriter,
    new_run_id,
    run_lock,
    utcnow,
)
from pywebbench.study.config import StudyConfig
from pywebbench.study.matrix import CellPlan, Matrix


class StudyRunner:
    """Runs the cells of a :class:`Matrix` into a store, in rounds of replicates."""

    def __init__(
        self,
        config: StudyConfig,
        matrix: Matrix,
        store: StoreWriter,
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
        self.stack_ids: dict[str, int] = {}  # variant key -> its row
        self._speed_groups: dict[int, Group] = {}  # cell id -> its core-speed group
        self.outcome = Outcome(run_id=self.run_id, status=RunStatus.RUNNING)

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
        loaded_before = self.executor.loaded_s
        self._create_or_reopen_run()
        status = RunStatus.FAILED
        try:
            self._register()
            done = done_keys(self.store.cells(self.run_id)) if self.resume else set()
            pending = [c for c in self.matrix.cells if c.key not in done]
            with self.executor.prepared(self._context(pending)):  # local: provisioned here
                together = [
                    c for c in self.matrix.cells if not why_not_interleaved(c, self.config.load)
                ]
                alone = [c for c in self.matrix.cells if why_not_interleaved(c, self.config.load)]
                self._run_interleaved(interleaved_groups(together), done)
                self._run_groups(groups_of(alone, self.config.load.server_scope), done)
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
            self.outcome.measured_s = self.executor.loaded_s - loaded_before
        with no_sigint():
            self.store.update_run(self.run_id, status=status, finished_at=utcnow())
        self.outcome.status = status
        return self.outcome

    def _context(self, pending: list[CellPlan]) -> StudyContext:
        setup = StudySetup(
            config=self.config,
            run_id=self.run_id,
            results_dir=self.results_dir,
            stack_ids=dict(self.stack_ids),
            server_cpus=self.server_cpus,
            generator_cpus=self.generator_cpus,
        )
        return StudyContext(setup, self.store, self.events, self.agent, pending)

    def _create_or_reopen_run(self) -> None:
        if self.resume:
            self.store.update_run(self.run_id, status=RunStatus.RUNNING, finished_at=None)
            return
        extra: dict[str, object] = {}
        collectors: dict[str, dict[str, int | str]] = {}
        for i in self.matrix.interpreters:  # each PyPy's nursery and floor, as it reports them
            if i.is_pypy:
                try:
                    collectors[i.name] = pypy_gc.probe(i.path).describe()
                except pypy_gc.ProbeError as exc:
                    collectors[i.name] = {"error": str(exc)}
        if collectors:
            extra["pypy_gc"] = collectors
        # which pywebbench measured (a reference record says it: docs/reference-table.md)
        own = git_revision(Path(__file__).resolve().parents[3])
        if own is not None:
            extra["pywebbench_git"] = own
        if self.config.app is not None:  # your own app: which commit of it was measured
            projects = self.config.app.projects
            if len(projects) < 2:
                revision = git_revision(Path(projects[0] if projects else "."))
                if revision is not None:
                    extra["app_git"] = revision
            else:  # several projects (versions, twins): each one's, by its directory
                dirs = [Path(p).expanduser().resolve() for p in projects]
                revisions = {str(d): git_revision(d) for d in dirs}
                extra["app_git_by_project"] = {d: r for d, r in revisions.items() if r}
        self.store.create_run(
            run_row(
                self.run_id,
                profile=self.config.profile,
                config_json=json.dumps(self.config.model_dump(mode="json")),
                server_cpus=self.server_cpus,
                generator_cpus=self.generator_cpus,
                extra=extra,
            )
        )

    def _register(self) -> None:
        """Insert (or find again, on resume) every stack and cell row; mark stale rows."""
        for variant in self.matrix.variants:
            self.stack_ids[variant.key] = self.store.add_stack(stack_row(self.run_id, variant))
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
        stack_id = self.stack_ids[cell.variant.key]
        return cell_row(self.run_id, stack_id, cell, self.server_cpus, self.generator_cpus)

    # -- cells -----------------------------------------------------------------------------

    def _open_cell(self, cell: CellPlan) -> CellProgress:
        cfg = self.config.load
        cell_id = self.store.add_cell(self._cell_row(cell))
        self._speed_groups[cell_id] = _speed_group(cell)
        progress = CellProgress.resumed(cell, cell_id, self.store.replicates(cell_id))
        per_rep = cfg.iterations_per_replicate
        planned = cfg.replicates_for(cell.variant.stack.interpreter.is_pypy)
        self.events.cell_start(cell, (planned - progress.ok) * per_rep)
        self.store.update_cell(cell_id, status=CellStatus.RUNNING, started_at=utcnow())
        return progress

    def _open_groups(
        self, groups: list[list[CellPlan]], done: set[str]
    ) -> list[list[CellProgress]]:
        """Each group's cells not ``done``, opened (groups left empty are dropped; the done
        ones are counted as skipped)."""
        opened: list[list[CellProgress]] = []
        for cells in groups:
            self.outcome.cells_skipped += sum(1 for c in cells if c.key in done)
            group = [self._open_cell(c) for c in cells if c.key not in done]
            if group:
                opened.append(group)
        return opened

    def _run_groups(self, groups: list[list[CellPlan]], done: set[str]) -> None:
        """Open the cells not ``done`` and run them with the scheduler's rounds
        (:func:`~pywebbench.run.schedule.run_rounds`) on the executor; a cell is finished
        (stored ``ok`` or ``failed``) once it needs no more replicates."""
        opened = self._open_groups(groups, done)
        run_rounds(
            opened,
            rounds=most_rounds(self.config.load),
            run_round=self.executor.run_round,
            wants_more=self._wants_more,
            finish=self._finish_cell,
            interrupted=self._interrupted,
        )

    def _run_interleaved(self, groups: list[list[CellPlan]], done: set[str]) -> None:
        """Open the cells not ``done`` and measure each interleaved group whole on the
        executor (:mod:`pywebbench.run.interleaved`); every cell is finished after."""
        opened = self._open_groups(groups, done)
        if not opened:
            return
        pending = [p for group in opened for p in group]
        # one group at a time here, so that each is finished (stored ok) as soon as it is
        # measured; all at once where the executor runs them in parallel (Ray's nodes)
        batches = [opened] if self.executor.parallel else [[g] for g in opened]
        for batch in batches:
            try:
                outcomes = self.executor.run_groups(batch)
            except (KeyboardInterrupt, Interrupted):
                self._interrupted(pending)
                raise
            for group, results in zip(batch, outcomes, strict=True):
                for progress, outcome in zip(group, results, strict=True):
                    progress.apply(outcome)
                    self._finish_cell(progress)
                    pending.remove(progress)

    def _wants_more(self, p: CellProgress) -> bool:
        """The replicate budget's rule, on the cell's replicates in the store."""

        def rps() -> list[list[float]]:
            return replicate_rps(
                self.store.replicates(p.cell_id),
                self.store.iterations(p.cell_id),
                self._speed(p),
            )

        jit = p.cell.variant.stack.interpreter.is_pypy
        return wants_another_replicate(p.ok, self.config.load, rps, jit=jit)

    def _speed(self, p: CellProgress) -> SpeedScaling:
        """How the cell's req/s are put at one core speed: its group's (same interpreter,
        same workload) elasticity over the group's cells stored so far (as the report
        will: :func:`pywebbench.meter.core_speed.study_scaling`)."""
        group = _speed_group(p.cell)
        return speed_scaling(
            (group, self.store.iterations(cell_id))
            for cell_id, g in self._speed_groups.items()
            if g == group
        )

    def _interrupted(self, pending: Sequence[CellProgress]) -> None:
        with no_sigint():
            for p in pending:
                self.store.update_cell(p.cell_id, status=CellStatus.INTERRUPTED)

    def _finish_cell(self, p: CellProgress) -> None:
        cell, cell_id, failure = p.cell, p.cell_id, p.failure
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
                flags_json=json.dumps(self._flags(p)),
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
                    stack_id=self.stack_ids[cell.variant.key],
                    cell_id=cell_id,
                    detail=failure.detail,
                )
            )
            self.outcome.cells_failed += 1
            self.outcome.failures.append((cell.label, failure.phase, failure.reason))
            self.events.cell_done(cell, CellStatus.FAILED, f"{failure.phase}: {failure.reason}")

    def _flags(self, p: CellProgress) -> CellFlags:
        replicates, iterations = self.store.replicates(p.cell_id), self.store.iterations(p.cell_id)
        flags = cell_flags(replicates, iterations, self._speed(p))
        if p.robustness is not None:
            flags["robustness"] = p.robustness.to_flag()
        why = why_not_interleaved(p.cell, self.config.load)
        if why is not None and self.config.load.design == "interleaved":
            flags["per_cell"] = why  # the report marks it, as run said before it started
        if p.group is not None:  # an interleaved group's figures (run/interleaved.py)
            flags["group"] = p.group
            # its iterations are slices: a few bound by a burst do not make the stack so
            flags["generator_bound"] = slices_generator_bound(iterations)
        stopped = [
            r for r in replicates if r.failure_reason and r.failure_reason.startswith(OVER_BUDGET)
        ]
        if stopped and p.group is not None:  # stopped at the memory budget (cell_flags)
            p.group["stopped"] = [r.failure_reason for r in stopped]
        return flags


def run_study(
    config: StudyConfig,
    matrix: Matrix,
    store: StoreWriter,
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


def _speed_group(cell: CellPlan) -> Group:
    """The cells that share a core-speed elasticity: same interpreter, same workload."""
    return (cell.variant.stack.interpreter.name, cell.workload.name)
