"""Build the report's view model from a stored study.

Aggregation rules (also in docs/report.md):

- A *point* is one stack x workload x load point. Cells of several runs with the same stack
  key, workload and load point are pooled (their replicates add up).
- Throughput: median of the replicates' figures (each the median requests/s of its measured,
  non-interrupted iterations), with a 95% CI over those figures
  (:func:`pywebbench.analysis.stats.summarize_replicates`: Student's t below 10 replicates).
- Latency: quantiles of the merged HdrHistogram of those iterations (the engine's own
  histogram code: ``_engine.hist_merge`` / ``hist_quantiles``).
- Peak memory: the highest RSS of the server's process tree over all iterations (warm-up too).
- Requests per CPU-second: measured requests / server CPU seconds (user + system).
- Error rate: (transport errors + non-2xx responses) / (responses + transport errors).
- A ranking at "peak" takes each stack at its load point with the highest median requests/s.
- Ties: a stack is tied with the one ranked above it when the 95% CI of the ratio of their
  medians (:mod:`pywebbench.analysis.ratio`, via :mod:`pywebbench.analysis.ties`) contains 1.
- Memory and warm-up curves: :mod:`pywebbench.report.warmup`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from pywebbench import __version__
from pywebbench import formatting as fmt
from pywebbench.analysis import stats
from pywebbench.analysis.ratio import ratio
from pywebbench.analysis.ties import group_estimate, ranked_gaps
from pywebbench.catalogue.base import interpreter_kind
from pywebbench.faults.outcome import CellRobustness
from pywebbench.meter.core_speed import speed_note, study_scaling
from pywebbench.meter.sampler import Sample
from pywebbench.report import figures
from pywebbench.report.ab import ab_rows
from pywebbench.report.axes import build_axes
from pywebbench.report.endpoints import mix_points
from pywebbench.report.flame import flame_points
from pywebbench.report.history import run_history
from pywebbench.report.knee import knee_views
from pywebbench.report.nodes import nodes_view
from pywebbench.report.pooled import pooled_view, published_lines
from pywebbench.report.series import iteration_histogram, per_second_rps
from pywebbench.report.view import (
    CellSeriesView,
    Estimate,
    FailureView,
    FindingView,
    IterationSeries,
    PointView,
    Ranking,
    RankingRow,
    ReportView,
    RobustnessView,
    RunView,
    StackView,
    WorkloadView,
)
from pywebbench.report.warmup import memory_view, warmup_curve
from pywebbench.store.model import Cell, Iteration, Replicate, Run, StackRow, Study

MIB = 1024 * 1024


def stack_label(row: StackRow) -> str:
    """What people read for a stack: "cpython3.11 · gunicorn-sync · flask" (+ "· 2w×4t")."""
    label = f"{row.interpreter} · {row.server} · {row.framework}"
    if (row.workers, row.threads) != (1, 1):
        label += f" · {row.workers}w×{row.threads}t"
    if row.worker_max_requests:
        label += f" · max-requests {row.worker_max_requests}"
    return label


def gil_runtime(states: Sequence[bool | None]) -> str:
    """The GIL as a stack's replicates reported it: ``on``, ``off``, ``on in 1 of 3
    replicates``; ``""`` when none reported."""
    known = [s for s in states if s is not None]
    if not known:
        return ""
    on = sum(known)
    if on in (0, len(known)):
        return "on" if on else "off"
    return f"on in {on} of {len(known)} replicates"


def _stack_view(row: StackRow) -> StackView:
    return StackView(
        key=row.key,
        label=stack_label(row),
        interpreter=row.interpreter,
        interpreter_version=row.interpreter_version,
        interpreter_build=row.interpreter_build,
        server=row.server,
        interface=row.interface,
        framework=row.framework,
        workers=row.workers,
        threads=row.threads,
        worker_max_requests=row.worker_max_requests,
        interpreter_kind=interpreter_kind(
            row.interpreter_impl,
            row.interpreter_free_threaded,
            row.interpreter_gil,
            row.interpreter_jit,
            row.interpreter_optimizations,
        ),
        packages=row.packages,
        settings=row.settings,
        run_ids=[row.run_id],
    )


def _when(iso: str) -> str:
    """``2026-11-21T15:30:12.345+00:00`` as ``2026-11-21 15:30:12 UTC``."""
    return iso[:19].replace("T", " ") + " UTC" if len(iso) >= 19 else iso


def _run_view(run: Run, speed: str) -> RunView:
    host: list[tuple[str, str]] = [
        ("CPU", f"{run.cpu_model} ({run.cpu_count} cores)"),
        ("host", run.hostname),
        ("memory", fmt.size(run.memory_bytes) if run.memory_bytes else fmt.MISSING),
        ("kernel", run.kernel),
        ("OS", run.os),
        ("CPU governor", run.governor or "not exposed"),
        ("server cores", ", ".join(map(str, run.server_cpus)) or "–"),
        ("generator cores", ", ".join(map(str, run.generator_cpus)) or "–"),
        ("pywebbench", run.pywebbench_version),
        ("orchestrator Python", run.orchestrator_python),
        ("core speed", speed),
    ]
    for k, v in sorted(run.host.items()):
        host.append((str(k), v if isinstance(v, str) else str(v)))
    return RunView(
        steady=steady_manifest(run.config),
        id=run.id,
        created_at=_when(run.created_at),
        finished_at=_when(run.finished_at) if run.finished_at else None,
        status=run.status,
        profile=run.profile,
        host=host,
        config=run.config,
    )


def steady_manifest(config: dict[str, Any]) -> list[tuple[str, str]]:
    """The steady-state method of a run and its settings, from its stored configuration."""
    from pywebbench.analysis.warmup import SteadyRule

    load = config.get("load")
    if not isinstance(load, dict) or "warmup" not in load:
        return []
    if load["warmup"] == "fixed":
        return [
            ("warm-up", "fixed"),
            ("warmup_iterations", str(load.get("warmup_iterations", "–"))),
            ("warmup_duration_s", str(load.get("warmup_duration_s", "–"))),
        ]
    rule = SteadyRule()
    out = [("warm-up", "steady (until steady, or the cap)")]
    keys = ["warmup_cap_s", "jit_warmup_cap_s", "steady_window_s", "jit_min_requests"]
    if load["warmup"] == "deep":  # Barrett's method: one long series, never stopped early
        out = [("warm-up", "deep (the whole series, then classified)")]
        keys[:2] = ["deep_s"]
    for key in keys:
        label = f"{key} (JIT interpreters)" if key.startswith("jit_") else key
        out.append((label, str(load.get(key, "–"))))
    for key, value in rule.describe().items():
        if key in ("cap_s", "window_s", "min_requests"):
            continue  # the run's own settings above
        out.append((f"rule {key}", str(value)))
    return out


class _Index:
    """Rows of a study grouped by parent id (the Study helpers scan every row per call)."""

    def __init__(self, study: Study) -> None:
        self.iterations: dict[int, list[Iteration]] = defaultdict(list)
        self.samples: dict[int, list[Sample]] = defaultdict(list)
        self.replicates: dict[int, list[Replicate]] = defaultdict(list)
        for it in study.iterations:
            self.iterations[it.cell_id].append(it)
        # req/s are judged at the study's median core speed (docs/interference.md#core-speed)
        self.speed = study_scaling(study)
        for its in self.iterations.values():
            its.sort(key=lambda i: (i.replicate, i.kind != "warmup", i.idx))
        for smp in study.samples:
            self.samples[smp.iteration_id].append(smp)
        for smps in self.samples.values():
            smps.sort(key=lambda s: s.t_s)
        for rep in study.replicates:
            self.replicates[rep.cell_id].append(rep)

    def iterations_of(self, cell_id: int | None) -> list[Iteration]:
        return self.iterations.get(cell_id, []) if cell_id is not None else []

    def samples_of(self, iteration_id: int | None) -> list[Sample]:
        return self.samples.get(iteration_id, []) if iteration_id is not None else []


def _median(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return stats.median(vals) if vals else None


def _robustness_view(rob: CellRobustness) -> RobustnessView:
    """The stored fault phase of a cell (``flags.robustness``, written by the runner)."""
    findings = [
        FindingView(
            kind=f.kind,
            what=f.what,
            count=f.count,
            status=f.status,
            request=f.request,
            response=f.response,
        )
        for f in rob.fault_report.findings
    ]
    return RobustnessView(
        mix=rob.mix,
        score=rob.score,
        retained_pct=rob.retained_pct,
        clean_rps=rob.clean_rps,
        faulted_rps=rob.faulted_rps,
        p99_clean_ms=rob.p99_clean_ms,
        p99_faulted_ms=rob.p99_faulted_ms,
        good_errors=rob.good_errors,
        good_error_rate=rob.good_error_rate,
        survived=rob.survived,
        answered_after=rob.answered_after,
        recovery_s=rob.recovery_s,
        malformed=dict(rob.malformed),
        malformed_accepted=list(rob.malformed_accepted),
        findings=findings,
        interfered=rob.interfered,
    )


def _point(
    index: _Index,
    stack_key: str,
    cells: list[Cell],
    failures_by_cell: dict[int, list[FailureView]],
) -> PointView:
    first = cells[0]
    point = PointView(
        stack_key=stack_key,
        workload=first.workload,
        load_point=first.load_point,
        load_model=first.load_model,
        connections=first.connections,
        rate=first.rate,
    )
    measured: list[Iteration] = []
    every: list[Iteration] = []
    reps: list[Replicate] = []
    its_by_rep: list[list[Iteration]] = []
    for cell in cells:
        assert cell.id is not None
        its = [i for i in index.iterations_of(cell.id) if not i.interrupted]
        every += its
        measured += [i for i in its if i.kind == "measured"]
        by_rep: dict[int, list[Iteration]] = defaultdict(list)
        for it in its:
            by_rep[it.replicate].append(it)
        rows = {r.replicate: r for r in index.replicates.get(cell.id, [])}
        for rep in sorted(by_rep):
            seq = by_rep[rep]  # already ordered: warm-up by idx, then measured by idx
            row = rows.get(rep)
            judged = "classification" in cell.flags  # written since caps are judged again
            point.warmups.append(warmup_curve(len(point.warmups), row, seq, cap_judged=judged))
            if row is not None:
                reps.append(row)
                its_by_rep.append(seq)
            rps = index.speed.rps([i for i in seq if i.kind == "measured"])
            if rps:
                point.rps_by_replicate.append(rps)
        flags = cell.flags
        point.generator_bound |= bool(flags.get("generator_bound"))
        point.not_steady |= bool(flags.get("not_steady"))
        point.drift |= bool(flags.get("drift"))
        point.leak |= bool(flags.get("leak"))
        point.interfered |= bool(flags.get("interfered"))
        per_cell = flags.get("per_cell")
        if isinstance(per_cell, str) and per_cell:
            point.per_cell = per_cell
        remeasured = flags.get("remeasured")
        if isinstance(remeasured, int) and not isinstance(remeasured, bool):
            point.remeasured += remeasured
        slope = flags.get("leak_bytes_per_1k")
        if isinstance(slope, int | float) and not isinstance(slope, bool):
            point.leak_kb_per_1k = max(point.leak_kb_per_1k or 0.0, slope / 1024)
        stored = flags.get("robustness")
        rob = CellRobustness.from_flag(stored)  # the runner's fault phase (docs/faults.md)
        if rob is not None:
            point.robustness_detail = _robustness_view(rob)
            point.robustness_curve = rob.curve
            point.robustness = rob.score
        elif isinstance(stored, int | float) and not isinstance(stored, bool):
            point.robustness = float(stored)  # the earliest stores kept the score alone
    point.memory = memory_view(reps, its_by_rep)
    all_reps = [r for c in cells for r in index.replicates.get(c.id or -1, [])]
    point.cold_start_s = _median([r.cold_start_s for r in all_reps if r.cold_start_s is not None])
    idle = _median([r.idle_rss_bytes for r in all_reps if r.idle_rss_bytes is not None])
    point.idle_rss_mib = idle / MIB if idle is not None else None
    peaks = [i.rss_peak_bytes for i in every if i.rss_peak_bytes]
    point.peak_rss_mib = max(peaks) / MIB if peaks else None

    if not measured:
        for cell in cells:
            fails = failures_by_cell.get(cell.id or -1, [])
            if fails:
                point.failure = fails[-1]
                break
            if cell.failure_phase:
                point.failure = FailureView(
                    phase=cell.failure_phase,
                    reason=cell.failure_reason or "",
                    at=cell.finished_at or "",
                    run_id=cell.run_id,
                    stack_key=stack_key,
                    workload=cell.workload,
                    load_point=cell.load_point,
                )
                break
        if point.failure is None:
            status = ", ".join(sorted({c.status for c in cells}))
            point.failure = FailureView(
                phase="measure",
                reason=f"no measured iteration stored (cell {status})",
                at="",
                run_id=first.run_id,
                stack_key=stack_key,
                workload=first.workload,
                load_point=first.load_point,
            )
        return point

    grouped = group_estimate(first.flags)
    if grouped is not None:  # an interleaved group: its fit over slices of the same rounds
        point.rps = Estimate(*grouped)
        point.group = dict(first.flags.get("group") or {})
    else:
        summary = stats.summarize_replicates(point.rps_by_replicate)
        point.rps = Estimate(summary.median, summary.ci_low, summary.ci_high, summary.n)
    point.replicates = len({(i.cell_id, i.replicate) for i in measured})
    if grouped is None:  # a group's verdict is its stored flag, over its slices (run/rows.py)
        point.generator_bound |= any(i.generator_bound for i in measured)
    point.requests = sum(i.requests for i in measured)
    errors = sum(i.errors + i.non_2xx for i in measured)
    attempts = point.requests + sum(i.errors for i in measured)
    point.error_rate = errors / attempts if attempts else None
    cpu = [(i.requests, i.cpu_s) for i in measured if i.cpu_s is not None]
    cpu_s = sum(c for _, c in cpu)
    if cpu and cpu_s > 0:
        point.rps_per_cpu_s = sum(r for r, _ in cpu) / cpu_s
    else:  # slices of an interleaved group: each its own tree's CPU over the slice
        per = [(i.requests, i.requests_per_cpu_s) for i in measured if i.requests_per_cpu_s]
        spent = sum(r / rate for r, rate in per if rate)
        if per and spent > 0:
            point.rps_per_cpu_s = sum(r for r, _ in per) / spent

    hists = [h for h in (iteration_histogram(i) for i in measured) if h]
    if hists:
        from pywebbench import _engine

        merged = _engine.hist_merge(hists) if len(hists) > 1 else hists[0]
        qs = [0.5, 0.9, 0.99, 0.999]
        spectrum_q = figures.SPECTRUM_QUANTILES
        values = _engine.hist_quantiles(merged, qs + spectrum_q)
        ms = [v / 1000.0 for v in values]
        point.p50_ms, point.p90_ms, point.p99_ms, point.p999_ms = ms[:4]
        point.spectrum = list(zip(spectrum_q, ms[4:], strict=True))
    else:
        # No stored histogram (e.g. an external result): the per-iteration summaries' median.
        def med_ms(attr: str) -> float | None:
            v = _median([getattr(i, attr) for i in measured if getattr(i, attr) is not None])
            return v / 1000.0 if v is not None else None

        point.p50_ms = med_ms("latency_p50_us")
        point.p90_ms = med_ms("latency_p90_us")
        point.p99_ms = med_ms("latency_p99_us")
        point.p999_ms = med_ms("latency_p999_us")
    return point


def _rank(workload: str, selection: str, points: list[tuple[StackView, PointView]]) -> Ranking:
    ok = sorted(
        ((s, p) for s, p in points if p.rps is not None),
        key=lambda sp: (-sp[1].rps.median, sp[0].label),  # type: ignore[union-attr]
    )
    failed = sorted(((s, p) for s, p in points if p.rps is None), key=lambda sp: sp[0].label)
    ranking = Ranking(workload, selection)
    if ok:
        best = ok[0][1].rps
        worst = ok[-1][1].rps
        assert best is not None and worst is not None
        above = ranked_gaps(  # an interval only within a group, or between lone cells
            [p.rps.median for _, p in ok],  # type: ignore[union-attr]
            [p.rps_by_replicate for _, p in ok],
            [{"group": p.group} if p.group else {} for _, p in ok],
            [f"{s.key}@{p.load_point}" for s, p in ok],
            [s.key for s, _ in ok],
            workload=workload,
        )
        for i, (s, p) in enumerate(ok):
            assert p.rps is not None
            ranking.rows.append(
                RankingRow(
                    rank=i + 1,
                    stack=s,
                    point=p,
                    vs_best=ratio(p.rps.median, best.median),
                    vs_worst=ratio(p.rps.median, worst.median),
                    vs_above=above[i],
                )
            )
    for s, p in failed:
        ranking.rows.append(RankingRow(rank=None, stack=s, point=p))
    return ranking


def replaced_samples(samples: Sequence[Sample]) -> list[int]:
    """Indexes of the samples at which the tree had a process not seen before in the
    iteration (a worker replaced since the previous sample)."""
    out = []
    for i in range(1, len(samples)):
        before, now = samples[i - 1].processes_seen, samples[i].processes_seen
        if before is not None and now is not None and now > before:
            out.append(i)
    return out


def _series(index: _Index, cell: Cell, stack_key: str) -> list[CellSeriesView]:
    by_rep: dict[int, list[Iteration]] = defaultdict(list)
    for it in index.iterations_of(cell.id):
        by_rep[it.replicate].append(it)
    out = []
    for rep in sorted(by_rep):
        t0 = 0.0
        iters = []
        for it in by_rep[rep]:
            t, rps = per_second_rps(it)
            samples = index.samples_of(it.id)
            cpu_pct: list[float] = []
            prev = None
            for smp in samples:
                total = smp.cpu_user_s + smp.cpu_sys_s
                if prev is None:
                    cpu_pct.append(100.0 * total / smp.t_s if smp.t_s > 0 else 0.0)
                else:
                    dt = smp.t_s - prev[0]
                    cpu_pct.append(100.0 * (total - prev[1]) / dt if dt > 0 else 0.0)
                prev = (smp.t_s, total)
            iters.append(
                IterationSeries(
                    kind=it.kind,
                    idx=it.idx,
                    t0_s=t0,
                    duration_s=it.duration_s,
                    rps_t=t,
                    rps=rps,
                    mem_t=[s.t_s for s in samples],
                    rss_mib=[s.rss_bytes / MIB for s in samples],
                    cpu_pct=cpu_pct,
                    replaced_at=replaced_samples(samples),
                )
            )
            t0 += it.duration_s
        out.append(
            CellSeriesView(
                id=f"{cell.id}-r{rep}",
                stack_key=stack_key,
                workload=cell.workload,
                load_point=cell.load_point,
                replicate=rep,
                iterations=iters,
            )
        )
    return out


def _title(runs: list[Run]) -> str:
    if not runs:
        return "pywebbench report"
    first = runs[0]
    when = first.created_at[:16].replace("T", " ")
    if len(runs) == 1:
        return f"pywebbench {_study_name(first)} · {when} UTC"
    return f"pywebbench · {len(runs)} runs from {when} UTC"


def _study_name(run: Run) -> str:
    """ "quick study" only for the profile as it is; "custom study" once its matrix, load
    or app were changed (by a study file or flags)."""
    from pywebbench.study.config import ConfigError, resolve

    if not run.profile:
        return "study"
    try:
        base = resolve(profile=run.profile).model_dump(mode="json")
    except ConfigError:
        return "study"
    config = run.config
    load = config.get("load")
    if isinstance(load, dict):  # a rotation seed (run --runs, --seed) changes no figure's meaning
        config = {**config, "load": {**load, "seed": base.get("load", {}).get("seed")}}
    if all(config.get(key) == base.get(key) for key in ("matrix", "load", "app")):
        return f"{run.profile} study"
    return "custom study"


def build_view(study: Study, *, title: str | None = None) -> ReportView:
    """Every number and series the report shows, from the rows of ``study``."""
    index = _Index(study)
    stacks: dict[str, StackView] = {}
    key_of: dict[int, str] = {}
    for row in study.stacks:
        assert row.id is not None
        key_of[row.id] = row.key
        if row.key in stacks:
            if row.run_id not in stacks[row.key].run_ids:
                stacks[row.key].run_ids.append(row.run_id)
        else:
            stacks[row.key] = _stack_view(row)

    cell_by_id = {c.id: c for c in study.cells}
    failures: list[FailureView] = []
    failures_by_cell: dict[int, list[FailureView]] = defaultdict(list)
    for f in study.failures:
        cell = cell_by_id.get(f.cell_id) if f.cell_id is not None else None
        stack_key = key_of.get(f.stack_id) if f.stack_id is not None else None
        if stack_key is None and cell is not None:
            stack_key = key_of.get(cell.stack_id)
        fv = FailureView(
            phase=f.phase,
            reason=f.reason,
            at=f.at,
            run_id=f.run_id,
            stack_key=stack_key,
            workload=cell.workload if cell else None,
            load_point=cell.load_point if cell else None,
            replicate=f.replicate,
            detail=f.detail,
        )
        failures.append(fv)
        if f.cell_id is not None:
            failures_by_cell[f.cell_id].append(fv)

    groups: dict[tuple[str, str, str], list[Cell]] = defaultdict(list)
    ordered = sorted(study.cells, key=lambda c: (c.run_id, c.ordinal))
    for c in ordered:
        if c.status == "pending" and not index.iterations_of(c.id):
            continue  # not run yet (a study still running, or interrupted before it)
        groups[(key_of[c.stack_id], c.workload, c.load_point)].append(c)

    workloads: list[WorkloadView] = []
    for name in study.workloads():
        if not any(w == name for _, w, _ in groups):
            continue
        wv = WorkloadView(name=name)
        for (skey, wname, _), cells in groups.items():
            if wname != name:
                continue
            if not wv.params:
                wv.params = cells[0].workload_params
            wv.points.append(_point(index, skey, cells, failures_by_cell))
        wv.points.sort(key=lambda p: (p.load_sort, stacks[p.stack_key].label))
        by_stack: dict[str, list[PointView]] = defaultdict(list)
        for p in wv.points:
            by_stack[p.stack_key].append(p)
        peak = []
        for skey, pts in by_stack.items():
            ok = [p for p in pts if p.rps is not None]
            best = max(ok, key=lambda p: p.rps.median) if ok else pts[0]  # type: ignore[union-attr]
            peak.append((stacks[skey], best))
        wv.rankings.append(_rank(name, "peak", peak))
        loads = wv.load_points
        if len(loads) > 1:
            for lp in loads:
                at = [(stacks[p.stack_key], p) for p in wv.points if p.load_point == lp]
                wv.rankings.append(_rank(name, lp, at))
        workloads.append(wv)

    for skey, stack in stacks.items():
        reps = [
            r
            for c in study.cells
            if key_of.get(c.stack_id) == skey
            for r in index.replicates.get(c.id or -1, [])
        ]
        stack.cold_start_s = _median([r.cold_start_s for r in reps if r.cold_start_s is not None])
        idle = _median([r.idle_rss_bytes for r in reps if r.idle_rss_bytes is not None])
        stack.idle_rss_mib = idle / MIB if idle is not None else None
        stack.gil_runtime = gil_runtime([r.gil_enabled for r in reps])
        free_threaded = stack.interpreter_kind.startswith("free-threaded")
        if free_threaded and len(stack.settings.get("cpus") or [0, 1]) == 1:
            stack.one_core_note = (
                "one server core: this shows what free-threading costs, not what it gains"
            )

    cells_series: list[CellSeriesView] = []
    for (skey, _, _), cells in groups.items():
        for c in cells:
            cells_series += _series(index, c, skey)
    cells_series = [c for c in cells_series if c.iterations]

    history = run_history(study)
    for wv in workloads:
        wv.history = history.get(wv.name, [])

    runs = sorted(study.runs, key=lambda r: (r.created_at, r.id))
    view = ReportView(
        title=title or _title(runs),
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        pywebbench_version=__version__,
        runs=[_run_view(r, speed_note(index.speed, study.iterations)) for r in runs],
        stacks=stacks,
        workloads=workloads,
        cells=cells_series,
        failures=failures,
        knees=knee_views(study, {i: (k, stacks[k].label) for i, k in key_of.items()}),
    )
    view.axes = build_axes(view, study)  # syscalls, connection mode, worker recycling
    view.flames = flame_points(study, index.speed)  # --flamegraph, at the req/s' core speed
    view.mixes = mix_points(study)  # run --mix: figures per endpoint
    view.nodes = nodes_view(study)  # --executor ray
    view.ab = ab_rows(study)  # pywebbench ab runs
    view.pooled = pooled_view(study, lambda k: stacks[k].label if k in stacks else k)
    if view.pooled is not None:  # the latest run against docs/reference-table.md
        view.pooled.published = published_lines(
            study, lambda k: stacks[k].label if k in stacks else k
        )
    return view
