"""Typed rows of the results store (see docs/store-schema.md).

Every dataclass here mirrors one SQLite table: its field names are the column names, in
order. :data:`TABLE_CLASSES` names each table's class; a few are kept beside what makes them
(a sample of the server's tree is the meter's :class:`pywebbench.meter.sampler.Sample`, the
A/B and knee rows are in ``ab_rows.py`` and ``knee_rows.py``). The writer
(:class:`pywebbench.store.Store`) inserts them, the reader builds them back, and
:class:`Study` gathers every row of one or more runs for the reports.

Units: seconds (``*_s``), bytes (``*_bytes``), microseconds (``*_us``). Timestamps are ISO
8601 UTC strings. ``*_json`` fields hold JSON text; each has a parsed property beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypedDict, TypeVar, cast

from pywebbench.meter.sampler import Sample
from pywebbench.store.ab_rows import AbComparison
from pywebbench.store.knee_rows import Knee, KneeProbe

_T = TypeVar("_T")


class _Word(str, Enum):
    """A stored word: compares equal to its text and is written to SQLite as that text."""

    def __str__(self) -> str:
        return str(self.value)


class RunStatus(_Word):
    """How a run stands."""

    RUNNING = "running"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class CellStatus(_Word):
    """How a cell (or one replicate of it) stands; replicates are never ``pending``."""

    PENDING = "pending"
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class Phase(_Word):
    """Where in the pipeline something happened, in pipeline order."""

    PLAN = "plan"
    SERVICES = "services"
    PROVISION = "provision"
    START = "start"
    VERIFY = "verify"
    WARMUP = "warmup"
    MEASURE = "measure"
    STOP = "stop"
    INTERRUPTED = "interrupted"


class IterationKind(_Word):
    """A warm-up iteration (stored, not in the figures) or a measured one."""

    WARMUP = "warmup"
    MEASURED = "measured"


RUN_STATUSES = tuple(s.value for s in RunStatus)
CELL_STATUSES = tuple(s.value for s in CellStatus)
PHASES = tuple(p.value for p in Phase)
ITERATION_KINDS = tuple(k.value for k in IterationKind)


def _loads(text: str | None, default: _T) -> _T:
    """The JSON value of a ``*_json`` column, of the shape its ``default`` has."""
    return cast(_T, json.loads(text)) if text else default


class CellFlags(TypedDict, total=False):
    """A finished cell's flags (``cells.flags_json``), written by
    :func:`pywebbench.run.rows.cell_flags` and the runner; every key is optional (stores of
    earlier versions have fewer)."""

    generator_bound: bool  # the load generator may have limited a measured iteration
    errors: bool  # transport errors or non-2xx responses in the measured iterations
    not_steady: bool  # some replicate capped and unsettled (warmup_class.unsettled)
    drift: bool  # some replicate's measured throughput trends (docs/steady-state.md)
    leak: bool  # memory keeps growing with requests once steady
    leak_bytes_per_1k: float  # the leak's slope, median over replicates
    uncollected: bool  # memory grew below PyPy's collection floor (meter/pypy_gc.py)
    #: Server processes of its interleaved group stopped at their share of the machine's
    #: memory before their collector's floor (not a leak: run/interleaved.py)
    over_share: int
    interfered: bool  # other processes took CPU from its cores (docs/interference.md)
    remeasured: int  # interfered iterations measured again
    classes: dict[str, int]  # Barrett's class -> replicates (docs/steady-state.md#classes)
    # Barrett's classification of the cell (warmup_class.cell_class): a class, good or bad
    # inconsistent
    classification: str
    inconsistent: bool  # its replicates settled at different levels
    modes: list[list[float]]  # those levels and how many settled there: [[level, count]]
    #: The fault phase (:class:`pywebbench.faults.outcome.CellRobustness`'s JSON form), or a
    #: bare score in the earliest stores.
    robustness: dict[str, Any] | float
    #: An interleaved group's figures (:mod:`pywebbench.run.interleaved`): req/s at the
    #: group's average round with its interval, the ratio to the group's reference, the
    #: ratio to every other stack of the group (``vs``), the group's time span.
    group: dict[str, Any]
    #: Why a cell of an interleaved study took the per-cell path
    #: (:func:`pywebbench.run.interleaved.why_not_interleaved`); absent in a group or a
    #: sequential study.
    per_cell: str


@dataclass
class Run:
    """One invocation of a study (``pywebbench run``), with the host it ran on."""

    id: str  # "20261121-153012-1a2b"
    created_at: str
    finished_at: str | None
    status: str  # RUN_STATUSES
    profile: str | None
    hostname: str
    cpu_model: str
    cpu_count: int
    kernel: str
    governor: str | None  # CPU frequency governor, None when the kernel exposes none
    memory_bytes: int | None
    os: str
    pywebbench_version: str
    orchestrator_python: str
    server_cpus_json: str  # JSON list of core ids the servers were pinned to
    generator_cpus_json: str  # JSON list of core ids the load generator used
    config_json: str  # the resolved study config (see docs/config.md)
    host_json: str = "{}"  # any further host facts

    @property
    def config(self) -> dict[str, Any]:
        return _loads(self.config_json, {})

    @property
    def server_cpus(self) -> list[int]:
        return _loads(self.server_cpus_json, [])

    @property
    def generator_cpus(self) -> list[int]:
        return _loads(self.generator_cpus_json, [])

    @property
    def host(self) -> dict[str, Any]:
        return _loads(self.host_json, {})


@dataclass
class StackRow:
    """interpreter + server (with workers/threads) + framework, as run in one run."""

    id: int | None
    run_id: str
    key: str  # unique within the run: "cpython3.11/gunicorn-gthread/flask" (+ "@w2t4" if not 1/1)
    name: str  # "cpython3.11/gunicorn-gthread/flask"
    interpreter: str  # "cpython3.11"
    interpreter_impl: str  # "cpython" | "pypy"
    interpreter_version: str  # "3.11.7"
    interpreter_build: str
    interpreter_path: str
    server: str
    interface: str  # "wsgi" | "asgi" | native interface name
    framework: str
    workers: int
    threads: int
    env_key: str | None = None  # provisioning cache key (Stack.env_key())
    requirements_json: str = "[]"  # requirement specifiers asked for
    packages_json: str = "{}"  # exact installed versions {name: version}
    settings_json: str = "{}"  # the server's fairness manifest (adapter settings())
    provision_s: float | None = None
    provision_cached: bool | None = None
    worker_max_requests: int = 0  # a worker is recycled after this many requests; 0 = never
    interpreter_free_threaded: bool = False  # a free-threaded build ("cpython3.13t")
    interpreter_jit: bool = False  # the experimental JIT built in
    interpreter_optimizations: str = ""  # "PGO+LTO", "LTO", "" (none)
    interpreter_gil: str = ""  # PYTHON_GIL given to its servers: "", "0", "1"

    @property
    def requirements(self) -> list[str]:
        return _loads(self.requirements_json, [])

    @property
    def packages(self) -> dict[str, str]:
        return _loads(self.packages_json, {})

    @property
    def settings(self) -> dict[str, Any]:
        return _loads(self.settings_json, {})


@dataclass
class Cell:
    """One stack x workload x load point: the unit of work of the matrix."""

    id: int | None
    run_id: str
    stack_id: int
    key: str  # unique within the run, stable across --resume: "<stack key>|<workload>|c64"
    ordinal: int  # position in the matrix order
    workload: str
    workload_params_json: str  # parameters of the workload request ({"n": 20})
    load_model: str  # "closed" | "open"
    connections: int  # closed loop: connections; open loop: connections the rate is spread over
    rate: float | None  # requests/s target (open loop), None for closed loop
    load_point: str  # label: "c64" or "r1000"
    status: str  # CELL_STATUSES
    failure_phase: str | None = None
    failure_reason: str | None = None
    server_cpus_json: str = "[]"
    generator_cpus_json: str = "[]"
    started_at: str | None = None
    finished_at: str | None = None
    flags_json: str = "{}"  # {"not_steady": false, "leak": false, "generator_bound": ...}
    #: "keepalive" | "close" (a new connection per request) | N as text (a new connection
    #: after every N requests)
    connection_mode: str = "keepalive"
    bind: str = "tcp"  # "tcp" | "unix": where the server listened (a unix-domain socket)
    protocol: str = "http1"  # "http1" | "h2c": what the cell spoke (HTTP/2, prior knowledge)

    @property
    def workload_params(self) -> dict[str, Any]:
        return _loads(self.workload_params_json, {})

    @property
    def flags(self) -> CellFlags:
        """What the run found about the cell (:class:`CellFlags`)."""
        return cast(CellFlags, _loads(self.flags_json, {}))

    @property
    def server_cpus(self) -> list[int]:
        return _loads(self.server_cpus_json, [])

    @property
    def generator_cpus(self) -> list[int]:
        return _loads(self.generator_cpus_json, [])


@dataclass
class Replicate:
    """One fresh server process of a cell: cold start and idle memory."""

    id: int | None
    cell_id: int
    replicate: int  # 0-based
    status: str  # "running" | "ok" | "failed" | "interrupted"
    started_at: str
    pid: int | None = None
    cold_start_s: float | None = None  # launch to first good response
    idle_rss_bytes: int | None = None  # whole process tree, before any load
    idle_uss_bytes: int | None = None
    idle_pss_bytes: int | None = None
    processes: int | None = None  # processes in the tree when idle (master + workers)
    log_path: str | None = None
    failure_phase: str | None = None
    failure_reason: str | None = None
    finished_at: str | None = None
    # steady state (docs/steady-state.md)
    warmup_end: str | None = None  # "steady" | "cap" (None: fixed warm-up)
    warmup_s: float | None = None  # how long the warm-up ran
    steady_start_s: float | None = None  # since the warm-up began; None: not steady
    warmup_curve_json: str | None = None  # [[t_s, req/s], ...] in buckets
    drift_json: str | None = None  # trend test of the measured iterations
    leak_json: str | None = None  # memory slope after the steady state
    syscalls_json: str | None = None  # the traced window's syscalls per request (--syscalls)
    node: str | None = None  # --executor ray: the node that measured it, "host (ip)"
    node_id: str | None = None  # its Ray node id (None: the run's own host)
    node_cpu_model: str | None = None
    node_cpus: int | None = None  # cores of that node
    flame_json: str | None = None  # the sampled window's stacks (--flamegraph)
    instructions_json: str | None = None  # instructions per request (--instructions)
    #: Whether its server's app processes ran with the GIL (``sys._is_gil_enabled()``; any
    #: process: True); None when none reported (a user's app).
    gil_enabled: bool | None = None
    warmup_class: str | None = None  # flat | warm-up | slowdown | no steady state (Barrett)
    measured_curve_json: str | None = None  # [[t_s, req/s], ...] of the measured iterations

    @property
    def warmup_curve(self) -> list[list[float]]:
        return _loads(self.warmup_curve_json, [])

    @property
    def measured_curve(self) -> list[list[float]]:
        return _loads(self.measured_curve_json, [])

    @property
    def drift(self) -> dict[str, Any]:
        return _loads(self.drift_json, {})

    @property
    def leak(self) -> dict[str, Any]:
        return _loads(self.leak_json, {})

    @property
    def syscalls(self) -> dict[str, Any]:
        return _loads(self.syscalls_json, {})

    @property
    def flame(self) -> dict[str, Any]:
        """The sampled window (:class:`pywebbench.meter.flame.FlameWindow`'s document, or
        ``{"error": ...}``); empty without one."""
        return _loads(self.flame_json, {})

    @property
    def instructions(self) -> dict[str, Any]:
        return _loads(self.instructions_json, {})


@dataclass
class Iteration:
    """One load iteration (warm-up or measured) against one server process.

    The load columns summarize :class:`pywebbench.load.LoadResult`; ``result_json`` keeps the
    whole result, including serialised histograms and the per-second series. The resource
    columns summarize the samples of the server's process tree taken during the iteration.
    """

    id: int | None
    cell_id: int
    replicate: int
    kind: str  # "warmup" | "measured"
    idx: int  # 0-based position within (replicate, kind)
    started_at: str
    duration_s: float  # the measurement window actually run
    requests: int  # completed responses (any status)
    errors: int  # transport errors (connect, reset, timeout, malformed...)
    non_2xx: int
    timeouts: int
    rps: float  # completed responses per second
    latency_mean_us: float | None = None
    latency_p50_us: float | None = None
    latency_p90_us: float | None = None
    latency_p99_us: float | None = None
    latency_p999_us: float | None = None
    latency_max_us: float | None = None
    bytes_in: int | None = None
    bytes_out: int | None = None
    generator_cpu_s: float | None = None
    generator_bound: bool = False
    interrupted: bool = False  # stopped early by Ctrl-C: partial, excluded from statistics
    server_alive: bool = True  # the server process was still running after the iteration
    cpu_user_s: float | None = None  # server tree CPU during the iteration
    cpu_sys_s: float | None = None
    requests_per_cpu_s: float | None = None
    rss_peak_bytes: int | None = None
    rss_end_bytes: int | None = None
    uss_peak_bytes: int | None = None
    uss_end_bytes: int | None = None
    pss_peak_bytes: int | None = None
    pss_end_bytes: int | None = None
    mem_per_worker_bytes: int | None = None  # USS (else RSS) at end / worker processes
    threads_peak: int | None = None
    fds_peak: int | None = None
    processes_peak: int | None = None
    ctx_voluntary: int | None = None  # context switches during the iteration
    ctx_involuntary: int | None = None
    result_json: str = "{}"
    processes_seen: int | None = None  # distinct PIDs of the tree sampled (recycled workers)
    # Interference guard (docs/interference.md): CPU other processes and steal took from the
    # pinned cores over the window; interfered when above load.interference_max.
    others_cpu_s: float | None = None
    steal_s: float | None = None
    interfered: bool = False
    # The interfered attempts measured again before this one: [{"rps", "share", ...}].
    remeasured_json: str = "[]"
    # The core-speed probe's median rate on the server's cores over the window (loop steps
    # per CPU-second; docs/interference.md#core-speed); None: not probed.
    core_rate: float | None = None

    @property
    def remeasured(self) -> list[dict[str, Any]]:
        """The interfered attempts discarded and measured again before this iteration."""
        doc: list[dict[str, Any]] = _loads(self.remeasured_json, [])
        return doc if isinstance(doc, list) else []

    @property
    def result(self) -> dict[str, Any]:
        """The full LoadResult document as stored (see docs/load-engine.md)."""
        return _loads(self.result_json, {})

    def latency_histogram(self) -> str | None:
        """The serialised latency HdrHistogram (``latency.hist``; a slice of an interleaved
        group keeps it under ``ab_slice``), or None when none is stored or the document is
        unreadable."""
        try:
            doc = self.result
            latency = doc.get("latency")
            if latency is None and isinstance(doc.get("ab_slice"), dict):
                latency = doc["ab_slice"].get("latency")
        except (ValueError, AttributeError):
            return None
        hist = latency.get("hist") if isinstance(latency, dict) else None
        return hist if isinstance(hist, str) and hist else None

    @property
    def cpu_s(self) -> float | None:
        if self.cpu_user_s is None or self.cpu_sys_s is None:
            return None
        return self.cpu_user_s + self.cpu_sys_s


@dataclass
class Failure:
    """Something that went wrong, with the pipeline phase it happened in."""

    id: int | None
    run_id: str
    phase: str  # PHASES
    reason: str  # one line
    at: str
    stack_id: int | None = None
    cell_id: int | None = None
    replicate: int | None = None
    detail: str | None = None  # log tail, traceback...


@dataclass
class LoadAgentRow:
    """One load agent's part of an iteration loaded by several agents (docs/scale-out.md):
    where it ran, its share, what it measured, its start and self-check, or why it failed."""

    id: int | None
    iteration_id: int
    agent: str  # agent-0, agent-1, ...
    node: str  # host (ip)
    node_id: str
    cpu_model: str | None
    cpus_json: str
    status: str  # ok | failed
    failure_reason: str | None
    connections: int
    rate: float | None
    requests: int | None
    rps: float | None
    start_lateness_us: float | None
    schedule_lag_p99_us: float | None
    generator_cpu_s: float | None
    generator_bound: bool
    result_json: str | None


@dataclass
class Study:
    """Everything stored for a set of runs, loaded at once for reports and exports."""

    runs: list[Run] = field(default_factory=list)
    stacks: list[StackRow] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    replicates: list[Replicate] = field(default_factory=list)
    iterations: list[Iteration] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    knee_probes: list[KneeProbe] = field(default_factory=list)  # docs/slo.md
    knees: list[Knee] = field(default_factory=list)
    load_agents: list[LoadAgentRow] = field(default_factory=list)  # docs/scale-out.md
    ab_comparisons: list[AbComparison] = field(default_factory=list)  # docs/ab.md

    def stack(self, stack_id: int) -> StackRow:
        """The stack row with this id."""
        for s in self.stacks:
            if s.id == stack_id:
                return s
        raise KeyError(stack_id)

    def cell(self, cell_id: int) -> Cell:
        """The cell row with this id."""
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(cell_id)

    def iterations_of(self, cell_id: int, kind: str | None = "measured") -> list[Iteration]:
        """Iterations of a cell in order (replicate, kind, idx); ``kind=None`` for all."""
        rows = [i for i in self.iterations if i.cell_id == cell_id and kind in (None, i.kind)]
        return sorted(rows, key=lambda i: (i.replicate, i.kind != "warmup", i.idx))

    def samples_of(self, iteration_id: int) -> list[Sample]:
        """Resource samples of one iteration, in time order."""
        return sorted(
            (s for s in self.samples if s.iteration_id == iteration_id), key=lambda s: s.t_s
        )

    def replicates_of(self, cell_id: int) -> list[Replicate]:
        return sorted(
            (r for r in self.replicates if r.cell_id == cell_id), key=lambda r: r.replicate
        )

    def workloads(self) -> list[str]:
        """Workload names in first-seen matrix order."""
        seen: dict[str, None] = {}
        for c in sorted(self.cells, key=lambda c: (c.run_id, c.ordinal)):
            seen.setdefault(c.workload, None)
        return list(seen)


TABLE_CLASSES: dict[str, type] = {
    "runs": Run,
    "stacks": StackRow,
    "cells": Cell,
    "replicates": Replicate,
    "iterations": Iteration,
    "samples": Sample,
    "failures": Failure,
    "knee_probes": KneeProbe,
    "knees": Knee,
    "load_agents": LoadAgentRow,
    "ab_comparisons": AbComparison,
}
