"""The cell runner: drives provision -> start -> verify -> warm-up -> measure -> stop over a matrix.

Every iteration is committed to the store as soon as it ends. A stack that fails in any phase
is recorded with the phase and reason and the matrix carries on. Ctrl-C stops the engine
within a fraction of a second (it returns a partial result), the partial iteration is kept
flagged ``interrupted``, every server is stopped, and the run is marked interrupted so
``pywebbench run --resume`` can continue it without measuring anything twice.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pywebbench import __version__
from pywebbench.meter import MeterSummary, Sampler, snapshot
from pywebbench.run import loadio
from pywebbench.run.config import StudyConfig
from pywebbench.run.host import facts, split_cpus
from pywebbench.run.matrix import CellPlan, Matrix, Variant
from pywebbench.stats import memory_growth
from pywebbench.store import (
    Cell,
    Failure,
    Iteration,
    Replicate,
    Run,
    StackRow,
    Store,
    new_run_id,
    utcnow,
)


class CellFailed(Exception):
    """A cell cannot go on: ``phase`` and a one-line ``reason`` (``detail``: log tail...)."""

    def __init__(self, phase: str, reason: str, detail: str | None = None) -> None:
        super().__init__(f"{phase}: {reason}")
        self.phase = phase
        self.reason = reason
        self.detail = detail


class Interrupted(Exception):
    """Ctrl-C arrived; the partial state is stored, the run must stop."""


@dataclass
class Events:
    """Callbacks the terminal display hooks into (all optional)."""

    phase: Callable[[str], None] = lambda _msg: None  # "provisioning ...", "starting ..."
    cell_start: Callable[[CellPlan, int], None] = lambda _cell, _iterations: None
    iteration_start: Callable[[CellPlan, str], None] = lambda _c, _kind: None
    iteration_done: Callable[[CellPlan, str, float], None] = lambda _c, _kind, _rps: None
    cell_done: Callable[[CellPlan, str, str | None], None] = lambda _c, _status, _why: None
    live_rps: Callable[[float], None] = lambda _rps: None


@dataclass
class _CellState:
    """Progress of one cell while its group runs."""

    cell: CellPlan
    cell_id: int
    ok: int  # replicates completed (this run and before a --resume)
    next_rep: int  # number of the next replicate
    failure: CellFailed | None = None
    rss: list[list[float]] = field(default_factory=list)


@dataclass
class Outcome:
    """How a study ended."""

    run_id: str
    status: str  # completed | interrupted | failed
    cells_ok: int = 0
    cells_failed: int = 0
    cells_skipped: int = 0  # already done before --resume
    wall_s: float = 0.0
    measured_s: float = 0.0  # sum of the load windows (warm-up + measured)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (what, phase, reason)


_SHIELDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _no_sigint() -> Iterator[None]:
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


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def stack_row(run_id: str, variant: Variant) -> StackRow:
    """The ``stacks`` row of a variant (packages and settings are filled in later)."""
    st = variant.stack
    i = st.interpreter
    return StackRow(
        id=None,
        run_id=run_id,
        key=variant.key,
        name=st.name,
        interpreter=i.name,
        interpreter_impl=i.implementation,
        interpreter_version=i.version,
        interpreter_build=i.build,
        interpreter_path=i.path,
        server=st.server.name,
        interface=st.server.interface,
        framework=st.framework.name,
        workers=variant.workers,
        threads=variant.threads,
        env_key=st.env_key(),
        requirements_json=json.dumps(list(st.requirements)),
    )


def growth_series(rss_by_iteration: list[list[int]]) -> list[float]:
    """RSS points for memory-growth detection over one server process.

    All samples of the replicate's iterations in time order, the first quarter dropped
    (allocation while warming up), then bucketed into at most 8 points (bucket maximum).
    """
    flat = [v for series in rss_by_iteration for v in series]
    flat = flat[len(flat) // 4 :]
    if len(flat) <= 8:
        return [float(v) for v in flat]
    size = len(flat) / 8
    return [float(max(flat[int(k * size) : int((k + 1) * size)] or [0])) for k in range(8)]


def iteration_row(
    result: Any,
    meter: MeterSummary,
    *,
    cell_id: int,
    replicate: int,
    kind: str,
    idx: int,
    started_at: str,
    workers: int = 1,
    server_alive: bool = True,
) -> Iteration:
    """The ``iterations`` row of one load result and the metering of the server meanwhile
    (also used by tools that record studies outside the runner, e.g. report tests)."""
    cols = loadio.columns(result)
    cpu = meter.cpu_s
    mem_end = meter.uss_end_bytes or meter.rss_end_bytes
    return Iteration(
        id=None,
        cell_id=cell_id,
        replicate=replicate,
        kind=kind,
        idx=idx,
        started_at=started_at,
        server_alive=server_alive,
        cpu_user_s=meter.cpu_user_s,
        cpu_sys_s=meter.cpu_sys_s,
        requests_per_cpu_s=(cols["requests"] / cpu) if cpu else None,
        rss_peak_bytes=meter.rss_peak_bytes,
        rss_end_bytes=meter.rss_end_bytes,
        uss_peak_bytes=meter.uss_peak_bytes,
        uss_end_bytes=meter.uss_end_bytes,
        pss_peak_bytes=meter.pss_peak_bytes,
        pss_end_bytes=meter.pss_end_bytes,
        mem_per_worker_bytes=int(mem_end / max(1, workers)) if mem_end else None,
        threads_peak=meter.threads_peak,
        fds_peak=meter.fds_peak,
        processes_peak=meter.processes_peak,
        ctx_voluntary=meter.ctx_voluntary,
        ctx_involuntary=meter.ctx_involuntary,
        result_json=json.dumps(loadio.result_dict(result)),
        **cols,
    )


class StudyRunner:
    """Runs the cells of a :class:`Matrix` into a store, one after the other."""

    def __init__(
        self,
        config: StudyConfig,
        matrix: Matrix,
        store: Store,
        *,
        results_dir: Path,
        agent: loadio.LoadAgent | None = None,
        events: Events | None = None,
        run_id: str | None = None,
    ) -> None:
        self.config = config
        self.matrix = matrix
        self.store = store
        self.results_dir = Path(results_dir)
        self.agent = agent or loadio.local_agent()
        self.events = events or Events()
        self.resume = run_id is not None
        self.run_id = run_id or new_run_id()
        self.server_cpus, self.generator_cpus = split_cpus(
            config.cpus.server, config.cpus.generator
        )
        self.log_dir = self.results_dir / "logs" / self.run_id
        self._stack_ids: dict[str, int] = {}
        self._envs: dict[str, Any] = {}  # variant key -> ProvisionedEnv
        self._provision_failed: dict[str, CellFailed] = {}
        self._settings_recorded: set[str] = set()
        self._services_env: dict[str, str] = {}
        self._services_failed: CellFailed | None = None
        self._robustness: dict[int, dict[str, Any]] = {}  # cell id -> last fault phase
        self.outcome = Outcome(run_id=self.run_id, status="running")
        self._rate = loadio.LiveRate()

    # -- the study -------------------------------------------------------------------------

    def _create_or_reopen_run(self) -> None:
        if self.resume:
            self.store.update_run(self.run_id, status="running", finished_at=None)
            return
        host = facts()
        self.store.create_run(
            Run(
                id=self.run_id,
                created_at=utcnow(),
                finished_at=None,
                status="running",
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
                host_json=json.dumps(host["extra"]),
            )
        )

    def _register(self) -> None:
        """Insert (or find again, on resume) every stack and cell row; mark stale rows."""
        for variant in self.matrix.variants:
            self._stack_ids[variant.key] = self.store.add_stack(stack_row(self.run_id, variant))
        for name, reason in self.matrix.unavailable:
            if not self.resume:
                self.store.add_failure(
                    Failure(None, self.run_id, "provision", f"{name}: {reason}", utcnow())
                )
        for cell in self.matrix.cells:
            self.store.add_cell(self._cell_row(cell))
        if self.resume:  # a crash or Ctrl-C may have left rows "running"
            stacks = {s.id: s for s in self.store.stacks(self.run_id)}
            for cell in self.store.cells(self.run_id):
                if cell.status == "running":
                    self.store.update_cell(cell.id, status="interrupted")
                for rep in self.store.replicates(cell.id):
                    if rep.status == "running":
                        self.store.update_replicate(rep.id, status="interrupted")
                        _reap_orphan(rep, stacks.get(cell.stack_id))

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
            concurrency=cell.concurrency,
            rate=cell.rate,
            load_point=cell.load_point,
            status="pending",
            server_cpus_json=json.dumps(self.server_cpus),
            generator_cpus_json=json.dumps(self.generator_cpus),
        )

    def run(self) -> Outcome:
        """Run the whole study. Returns its :class:`Outcome`; never raises on Ctrl-C."""
        t0 = time.monotonic()
        self._create_or_reopen_run()
        status = "failed"
        try:
            self._register()
            self._provision_all()
            with self._services():
                for group in self._groups():
                    self._run_group(group)
            status = "completed"
        except (KeyboardInterrupt, Interrupted):
            status = "interrupted"
        except BaseException:
            with _no_sigint():
                self.store.add_failure(
                    Failure(
                        None,
                        self.run_id,
                        "interrupted",
                        "pywebbench failed: " + _one_line(str(sys.exc_info()[1])),
                        utcnow(),
                        detail=traceback.format_exc(),
                    )
                )
                self.store.update_run(self.run_id, status="failed", finished_at=utcnow())
            raise
        finally:
            self.outcome.wall_s = time.monotonic() - t0
        with _no_sigint():
            self.store.update_run(self.run_id, status=status, finished_at=utcnow())
        self.outcome.status = status
        return self.outcome

    # -- provisioning and services ---------------------------------------------------------

    def _provision_all(self) -> None:
        from pywebbench.provision import venv as venv_mod

        if hasattr(venv_mod, "UV_TIMEOUT_S"):
            venv_mod.UV_TIMEOUT_S = self.config.timeouts.provision_s
        todo = [v for v in self.matrix.variants if self._needs_work(v)]
        for variant in todo:
            if variant.key in self._envs or variant.key in self._provision_failed:
                continue
            self.events.phase(f"provisioning {variant.stack.name}")
            t0 = time.monotonic()
            try:
                env = venv_mod.provision(variant.stack, progress=self.events.phase)
            except venv_mod.ProvisionError as exc:
                detail = None
                if exc.log_path and Path(exc.log_path).exists():
                    detail = Path(exc.log_path).read_text(errors="replace")[-4000:]
                self._provision_failed[variant.key] = CellFailed(
                    "provision", _one_line(exc.reason), detail
                )
                self.store.update_stack(
                    self._stack_ids[variant.key], provision_s=time.monotonic() - t0
                )
                continue
            self._envs[variant.key] = env
            self.store.update_stack(
                self._stack_ids[variant.key],
                packages_json=json.dumps(dict(env.packages), sort_keys=True),
                provision_s=float(getattr(env, "seconds", time.monotonic() - t0)),
                provision_cached=bool(getattr(env, "cached", False)),
            )

    def _needs_work(self, variant: Variant) -> bool:
        done = self._done_cells()
        return any(c.key not in done for c in self.matrix.cells_of(variant))

    def _done_cells(self) -> set[str]:
        if not hasattr(self, "_done_cache"):
            self._done_cache = {
                c.key for c in self.store.cells(self.run_id) if c.status in ("ok", "failed")
            }
        return self._done_cache

    @contextmanager
    def _services(self) -> Iterator[None]:
        pending = [c for c in self.matrix.cells if c.key not in self._done_cells()]
        needed = sorted({s for c in pending for s in c.workload.services})
        if not needed:
            yield
            return
        from pywebbench.provision.services import start_services

        self.events.phase(f"starting services: {', '.join(needed)}")
        workdir = self.results_dir / "services" / self.run_id
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            cm = start_services(needed, workdir)
            env = cm.__enter__()
        except Exception as exc:  # noqa: BLE001 - recorded, the cells needing it fail
            self._services_failed = CellFailed("services", _one_line(str(exc)))
            yield
            return
        self._services_env = dict(env)
        try:
            yield
        finally:
            with _no_sigint():
                cm.__exit__(None, None, None)

    # -- one cell --------------------------------------------------------------------------

    def _groups(self) -> list[list[CellPlan]]:
        """Cells that share server processes: one cell each (``server_scope = "cell"``), or
        all cells of a stack variant (``"stack"``: one server per replicate serves them)."""
        if self.config.load.server_scope == "cell":
            return [[c] for c in self.matrix.cells]
        groups: dict[str, list[CellPlan]] = {}
        for c in self.matrix.cells:
            groups.setdefault(c.variant.key, []).append(c)
        return list(groups.values())

    def _open_cell(self, cell: CellPlan) -> _CellState:
        cfg = self.config.load
        cell_id = self.store.add_cell(self._cell_row(cell))
        previous = self.store.replicates(cell_id)
        state = _CellState(
            cell=cell,
            cell_id=cell_id,
            ok=sum(1 for r in previous if r.status == "ok"),
            next_rep=max((r.replicate for r in previous), default=-1) + 1,
            failure=self._provision_failed.get(cell.variant.key),
        )
        if state.failure is None and self._services_failed and cell.workload.services:
            state.failure = self._services_failed
        per_rep = cfg.warmup_iterations + cfg.iterations
        self.events.cell_start(cell, (cfg.replicates - state.ok) * per_rep)
        self.store.update_cell(cell_id, status="running", started_at=utcnow())
        return state

    def _run_group(self, cells: list[CellPlan]) -> None:
        """Run the replicates of a group of cells, round by round.

        Each round starts one fresh server process and runs every cell of the group that
        still needs a replicate on it (a server that died is started again for the next cell).
        """
        done = self._done_cells()
        self.outcome.cells_skipped += sum(1 for c in cells if c.key in done)
        states = [self._open_cell(c) for c in cells if c.key not in done]
        replicates = self.config.load.replicates
        try:
            while True:
                active = [st for st in states if st.failure is None and st.ok < replicates]
                if not active:
                    break
                server: Any = None
                try:
                    for st in active:
                        if st.failure is not None:  # the server failed to start this round
                            continue
                        if server is not None and not server.alive():
                            self._stop_server(server, st)
                            server = None
                        try:
                            if server is None:
                                server = self._start_server(st)
                            st.rss.append(self._replicate_on(server, st))
                            st.ok += 1
                        except CellFailed as exc:
                            st.failure = exc
                            if exc.phase == "start":  # same stack: no point starting again
                                for other in active:
                                    if other.failure is None and other.ok < replicates:
                                        other.failure = exc
                        st.next_rep += 1
                finally:
                    if server is not None:
                        self._stop_server(server, active[-1])
        except (KeyboardInterrupt, Interrupted):
            with _no_sigint():
                for st in states:
                    self.store.update_cell(st.cell_id, status="interrupted")
            raise
        for st in states:
            self._finish_cell(st)

    def _finish_cell(self, st: _CellState) -> None:
        cell, cell_id, failure = st.cell, st.cell_id, st.failure
        with _no_sigint():
            flags = self._flags(cell_id, st.rss)
            if failure is not None:
                self.store.update_cell(
                    cell_id,
                    status="failed",
                    failure_phase=failure.phase,
                    failure_reason=failure.reason,
                    finished_at=utcnow(),
                    flags_json=json.dumps(flags),
                )
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
                self.events.cell_done(cell, "failed", f"{failure.phase}: {failure.reason}")
            else:
                self.store.update_cell(
                    cell_id, status="ok", finished_at=utcnow(), flags_json=json.dumps(flags)
                )
                self.outcome.cells_ok += 1
                self.events.cell_done(cell, "ok", None)

    def _flags(self, cell_id: int, rss_series: list[list[float]]) -> dict[str, Any]:
        its = self.store.iterations(cell_id)
        growing = [memory_growth(s) for s in rss_series]
        flags: dict[str, Any] = {
            "memory_growth": any(g.growing for g in growing),
            "generator_bound": any(i.generator_bound for i in its if i.kind == "measured"),
            "errors": any(i.errors > 0 for i in its if i.kind == "measured"),
        }
        if cell_id in self._robustness:
            flags["robustness"] = self._robustness.pop(cell_id)
        if flags["memory_growth"]:
            worst = max(growing, key=lambda g: g.relative)
            flags["memory_growth_relative"] = round(worst.relative, 3)
            flags["memory_growth_last_bytes"] = int(worst.last)
        return flags

    def _start_server(self, st: _CellState) -> Any:
        """A fresh server for ``st``'s stack; a failure is recorded on ``st``'s replicate."""
        from pywebbench.launch import LaunchError, start_server

        cell = st.cell
        variant = cell.variant
        self.events.phase(f"starting {variant.key} (replicate {st.ok + 1})")
        request = cell.request
        fw = variant.stack.framework
        try:
            return start_server(
                variant.stack,
                self._envs[variant.key],
                cpus=self.server_cpus,
                workers=variant.workers,
                threads=variant.threads,
                app_env=self._services_env,
                app_dir=getattr(fw, "app_dir", None),
                log_dir=self.log_dir,
                ready_path=request.path if request.method == "GET" else "/",
                start_timeout_s=self.config.timeouts.start_s,
            )
        except LaunchError as exc:
            with _no_sigint():
                self.store.add_replicate(
                    Replicate(
                        None,
                        st.cell_id,
                        st.next_rep,
                        "failed",
                        utcnow(),
                        failure_phase="start",
                        failure_reason=_one_line(exc.reason),
                        finished_at=utcnow(),
                        log_path=str(exc.log_path) if exc.log_path else None,
                    )
                )
            raise CellFailed("start", _one_line(exc.reason), exc.log_tail) from None

    def _stop_server(self, server: Any, st: _CellState) -> None:
        """Stop the server's process group (shielded from Ctrl-C); a slow stop is recorded."""
        with _no_sigint():
            t0 = time.monotonic()
            server.stop()
            took = time.monotonic() - t0
            if took > self.config.timeouts.stop_s:
                self.store.add_failure(
                    Failure(
                        None,
                        self.run_id,
                        "stop",
                        f"stopping {st.cell.variant.key} took {took:.1f} s",
                        utcnow(),
                        stack_id=self._stack_ids[st.cell.variant.key],
                    )
                )

    def _replicate_on(self, server: Any, st: _CellState) -> list[float]:
        """One replicate of a cell on a running server: verify, warm-up and measured
        iterations. Returns the RSS series for memory-growth detection; raises CellFailed."""
        cell, cell_id, replicate = st.cell, st.cell_id, st.next_rep
        rep_id = self.store.add_replicate(Replicate(None, cell_id, replicate, "running", utcnow()))
        status = "interrupted"
        fail: CellFailed | None = None
        rss: list[list[float]] = []
        try:
            self._record_start(cell.variant, rep_id, server)
            fail = self._verify(cell, server)
            if fail is None:
                fail = self._iterations(cell, cell_id, replicate, server, rss)
            status = "failed" if fail else "ok"
        except CellFailed as exc:
            fail, status = exc, "failed"
        finally:
            with _no_sigint():
                self.store.update_replicate(
                    rep_id,
                    status=status,
                    finished_at=utcnow(),
                    failure_phase=fail.phase if fail else None,
                    failure_reason=fail.reason if fail else None,
                )
        if fail is not None:
            raise fail
        return growth_series(rss)  # type: ignore[arg-type]

    def _record_start(self, variant: Variant, rep_id: int, server: Any) -> None:
        idle = snapshot(server.pid)  # the server answered: booted, no load yet
        self.store.update_replicate(
            rep_id,
            pid=server.pid,
            cold_start_s=server.cold_start_s,
            idle_rss_bytes=idle.rss_bytes,
            idle_uss_bytes=idle.uss_bytes,
            idle_pss_bytes=idle.pss_bytes,
            processes=idle.processes,
            log_path=str(server.log_path),
        )
        if variant.key not in self._settings_recorded:
            self._settings_recorded.add(variant.key)
            self.store.update_stack(
                self._stack_ids[variant.key],
                settings_json=json.dumps(server.settings, sort_keys=True, default=str),
            )

    def _verify(self, cell: CellPlan, server: Any) -> CellFailed | None:
        self.events.phase(f"verifying {cell.variant.key} {cell.workload.name}")
        try:
            if hasattr(cell.workload, "expect_status"):  # a path of the user's app
                from pywebbench.verify.user_app import check_path

                report = check_path(
                    server.base_url, cell.workload, timeout_s=self.config.timeouts.verify_s
                )
            else:
                from pywebbench.verify import verify

                report = verify(server.base_url, cell.workload, **cell.params)
        except Exception as exc:  # noqa: BLE001 - a verification crash is a verify failure
            return CellFailed("verify", _one_line(f"verification raised {exc!r}"))
        if not report.ok:
            detail = "\n".join(report.problems)
            return CellFailed("verify", _one_line("; ".join(report.problems)), detail)
        return None

    def _iterations(
        self, cell: CellPlan, cell_id: int, replicate: int, server: Any, rss: list[list[float]]
    ) -> CellFailed | None:
        cfg = self.config.load
        plan = [("warmup", i, cfg.warmup_duration_s) for i in range(cfg.warmup_iterations)]
        plan += [("measured", i, cfg.duration_s) for i in range(cfg.iterations)]
        for kind, idx, duration in plan:
            if cfg.pause_s:
                time.sleep(cfg.pause_s)
            spec = loadio.build_spec(
                server.base_url,
                cell.request,
                connections=cell.concurrency,
                duration_s=duration,
                timeout_s=cfg.timeout_s,
                cpus=self.generator_cpus,
                rate=cell.rate,
            )
            started = utcnow()
            self._rate = loadio.LiveRate()
            self.events.iteration_start(cell, kind)
            sampler = Sampler(server.pid).start()
            interrupted = False
            try:
                result = self.agent.run(spec, progress=self._progress)
            except KeyboardInterrupt:
                with _no_sigint():
                    sampler.stop()
                raise
            meter = sampler.stop()
            with _no_sigint():
                cols = loadio.columns(result)
                interrupted = cols["interrupted"]
                alive = server.alive() and meter.alive_at_end
                it = iteration_row(
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
                self.store.add_iteration(it, meter.samples)
                self.outcome.measured_s += float(cols["duration_s"] or 0.0)
                rss.append([float(s.rss_bytes) for s in meter.samples])
            if interrupted:
                raise Interrupted()
            self.events.iteration_done(cell, kind, float(cols["rps"]))
            if not alive:
                code = server.group.poll() if hasattr(server, "group") else None
                how = f" (exit status {code})" if code is not None else ""
                return CellFailed(
                    "warmup" if kind == "warmup" else "measure",
                    f"server process exited during load{how}",
                    _log_tail(server),
                )
            stalled = loadio.stalled_tail_s(result)
            if cols["requests"] == 0 or stalled >= max(1.0, 0.3 * duration):
                if cols["requests"]:
                    return CellFailed(
                        "warmup" if kind == "warmup" else "measure",
                        f"server stopped responding: no response in the last {stalled:g} s "
                        f"of the {duration:g} s iteration ({cols['timeouts']} timeouts)",
                        _log_tail(server),
                    )
                what = "no responses"
                if cols["timeouts"] or cols["errors"]:
                    what += f" ({cols['errors']} errors, {cols['timeouts']} timeouts)"
                return CellFailed(
                    "warmup" if kind == "warmup" else "measure",
                    f"{what} within {duration:g} s: the server hangs or refuses connections",
                    _log_tail(server),
                )
        if cfg.faults and cfg.iterations:
            self._robustness[cell_id] = self._fault_phase(cell, server, result)
        return None

    def _fault_phase(self, cell: CellPlan, server: Any, clean_result: Any) -> dict[str, Any]:
        """The last measured iteration again, under the fault mix (docs/faults.md)."""
        from pywebbench.faults import measure_of, measure_robustness, parse_mix

        cfg = self.config.load
        assert cfg.faults is not None
        self.events.phase(f"faults {cell.variant.key}: {cfg.faults}")
        spec = loadio.build_spec(
            server.base_url,
            cell.request,
            connections=cell.concurrency,
            duration_s=cfg.duration_s,
            timeout_s=cfg.timeout_s,
            cpus=self.generator_cpus,
            rate=cell.rate,
        )
        run = measure_robustness(
            server.base_url.rstrip("/") + cell.request.path,
            parse_mix(cfg.faults),
            lambda: self.agent.run(spec, progress=self._progress),
            alive=server.alive,
            clean_result=clean_result,
        )
        return {
            "mix": cfg.faults,
            **run.robustness.to_dict(),
            "clean_rps": measure_of(run.clean).rps,
            "faulted_rps": measure_of(run.faulted).rps,
            "recovery_s": run.recovery_s,
            "report": run.report.to_dict(),
        }

    def _progress(self, snap: Any) -> None:
        """Engine progress callback: must never raise (an exception stops the engine)."""
        try:
            rps = self._rate.update(snap)
            if rps is not None:
                self.events.live_rps(rps)
        except Exception:  # noqa: BLE001 - display only; KeyboardInterrupt stops the engine
            pass


def _reap_orphan(rep: Replicate, stack: StackRow | None) -> None:
    """Stop the server of a replicate left "running" by a pywebbench that was killed.

    Only a process that is still the one recorded: same pid, started before the replicate
    row, leading its own process group, and running from the stack's virtualenv.
    """
    import os

    import psutil

    if not rep.pid or stack is None or not stack.env_key:
        return
    try:
        proc = psutil.Process(rep.pid)
        started = datetime.fromisoformat(rep.started_at).timestamp()
        if proc.create_time() > started + 1 or os.getpgid(rep.pid) != rep.pid:
            return
        if not any(stack.env_key in part for part in proc.cmdline() + [proc.exe()]):
            return
        os.killpg(rep.pid, signal.SIGKILL)
    except (psutil.Error, OSError, ValueError):
        return


def _log_tail(server: Any, limit: int = 4000) -> str | None:
    try:
        return Path(server.log_path).read_text(errors="replace")[-limit:]
    except (OSError, TypeError):
        return None


def run_study(
    config: StudyConfig,
    matrix: Matrix,
    store: Store,
    *,
    results_dir: Path,
    agent: loadio.LoadAgent | None = None,
    events: Events | None = None,
    run_id: str | None = None,
) -> Outcome:
    """Run (or, with ``run_id``, resume) a study; see :class:`StudyRunner`."""
    runner = StudyRunner(
        config, matrix, store, results_dir=results_dir, agent=agent, events=events, run_id=run_id
    )
    return runner.run()
