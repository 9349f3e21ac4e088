"""Row mapping: what the runner stores for a stack variant, for one load iteration and for a
finished cell's flags."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pywebbench import __version__
from pywebbench.analysis.modes import modes, replicate_figures
from pywebbench.analysis.warmup_class import cell_class, unsettled
from pywebbench.load import iteration_figures
from pywebbench.load.result import LoadResult
from pywebbench.load.sliced import SliceStats
from pywebbench.meter import MeterSummary, snapshot
from pywebbench.meter.core_speed import SpeedScaling, speed_scaling
from pywebbench.meter.sampler import TreeSnapshot
from pywebbench.run.host import facts
from pywebbench.store import (
    Cell,
    CellFlags,
    CellStatus,
    Iteration,
    IterationKind,
    Replicate,
    Run,
    RunStatus,
    StackRow,
    utcnow,
)
from pywebbench.study.matrix import CellPlan, Variant

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer


def run_row(
    run_id: str,
    *,
    profile: str | None,
    config_json: str,
    server_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    extra: Mapping[str, Any] = {},
) -> Run:
    """The ``runs`` row of a run starting now on this host (``extra``: more host facts)."""
    host = facts()
    return Run(
        id=run_id,
        created_at=utcnow(),
        finished_at=None,
        status=RunStatus.RUNNING,
        profile=profile,
        hostname=host["hostname"],
        cpu_model=host["cpu_model"],
        cpu_count=host["cpu_count"],
        kernel=host["kernel"],
        governor=host["governor"],
        memory_bytes=host["memory_bytes"],
        os=host["os"],
        pywebbench_version=__version__,
        orchestrator_python=sys.version.split()[0],
        server_cpus_json=json.dumps(list(server_cpus)),
        generator_cpus_json=json.dumps(list(generator_cpus)),
        config_json=config_json,
        host_json=json.dumps({**host["extra"], **extra}),
    )


def cell_row(
    run_id: str,
    stack_id: int,
    cell: CellPlan,
    server_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    *,
    key: str | None = None,
    status: str = CellStatus.PENDING,
) -> Cell:
    """The ``cells`` row of a planned cell (``key``: another key than the plan's)."""
    return Cell(
        id=None,
        run_id=run_id,
        stack_id=stack_id,
        key=key or cell.key,
        ordinal=cell.ordinal,
        workload=cell.workload.name,
        workload_params_json=json.dumps(cell.params, sort_keys=True),
        load_model=cell.load_model,
        connections=cell.connections,
        rate=cell.rate,
        load_point=cell.load_point,
        connection_mode=cell.connection_mode,
        bind=cell.bind,
        protocol=cell.protocol,
        status=status,
        server_cpus_json=json.dumps(list(server_cpus)),
        generator_cpus_json=json.dumps(list(generator_cpus)),
    )


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
        interpreter_free_threaded=i.free_threaded,
        interpreter_jit=i.jit,
        interpreter_optimizations=i.optimizations,
        interpreter_gil=i.gil,
        server=st.server.name,
        interface=st.server.interface,
        framework=st.framework.name,
        workers=variant.workers,
        threads=variant.threads,
        worker_max_requests=variant.max_requests,
        env_key=st.env_key(),
        requirements_json=json.dumps(list(st.requirements)),
    )


def iteration_row(
    result: LoadResult,
    meter: MeterSummary,
    *,
    cell_id: int,
    replicate: int,
    kind: IterationKind | str,
    idx: int,
    started_at: str,
    workers: int = 1,
    server_alive: bool = True,
) -> Iteration:
    """The ``iterations`` row of one load result and the metering of the server meanwhile
    (also used by tools that record studies outside the runner, e.g. report tests)."""
    cols = iteration_figures(result)
    cpu = meter.cpu_s
    mem_end = meter.uss_end_bytes or meter.rss_end_bytes
    return Iteration(
        id=None,
        cell_id=cell_id,
        replicate=replicate,
        kind=str(kind),
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
        processes_seen=meter.processes_seen,
        result_json=result.to_json(),
        **cols,
    )


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="milliseconds")


def slice_iteration(
    s: SliceStats,
    cell_id: int,
    dropped: str | None,
    core_rate: float | None = None,
    process: int = 0,
    kind: IterationKind = IterationKind.MEASURED,
    memory: tuple[int | None, int | None] = (None, None),
) -> Iteration:
    """The ``iterations`` row of one slice (``replicate``: the side's server process that
    served it; ``idx``: its round; ``rps`` as measured, with the core's rate over it when
    probed; ``kind``: an interleaved group's slices before the process was warm are warm-up;
    ``memory``: the server tree's (peak, last) RSS sampled during the slice, when sampled)."""
    summary = s.latency.summary if s.latency is not None else None
    return Iteration(
        id=None,
        cell_id=cell_id,
        replicate=process,
        kind=kind,
        idx=s.round,
        started_at=_iso(s.started_at),
        duration_s=s.duration_s,
        requests=s.requests,
        errors=s.errors,
        non_2xx=0,
        timeouts=s.timeouts,
        rps=s.rps,
        latency_mean_us=summary.mean if summary else None,
        latency_p50_us=float(s.p50_us),
        latency_p90_us=float(summary.p90) if summary else None,
        latency_p99_us=float(s.p99_us),
        latency_p999_us=float(summary.p999) if summary else None,
        latency_max_us=float(summary.max) if summary else None,
        result_json=json.dumps({"ab_slice": s.model_dump(mode="json"), "dropped": dropped}),
        core_rate=core_rate,
        generator_bound=s.generator_bound,
        rss_peak_bytes=memory[0],
        rss_end_bytes=memory[1],
    )


def replicate_rps(
    replicates: list[Replicate], iterations: list[Iteration], speed: SpeedScaling | None = None
) -> list[list[float]]:
    """Each ok replicate's measured req/s, one list per replicate (the unit of a cell's CI:
    :func:`pywebbench.analysis.stats.summarize_replicates`), at one core speed: ``speed`` (the
    cell's group's, :func:`pywebbench.meter.core_speed.speed_scaling`), else the cell's own
    (docs/interference.md#core-speed)."""
    ok = {r.replicate for r in replicates if r.status == CellStatus.OK}
    used = [
        it
        for it in iterations
        if it.kind == IterationKind.MEASURED and it.replicate in ok and not it.interrupted
    ]
    if speed is None:
        speed = speed_scaling([(("", ""), used)])
    by_rep: dict[int, list[float]] = {}
    for it, rps in zip(used, speed.rps(used), strict=True):
        by_rep.setdefault(it.replicate, []).append(rps)
    return list(by_rep.values())


#: An interleaved group's stack is generator-bound when more than this share of its measured
#: slices were (the engine's verdict per slice, ``generator_limited``: its threads busy 90% of
#: the slice, or waiting for a CPU 5% of it while busy or waiting half of it). One slice in
#: fifty hit by a burst says nothing of the stack.
GENERATOR_BOUND_SHARE = 0.5


def slices_generator_bound(iterations: list[Iteration]) -> bool:
    """An interleaved group's cell (its iterations are slices): more than
    :data:`GENERATOR_BOUND_SHARE` of its measured slices were generator-bound."""
    measured = [i for i in iterations if i.kind == IterationKind.MEASURED]
    bound = sum(1 for i in measured if i.generator_bound)
    return bool(measured) and bound > GENERATOR_BOUND_SHARE * len(measured)


def cell_flags(
    replicates: list[Replicate], iterations: list[Iteration], speed: SpeedScaling | None = None
) -> CellFlags:
    """A finished cell's flags (``cells.flags_json``) from its replicates and iterations
    (``speed``: as in :func:`replicate_rps`)."""
    measured = [i for i in iterations if i.kind == IterationKind.MEASURED]
    reps = [r for r in replicates if r.status == CellStatus.OK]
    leaks = [r.leak for r in reps if r.leak]
    flags: CellFlags = {
        "generator_bound": any(i.generator_bound for i in measured),
        "errors": any(i.errors > 0 for i in measured),
        # steady state (docs/steady-state.md): a warm-up that hit its cap and, judged with
        # its measured iterations, had not settled; a trend across the measured iterations;
        # memory that kept growing with requests once steady
        "not_steady": any(unsettled(r.warmup_end, r.warmup_class) for r in reps),
        "drift": any(r.drift.get("drifting") for r in reps),
        "leak": bool(leaks) and all(x.get("leaking") for x in leaks),
        # the interference guard (docs/interference.md): an iteration other processes still
        # disturbed after its re-measures, and how many were measured again
        "interfered": any(i.interfered for i in measured),
        "remeasured": sum(len(i.remeasured) for i in measured),
    }
    # processes of an interleaved group stopped at their memory budget (failed, so not
    # among ``reps``): a leak when one had passed its collector's floor or has none, else
    # the machine's share of memory among the group's processes (run/interleaved.py)
    stopped = [r.leak for r in replicates if r.leak.get("stopped")]
    if any(x.get("leaking") for x in stopped):
        flags["leak"] = True
    elif stopped:
        flags["uncollected"] = True
        flags["over_share"] = len(stopped)
    if any(x.get("uncollected") for x in leaks):
        # growth that stayed below PyPy's collection floor: no major collection yet, so no
        # evidence of a leak (meter/pypy_gc.py); set only when true, as leak_json sets it
        flags["uncollected"] = True
    if leaks:
        slopes = sorted(float(x["bytes_per_1k"]) for x in leaks)
        flags["leak_bytes_per_1k"] = slopes[len(slopes) // 2]
    # Barrett's classes per replicate, and whether the replicates settled at one level
    classes = [r.warmup_class for r in reps if r.warmup_class]
    if classes:
        flags["classes"] = {c: classes.count(c) for c in sorted(set(classes))}
        flags["classification"] = cell_class(classes)
    consistency = modes(replicate_figures(replicate_rps(replicates, iterations, speed)))
    flags["inconsistent"] = not consistency.consistent
    if not consistency.consistent:
        flags["modes"] = consistency.to_list()
    return flags


def started_server_columns(
    server: RunningServer, read_tree: Callable[[int], TreeSnapshot] = snapshot
) -> dict[str, Any]:
    """A replicate's columns once its server answered: booted, no load yet (idle memory, its
    process tree read by ``read_tree``)."""
    idle = read_tree(server.pid)
    return {
        "pid": server.pid,
        "cold_start_s": server.cold_start_s,
        "idle_rss_bytes": idle.rss_bytes,
        "idle_uss_bytes": idle.uss_bytes,
        "idle_pss_bytes": idle.pss_bytes,
        "processes": idle.processes,
        "log_path": str(server.log_path),
    }
