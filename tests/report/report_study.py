"""Write a small but real study into a store, for the report tests.

Each "stack" of the study is the Rust reference server (``pywebbench.refserver``) with its own
service delay, so stacks really differ in throughput and latency; every iteration is a real
engine run (``pywebbench.load``) with the server's process tree metered by
``pywebbench.meter.Sampler``, stored through the store's write API exactly as the runner
stores it. Names and failure texts can carry markup, to test that reports show it as text.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pywebbench.analysis.group import GEOMETRIC_MEAN
from pywebbench.analysis.warmup import SteadyRule, WarmupEnd, WarmupVerdict
from pywebbench.analysis.warmup_class import unsettled
from pywebbench.load.result import LoadResult
from pywebbench.meter import Sampler, snapshot
from pywebbench.run.rows import iteration_row
from pywebbench.run.steadiness import replicate_checks, warm_until_steady
from pywebbench.store import (
    Cell,
    Failure,
    Replicate,
    Run,
    Sample,
    StackRow,
    Store,
    new_run_id,
    utcnow,
)

SERVER_CPUS = [0]
GENERATOR_CPUS = [1]


@dataclass
class FakeStack:
    """A stack of the study: names as a report shows them, served by a delayed refserver."""

    interpreter: str
    server: str
    framework: str
    delay_ms: float = 0.0
    impl: str = "cpython"
    # Workloads where this stack "fails to verify" (a recorded failure, no iterations).
    fails_on: dict[str, str] = field(default_factory=dict)
    # Cell flags stored as a runner that detected them would (e.g. {"leak": True}).
    flags: dict[str, object] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.interpreter}/{self.server}/{self.framework}"


@dataclass
class StudyPlan:
    stacks: list[FakeStack]
    loads: dict[str, list[int]]  # workload -> concurrencies
    replicates: int = 2
    warmup: int = 1
    measured: int = 2
    duration_s: float = 0.3
    provision_failures: list[str] = field(default_factory=list)
    # Warm up until steady (the runner's WarmupWatch, this cap in seconds) instead of
    # ``warmup`` fixed iterations; PyPy stacks get a JIT threshold they never reach, so
    # their warm-ups end at the cap (not steady).
    steady_cap_s: float | None = None


def _run_row(run_id: str) -> Run:
    return Run(
        id=run_id,
        created_at=utcnow(),
        finished_at=None,
        status="running",
        profile="quick",
        hostname="test-host",
        cpu_model="Test CPU <b>bold</b>",
        cpu_count=2,
        kernel="6.1.0",
        governor=None,
        memory_bytes=8 << 30,
        os="Debian GNU/Linux 12",
        pywebbench_version="0.1.0",
        orchestrator_python="3.11",
        server_cpus_json=json.dumps(SERVER_CPUS),
        generator_cpus_json=json.dumps(GENERATOR_CPUS),
        config_json=json.dumps(
            {
                "profile": "quick",
                "note": "</script><script>alert(9)</script>",
                "load": {
                    "warmup": "steady",
                    "warmup_cap_s": 2.5,
                    "jit_warmup_cap_s": 5.0,
                    "steady_window_s": 0.75,
                    "jit_min_requests": 10**9,
                },
            }
        ),
        host_json=json.dumps({"virtualisation": "container"}),
    )


def _stack_row(run_id: str, s: FakeStack) -> StackRow:
    return StackRow(
        id=None,
        run_id=run_id,
        key=s.key,
        name=s.key,
        interpreter=s.interpreter,
        interpreter_impl=s.impl,
        interpreter_version="3.11.2" if s.impl == "cpython" else "3.9.16",
        interpreter_build="",
        interpreter_path="/usr/bin/python3",
        server=s.server,
        interface="wsgi",
        framework=s.framework,
        workers=1,
        threads=1,
        packages_json=json.dumps({"refserver": "0.1.0", s.framework: "1.0"}),
        settings_json=json.dumps({"delay_ms": s.delay_ms, "access_log": False, "workers": 1}),
    )


def _iteration(
    store: Store,
    cell_id: int,
    at: tuple[int, str, int],
    pid: int,
    load: Callable[[], LoadResult],
) -> tuple[LoadResult, list[Sample]]:
    """One real engine run against the server, metered, stored like the runner stores it."""
    replicate, kind, idx = at
    started = utcnow()
    with Sampler(pid, interval_s=0.05) as sampler:
        result = load()
    meter = sampler.summary
    it = iteration_row(
        result, meter, cell_id=cell_id, replicate=replicate, kind=kind, idx=idx, started_at=started
    )
    store.add_iteration(it, meter.samples)
    return result, list(meter.samples)


def _replicate(
    store: Store, plan: StudyPlan, s: FakeStack, at: tuple[int, int, int], srv: Any, url: str
) -> dict[str, Any]:
    """Warm-up and measured iterations of one replicate; its steady-state verdicts stored on
    the replicate row as the runner stores them. Returns the replicate's row fields."""
    from pywebbench.load import LoadSpec, LocalAgent, run_load

    def spec(conns: int, duration_s: float) -> LoadSpec:
        return LoadSpec(
            url=url, connections=conns, threads=1, duration_s=duration_s, cpus=GENERATOR_CPUS
        )

    cell_id, rep, conns = at
    rep_id = store.add_replicate(
        Replicate(
            id=None,
            cell_id=cell_id,
            replicate=rep,
            status="ok",
            started_at=utcnow(),
            pid=srv.pid,
            idle_rss_bytes=snapshot(srv.pid).rss_bytes,
        )
    )
    fields: dict[str, Any] = {}
    if plan.steady_cap_s is not None:
        # The report tests need the study's shape, CPython steady and PyPy capped, drawn from
        # real curves. The curve is a real warm-up of the whole cap; its verdict is set by
        # the stack, not judged: the rule judged on 0.25-s buckets of a real server reads a
        # host's steal as a change of regime (a fresh-clone suite capped a CPython warm-up at
        # 16-22% steal), and the rule has its own tests on recorded curves
        # (tests/run/test_warmup_recorded.py). Deterministic: its false-failure rate is 0.
        rule = SteadyRule(window_s=0.75, cap_s=plan.steady_cap_s, min_requests=10**9)
        found: list[WarmupVerdict] = []

        def warm() -> LoadResult:
            result, capped = warm_until_steady(LocalAgent(), lambda d: spec(conns, d), rule)
            steady_from = rule.window_s if s.impl != "pypy" else None
            found.append(
                WarmupVerdict(
                    end=WarmupEnd.CAP if steady_from is None else WarmupEnd.STEADY,
                    steady_start_s=steady_from,
                    elapsed_s=capped.elapsed_s,
                    curve=capped.curve,
                )
            )
            return result

        _iteration(store, cell_id, (rep, "warmup", 0), srv.pid, warm)
        fields.update(
            warmup_end=found[0].end.value,
            warmup_s=round(found[0].elapsed_s, 3),
            steady_start_s=found[0].steady_start_s,
            warmup_curve_json=json.dumps(found[0].curve),
        )
    else:
        for idx in range(plan.warmup):
            load = partial(run_load, spec(conns, plan.duration_s))
            _iteration(store, cell_id, (rep, "warmup", idx), srv.pid, load)
    measured = [
        _iteration(
            store,
            cell_id,
            (rep, "measured", idx),
            srv.pid,
            partial(run_load, spec(conns, plan.duration_s)),
        )
        for idx in range(plan.measured)
    ]
    # no progress snapshots kept here: the drift test falls back to the per-second series
    trend, memory = replicate_checks([(r, smp, []) for r, smp in measured], max_drift=0.05)
    fields.update(drift_json=json.dumps(trend.to_dict()), leak_json=json.dumps(memory.to_dict()))
    store.update_replicate(rep_id, **fields)
    return fields


def _flags(s: FakeStack, reps: list[dict[str, Any]]) -> dict[str, Any]:
    """The cell flags by the runner's rule (run/runner.py), then the stack's own."""
    leaks = [json.loads(r["leak_json"]) for r in reps]
    flags: dict[str, Any] = {
        "generator_bound": False,
        "errors": False,
        "not_steady": any(unsettled(r.get("warmup_end"), r.get("warmup_class")) for r in reps),
        "drift": any(json.loads(r["drift_json"])["drifting"] for r in reps),
        "leak": bool(leaks) and all(x["leaking"] for x in leaks),
    }
    slopes = sorted(float(x["bytes_per_1k"]) for x in leaks)
    if slopes:
        flags["leak_bytes_per_1k"] = slopes[len(slopes) // 2]
    return {**flags, **s.flags}


def record_study(path: Path, plan: StudyPlan) -> str:
    """Run ``plan`` for real and store it; returns the run id.

    Each replicate of a stack is a fresh reference-server process, shared by the stack's
    cells (workloads x load points) to keep the test short.
    """
    from pywebbench.refserver import RefServer

    run_id = new_run_id()
    with Store(path) as store:
        store.create_run(_run_row(run_id))
        for reason in plan.provision_failures:
            store.add_failure(Failure(None, run_id, "provision", reason, utcnow()))
        ordinal = 0
        for s in plan.stacks:
            sid = store.add_stack(_stack_row(run_id, s))
            cells: list[tuple[int, str, int]] = []
            for workload, conns in plan.loads.items():
                for c in conns:
                    ordinal += 1
                    cell_id = store.add_cell(
                        Cell(
                            id=None,
                            run_id=run_id,
                            stack_id=sid,
                            key=f"{s.key}|{workload}|c{c}",
                            ordinal=ordinal,
                            workload=workload,
                            workload_params_json="{}",
                            load_model="closed",
                            connections=c,
                            rate=None,
                            load_point=f"c{c}",
                            status="running",
                            server_cpus_json=json.dumps(SERVER_CPUS),
                            generator_cpus_json=json.dumps(GENERATOR_CPUS),
                            started_at=utcnow(),
                        )
                    )
                    if workload in s.fails_on:
                        _fail_verify(store, run_id, sid, cell_id, workload, s.fails_on[workload])
                    else:
                        cells.append((cell_id, workload, c))
            reps: dict[int, list[dict[str, Any]]] = {cell_id: [] for cell_id, _, _ in cells}
            for rep in range(plan.replicates):
                with RefServer(delay_ms=s.delay_ms, cpus=SERVER_CPUS) as srv:
                    for cell_id, workload, c in cells:
                        url = srv.url.rstrip("/") + "/" + workload
                        at = (cell_id, rep, c)
                        reps[cell_id].append(_replicate(store, plan, s, at, srv, url))
            for cell_id, _, _ in cells:
                store.update_cell(
                    cell_id,
                    status="ok",
                    finished_at=utcnow(),
                    flags_json=json.dumps(_flags(s, reps[cell_id])),
                )
        store.update_run(run_id, status="completed", finished_at=utcnow())
    return run_id


def _fail_verify(
    store: Store, run_id: str, stack_id: int, cell_id: int, workload: str, body: str
) -> None:
    """Record a verification failure whose reason and detail quote the response body."""
    reason = f"/{workload}: unexpected body {body}"
    store.add_failure(
        Failure(
            None,
            run_id,
            "verify",
            reason,
            utcnow(),
            stack_id=stack_id,
            cell_id=cell_id,
            replicate=0,
            detail=f"HTTP/1.1 200 OK\ncontent-type: text/html\n\n{body}",
        )
    )
    store.update_cell(
        cell_id,
        status="failed",
        failure_phase="verify",
        failure_reason=reason,
        finished_at=utcnow(),
    )


#: When a group of :func:`store_groups` ran, unless told otherwise.
GROUP_SPAN = ["2026-12-06T10:00:00Z", "2026-12-06T10:04:00Z"]


def store_groups(
    store_path: Path,
    run_id: str,
    group_of: Callable[[Cell, StackRow], str | None],
    *,
    processes: int,
    spans: dict[str, list[str]] | None = None,
) -> None:
    """Store the cells' interleaved-group figures as the group runner stores them
    (``run/interleaved.py``, ``_group_flags``): req/s at the group's average round (here the
    median of the measured iterations), its interval, its ratio to the group's geometric mean
    and to every other member. ``group_of`` names each cell's group (None: the cell stays as
    measured on its own); ``spans``: each group's time span (:data:`GROUP_SPAN` otherwise)."""
    with Store(store_path, create=False) as store:
        study = store.load_study([run_id])
        stacks = {s.id: s for s in study.stacks}
        cells = {c.id: c for c in study.cells if c.id is not None}
        rps = {
            k: statistics.median(
                i.rps for i in study.iterations if i.cell_id == k and i.kind == "measured"
            )
            for k in cells
        }
        group = {k: group_of(c, stacks[c.stack_id]) for k, c in cells.items()}
        for cell_id, cell in cells.items():
            label = group[cell_id]
            if label is None:
                continue
            members = [k for k in cells if group[k] == label]
            mean = statistics.geometric_mean([rps[k] for k in members])
            mine = rps[cell_id]
            flags = json.loads(cell.flags_json or "{}")
            flags["group"] = {
                "group": label,
                "reference": GEOMETRIC_MEAN,
                "stacks": len(members),
                "processes": processes,
                "df": len(members) * (processes - 1),
                "rps": mine,
                "rps_low": mine * 0.98,
                "rps_high": mine * 1.02,
                "ratio": mine / mean,
                "low": mine / mean * 0.98,
                "high": mine / mean * 1.02,
                "span": (spans or {}).get(label, GROUP_SPAN),
                "rounds": 12,
                "seed": 1,
                "idle_cpu_share": {"median": 0.01, "p90": 0.02},
                "vs": {
                    stacks[cells[o].stack_id].key: [
                        mine / rps[o],
                        mine / rps[o] * 0.97,
                        mine / rps[o] * 1.03,
                    ]
                    for o in members
                    if o != cell_id
                },
            }
            store.update_cell(cell_id, flags_json=json.dumps(flags))
