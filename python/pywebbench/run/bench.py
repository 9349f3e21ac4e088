"""The host bench: everything one host does for a study's rounds.

A :class:`HostBench` owns, on the host it runs on, the virtualenv cache of the study's stacks,
the services their workloads need, and the servers: per round of a group it starts one fresh
server (restarted if it died), runs one replicate of each cell on it (verify, warm-up and
measured iterations, then the knee search when the study has an SLO), and stops it. The same
bench runs here for the local executor and on a node for the Ray executor; it writes through a
:class:`~pywebbench.store.StoreWriter` and tells :class:`~pywebbench.run.events.Events`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pywebbench import bringup
from pywebbench.bringup import StackFailure
from pywebbench.load import LoadAgent, LoadProgress, LoadSpec
from pywebbench.run.events import Events
from pywebbench.run.knee import KneePhase, measured_rps
from pywebbench.run.measure import Measurer, no_sigint
from pywebbench.run.robustness import FaultTarget, FreshServer
from pywebbench.run.rows import started_server_columns
from pywebbench.run.schedule import CellOutcome, CellProgress, assign_failure
from pywebbench.run.seams import Seams
from pywebbench.store import CellStatus, Failure, Phase, Replicate, StoreWriter, utcnow
from pywebbench.study.config import StudyConfig
from pywebbench.study.matrix import CellPlan, Variant

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.provision.venv import ProvisionedEnv
    from pywebbench.run.interleaved import GroupRun


@dataclass(frozen=True)
class StudySetup:
    """What a bench needs to know of the study: plain values, so they travel to a node."""

    config: StudyConfig
    run_id: str
    results_dir: Path
    stack_ids: dict[str, int]  # variant key -> its row in the store
    server_cpus: list[int]
    generator_cpus: list[int]

    @property
    def log_dir(self) -> Path:
        """Where the servers' logs go."""
        return self.results_dir / "logs" / self.run_id


@dataclass(frozen=True)
class StudyContext:
    """What an executor is given for a study: its setup, the store and the display it
    reports to, the load agent of this host, and the cells still to run."""

    setup: StudySetup
    store: StoreWriter
    events: Events
    agent: LoadAgent
    cells: list[CellPlan]


class HostBench:
    """Runs rounds of groups of cells on this host (see the module doc); ``seams``: where it
    reaches the world, bring-up and meters (the real ones unless given: run/seams.py)."""

    def __init__(
        self,
        setup: StudySetup,
        store: StoreWriter,
        agent: LoadAgent,
        events: Events,
        seams: Seams | None = None,
    ) -> None:
        self.seams = seams or Seams()
        self.setup = setup
        self.config = setup.config
        self.store = store
        self.events = events
        self._envs: dict[str, ProvisionedEnv] = {}  # variant key -> its virtualenv
        self._provision_failed: dict[str, StackFailure] = {}
        self._settings_recorded: set[str] = set()
        self._services: bringup.Services | None = None
        self._measure = Measurer(
            setup.config,
            store,
            agent,
            setup.generator_cpus,
            progress=self._progress,
            iteration_start=events.iteration_start,
            iteration_done=events.iteration_done,
            phase=events.phase,
            fresh_server=self._fresh_server,
            seams=self.seams,
        )
        self._measure.extra_server = self._extra_server
        self._knee = (
            KneePhase(
                setup.config,
                store,
                agent,
                setup.generator_cpus,
                progress=self._progress,
                report=events.knee,
            )
            if setup.config.load.slo
            else None
        )

    @property
    def loaded_s(self) -> float:
        """The sum of the load windows this bench ran."""
        return self._measure.loaded_s

    # -- the environment ---------------------------------------------------------------------

    @contextmanager
    def prepared(self, cells: Sequence[CellPlan]) -> Iterator[None]:
        """The stacks of ``cells`` provisioned and the services they need running, here, for
        the duration of the block."""
        self._provision([c.variant for c in cells])
        needed = bringup.services_needed(c.workload for c in cells)
        if needed:
            self.events.phase(f"starting services: {', '.join(needed)}")
        workdir = self.setup.results_dir / "services" / self.setup.run_id
        with self.seams.bringup.services(needed, workdir) as services:
            self._services = services
            try:
                yield
            finally:
                self._services = None

    def _provision(self, variants: Sequence[Variant]) -> None:
        """Provision (or find cached) the virtualenv of every variant, on this host; a
        failure is kept for the variant's cells and the matrix carries on."""
        for variant in dict((v.key, v) for v in variants).values():
            if variant.key in self._envs or variant.key in self._provision_failed:
                continue
            self.events.phase(f"provisioning {variant.stack.name}")
            t0 = time.monotonic()
            stack_id = self.setup.stack_ids[variant.key]
            try:
                env = self.seams.bringup.provision(
                    variant.stack,
                    progress=self.events.phase,
                    timeout_s=self.config.timeouts.provision_s,
                )
            except StackFailure as exc:
                self._provision_failed[variant.key] = exc
                self.store.update_stack(stack_id, provision_s=time.monotonic() - t0)
                continue
            self._envs[variant.key] = env
            self.store.update_stack(
                stack_id,
                packages_json=json.dumps(dict(env.packages), sort_keys=True),
                provision_s=float(env.seconds),
                provision_cached=bool(env.cached),
            )

    def failure_for(self, cell: CellPlan) -> StackFailure | None:
        """Why ``cell`` cannot run here: its stack did not provision, or a service its
        workload needs did not start (None: it can)."""
        failure = self._provision_failed.get(cell.variant.key)
        if failure is None and self._services is not None:
            failure = self._services.failure_for(cell.workload)
        return failure

    # -- a round -----------------------------------------------------------------------------

    def run_round(self, group: Sequence[CellProgress]) -> list[CellOutcome]:
        """One replicate of every cell of ``group``, on one fresh server (restarted if it
        died); each cell's outcome. Raises on Ctrl-C (what was measured is stored)."""
        cells = [dataclasses.replace(p) for p in group]
        for p in cells:
            if p.failure is None:
                p.failure = self.failure_for(p.cell)
        # the server's ready path comes from the cells that can run (not from a workload
        # whose service failed to start)
        runnable = [p.cell for p in cells if p.failure is None]
        server: RunningServer | None = None
        try:
            for p in cells:
                if p.failure is not None:  # it cannot run here, or the server failed to start
                    continue
                if server is not None and not server.alive():
                    self._stop_server(server, p)
                    server = None
                try:
                    if server is None:
                        server = self._start_server(p, runnable)
                    self._replicate_on(server, p)
                    p.ok += 1
                except StackFailure as exc:
                    assign_failure(cells, p, exc)
                p.next_rep += 1
        finally:
            if server is not None:
                self._stop_server(server, cells[-1])
        return [p.outcome() for p in cells]

    def run_group(self, group: Sequence[CellProgress]) -> list[CellOutcome]:
        """Every cell of an interleaved group measured at once (:mod:`pywebbench.run.interleaved`):
        ``processes`` servers of each stack up together, loaded in slices of the same rounds;
        each cell's outcome, its group figures included. Raises on Ctrl-C (what was measured
        is stored, every server is stopped)."""
        from pywebbench.meter.slice_interference import CoreAccounting
        from pywebbench.run.interleaved import (
            GroupOptions,
            GroupRun,
            group_label,
            rotation_seed,
            run_group,
            stack_log_dir,
        )

        seed = rotation_seed(group_label(group[0].cell), self.config.load.seed)

        cells = [dataclasses.replace(p) for p in group]
        for p in cells:
            if p.failure is None:
                p.failure = self.failure_for(p.cell)
        runnable = [p.cell for p in cells if p.failure is None]
        cpus = self.setup.server_cpus

        def launch(cell: CellPlan) -> tuple[ProvisionedEnv, bringup.LaunchOptions]:
            options = self._launch_options(cell, stack_log_dir(self.setup.log_dir, cell))
            return self._envs[cell.variant.key], options

        def load_spec(cell: CellPlan, base_url: str) -> LoadSpec:
            return cell.load_spec(
                base_url, self.config.load, self.setup.generator_cpus, duration_s=1.0
            )

        run = GroupRun(
            cells,
            GroupOptions.of(self.config.load, seed=seed),
            store=self.store,
            pool=bringup.ServerPool(
                launch,
                verify_timeout_s=self.config.timeouts.verify_s,
                steps=self.seams.bringup,
            ),
            agent=self._measure.agent,
            load_spec=load_spec,
            interference=lambda pids: CoreAccounting(cpus, pids),
            say=self.events.phase,
            generator_cpus=self.setup.generator_cpus,
            server_cpus=cpus,
        )
        try:
            if not runnable:
                return [p.outcome() for p in cells]
            outcomes = run_group(run)
        finally:
            self._measure.loaded_s += run.loaded_s
        if self.config.load.instructions:
            self._count_group(run, outcomes)
        return outcomes

    def _count_group(self, run: GroupRun, outcomes: Sequence[CellOutcome]) -> None:
        """``--instructions`` on an interleaved group: each measured cell's first
        ``instructions_replicates`` server processes get a count, on a fresh server under
        valgrind each, once the group's servers are down (no count shares the cores with
        the timed slices); stored on those processes' replicates, as the per-cell path
        stores them."""
        n = self.config.load.instructions_replicates
        for p, outcome in zip(run.cells, outcomes, strict=True):
            if outcome.failure is not None:
                continue
            mine = sorted(
                (m for m in run.members if m.progress is p and m.stopped is None),
                key=lambda m: m.k,
            )
            for m in mine[:n]:
                self._measure.count_instructions(p.cell, m.replicate_id)

    # -- one server ------------------------------------------------------------------------

    def _start_server(self, p: CellProgress, round_cells: list[CellPlan]) -> RunningServer:
        """A fresh server for ``p``'s stack; a failure is recorded on ``p``'s replicate."""
        variant = p.cell.variant
        self.events.phase(f"starting {variant.key} (replicate {p.ok + 1})")
        ready = bringup.ready_path(variant.stack, [c.workload for c in round_cells])
        try:
            options = self._launch_options(p.cell)
            return self.seams.bringup.start(variant.stack, self._envs[variant.key], options, ready)
        except StackFailure as exc:
            with no_sigint():
                self.store.add_replicate(
                    Replicate(
                        None,
                        p.cell_id,
                        p.next_rep,
                        CellStatus.FAILED,
                        utcnow(),
                        failure_phase=exc.phase,
                        failure_reason=exc.reason,
                        finished_at=utcnow(),
                        log_path=str(exc.log_path) if exc.log_path else None,
                    )
                )
            raise

    def _launch_options(self, cell: CellPlan, log_dir: Path | None = None) -> bringup.LaunchOptions:
        """How ``cell``'s servers start (:func:`bringup.launch_options`): on the server
        cores, with the services' environment, where the cell binds and what it speaks;
        logging under ``log_dir`` (default: the study's log directory)."""
        return bringup.launch_options(
            cell.variant,
            log_dir=log_dir or self.setup.log_dir,
            cpus=self.setup.server_cpus,
            services=self._services,
            bind=cell.bind,
            protocol=cell.protocol,
            config=self.config,
        )

    def _fresh_server(self, cell: CellPlan) -> FreshServer:
        """Fresh servers of ``cell``'s stack, one per fault-sweep size (docs/faults.md)."""
        return lambda: self._server_for_faults(cell)

    @contextmanager
    def _server_for_faults(self, cell: CellPlan) -> Iterator[FaultTarget]:
        with self._extra_server(cell, "for the next fault size") as server:
            yield FaultTarget(server.base_url, server.alive, server.pid)

    @contextmanager
    def _extra_server(self, cell: CellPlan, why: str, **launch: Any) -> Iterator[RunningServer]:
        """Another server of ``cell``'s stack, its launch options changed by ``launch``
        (a fault-sweep size; ``--instructions``: under valgrind), stopped after the block."""
        variant = cell.variant
        self.events.phase(f"starting {variant.key} {why}")
        ready = bringup.ready_path(variant.stack, [cell.workload])
        options = replace(self._launch_options(cell), **launch)
        server = self.seams.bringup.start(variant.stack, self._envs[variant.key], options, ready)
        try:
            yield server
        finally:
            with no_sigint():
                self.seams.bringup.stop(server)

    def _stop_server(self, server: RunningServer, p: CellProgress) -> None:
        """Stop the server's process group (shielded from Ctrl-C); a slow stop is recorded."""
        with no_sigint():
            took = self.seams.bringup.stop(server)
            if took > self.config.timeouts.stop_s:
                self.store.add_failure(
                    Failure(
                        None,
                        self.setup.run_id,
                        Phase.STOP,
                        f"stopping {p.cell.variant.key} took {took:.1f} s",
                        utcnow(),
                        stack_id=self.setup.stack_ids[p.cell.variant.key],
                    )
                )

    def _replicate_on(self, server: RunningServer, p: CellProgress) -> None:
        """One replicate of a cell on a running server: verify, warm-up and measured
        iterations; raises StackFailure."""
        cell, cell_id, replicate = p.cell, p.cell_id, p.next_rep
        rep_id = self.store.add_replicate(
            Replicate(None, cell_id, replicate, CellStatus.RUNNING, utcnow())
        )
        status = CellStatus.INTERRUPTED
        fail: StackFailure | None = None
        try:
            self._record_start(cell.variant, rep_id, server)
            fail = self._verify(server, cell)
            if fail is None:
                fail, robustness = self._measure.replicate(cell, cell_id, rep_id, replicate, server)
                if robustness is not None:
                    p.robustness = robustness
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
                    gil_enabled=server.gil_enabled(),
                )
        if fail is not None:
            raise fail

    def _verify(self, server: RunningServer, cell: CellPlan) -> StackFailure | None:
        """Check that ``server`` answers ``cell``'s workload correctly (None: it does)."""
        self.events.phase(f"verifying {cell.variant.key} {cell.workload.name}")
        return self.seams.bringup.verify(server, cell, self.config.timeouts.verify_s)

    def _record_start(self, variant: Variant, rep_id: int, server: RunningServer) -> None:
        self.store.update_replicate(
            rep_id, **started_server_columns(server, self.seams.tree_snapshot)
        )
        if variant.key not in self._settings_recorded:
            self._settings_recorded.add(variant.key)
            self.store.update_stack(
                self.setup.stack_ids[variant.key],
                settings_json=json.dumps(server.settings, sort_keys=True, default=str),
            )

    def _progress(self, snap: LoadProgress) -> None:
        """Engine progress callback: must never raise (an exception stops the engine)."""
        try:
            self.events.live_rps(snap.rps)
        except Exception:  # noqa: BLE001 - display only; KeyboardInterrupt stops the engine
            pass
