"""The report's view model: every number a report shows, computed once from a stored study.

:func:`pywebbench.report.build.build_view` fills these dataclasses from a
:class:`pywebbench.store.model.Study`; the HTML and Markdown renderers only lay them out, so
both formats show the same numbers (formatted by :mod:`pywebbench.formatting`).

Units here are the ones people read: requests/s, milliseconds, MiB, seconds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from pywebbench.analysis.ratio import spread
from pywebbench.analysis.ties import RankRatio
from pywebbench.faults.outcome import RobustnessCurve
from pywebbench.meter.breakdown import Breakdown, breakdown
from pywebbench.meter.flame import FlameWindow
from pywebbench.report.ab import AbRow
from pywebbench.report.capacity import CapacityView
from pywebbench.report.knee import KneeView
from pywebbench.report.nodes import NodesView
from pywebbench.report.pooled import PooledView
from pywebbench.store.endpoints import EndpointFigures


@dataclass(frozen=True)
class Estimate:
    """A median with its confidence interval (``low``..``high``) over ``n`` samples."""

    median: float
    low: float
    high: float
    n: int


@dataclass
class MemoryView:
    """A point's memory, as the uWSGI PyPy study reported it: at startup, after warm-up, at
    the end, and the growth per 1,000 requests once steady (medians over replicates, MiB)."""

    startup_mib: float | None = None  # idle RSS of the process tree before any load
    warm_mib: float | None = None  # RSS at the end of the warm-up iteration
    end_mib: float | None = None  # RSS at the end of the last measured iteration
    leak_kb_per_1k: float | None = None  # median over replicates of the Theil-Sen slope
    leak_ci_kb: tuple[float, float] | None = None  # lowest..highest bound of the replicates
    leak_points: int = 0  # memory samples behind the slopes


@dataclass
class WarmupCurve:
    """One replicate's warm-up (0.25 s buckets since it began) and what followed it."""

    replicate: int
    end: str  # "steady" | "cap" | "" (a fixed warm-up: no verdict)
    warmup_s: float | None
    steady_start_s: float | None
    curve: list[tuple[float, float]] = field(default_factory=list)  # (s, req/s)
    # Measured iterations' per-second req/s, on the same clock (after the warm-up).
    measured: list[tuple[float, float]] = field(default_factory=list)
    # Barrett's class of the replicate: flat, warm-up, slowdown, no steady state ("": none)
    warmup_class: str = ""
    # the warm-up hit its cap and, judged with the measured series, had not settled
    # (warmup_class.unsettled); in stores written before a cap was judged again, any cap
    unsettled: bool = False


@dataclass
class StackView:
    """One stack as run: identity, versions and its fairness manifest."""

    key: str  # "cpython3.11/gunicorn-gthread/flask" (+ "@w2t4"): unique over the report
    label: str  # what people read: "cpython3.11 · gunicorn-gthread · flask"
    interpreter: str
    interpreter_version: str
    interpreter_build: str
    server: str
    interface: str
    framework: str
    workers: int
    threads: int
    packages: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    cold_start_s: float | None = None  # median over every replicate of the stack
    idle_rss_mib: float | None = None  # median over every replicate of the stack
    worker_max_requests: int = 0  # workers recycled after this many requests; 0 = never
    interpreter_kind: str = ""  # "GIL", "free-threaded, PYTHON_GIL=1", "PyPy JIT"...
    #: The GIL as its servers ran ("on", "off", "on in 1 of 3 replicates"; "" unknown).
    gil_runtime: str = ""
    #: A free-threaded stack whose server had one core: it shows the cost of free-threading
    #: (atomic refcounts, no specialisation...), not its gain (docs/interpreters.md).
    one_core_note: str = ""


@dataclass(frozen=True)
class FindingView:
    """A malformed request the stack accepted, or a smuggled request it answered."""

    kind: str  # fault kind ("cl-te-conflict", "smuggle", ...)
    what: str  # "accepted" or "smuggled-request-answered"
    count: int
    status: int
    request: str  # the request sent (escaped text)
    response: str  # the start of the answer (escaped text)


@dataclass
class RobustnessView:
    """A cell's fault phase (docs/faults.md): the good clients clean and under the fault mix."""

    mix: str
    score: float  # 0-100
    retained_pct: float | None  # faulted / clean requests/s, percent (uncapped)
    clean_rps: float | None
    faulted_rps: float | None
    p99_clean_ms: float | None
    p99_faulted_ms: float | None
    good_errors: int
    good_error_rate: float | None  # fraction, 0..1
    survived: bool
    answered_after: bool
    recovery_s: float | None  # end of the fault phase to the first normal answer
    malformed: dict[str, str] = field(default_factory=dict)  # kind -> worst class
    malformed_accepted: list[str] = field(default_factory=list)
    findings: list[FindingView] = field(default_factory=list)
    #: Other processes took more than load.interference_max of a core during the phase,
    #: still after its re-measures (docs/faults.md).
    interfered: bool = False


@dataclass
class PointView:
    """One stack x workload x load point, aggregated over replicates and measured iterations.

    ``rps`` is None when no measured iteration completed (the point failed); ``failure``
    then says where and why.
    """

    stack_key: str
    workload: str
    load_point: str  # "c64", "r1000"
    load_model: str  # "closed" | "open"
    connections: int
    rate: float | None
    rps: Estimate | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    peak_rss_mib: float | None = None
    rps_per_cpu_s: float | None = None
    error_rate: float | None = None  # fraction, 0..1
    requests: int = 0
    replicates: int = 0  # replicates with at least one measured iteration
    generator_bound: bool = False
    not_steady: bool = False  # some replicate capped and unsettled (warmup_class.unsettled)
    drift: bool = False  # some replicate's measured throughput trends
    leak: bool = False  # memory grows with requests once steady (every replicate)
    leak_kb_per_1k: float | None = None  # the cell flag's slope (median over replicates)
    # The interference guard (docs/interference.md): some measured iteration stayed
    # interfered; how many were measured again.
    interfered: bool = False
    remeasured: int = 0
    memory: MemoryView = field(default_factory=MemoryView)
    warmups: list[WarmupCurve] = field(default_factory=list)
    # Measured requests/s per replicate (the units of the CIs: docs/steady-state.md).
    rps_by_replicate: list[list[float]] = field(default_factory=list)
    # An interleaved group's figures (cells.flags_json "group"; None: a sequential cell):
    # ``rps`` then comes from the group's fit, and ranks and ties from its ratios.
    group: dict[str, Any] | None = None
    # Why a cell of an interleaved study took the per-cell path (cells.flags_json
    # "per_cell"); None in a group or a sequential study.
    per_cell: str | None = None
    robustness: float | None = None  # filled by robustness studies (issue 6) when stored
    robustness_detail: RobustnessView | None = None  # the fault phase behind the score
    robustness_curve: RobustnessCurve | None = None  # a fault sweep (report/robustness_curve)
    cold_start_s: float | None = None  # median over replicates
    idle_rss_mib: float | None = None  # median over replicates
    # Latency spectrum of the merged histogram: (quantile 0..1, latency ms).
    spectrum: list[tuple[float, float]] = field(default_factory=list)
    failure: FailureView | None = None

    @property
    def ok(self) -> bool:
        """True when the point has a throughput estimate."""
        return self.rps is not None

    @property
    def load_sort(self) -> float:
        """Sort key of the load point: connections (closed loop) or rate (open loop)."""
        return float(self.rate if self.rate is not None else self.connections)


@dataclass
class RankingRow:
    """A stack's place in one workload's ranking."""

    rank: int | None  # None for stacks without a result (failed)
    stack: StackView
    point: PointView
    vs_best: float | None = None  # rps / best rps (1.0 for the best)
    vs_worst: float | None = None  # rps / worst rps (1.0 for the slowest)
    # This row's rps relative to the row above (above / this), with its CI; None for the
    # first row. ``tied`` when that CI contains 1 (docs/report.md).
    vs_above: RankRatio | None = None

    @property
    def tied(self) -> bool:
        """Not significantly slower than the stack ranked above it."""
        return self.vs_above is not None and self.vs_above.tie


@dataclass
class Ranking:
    """One workload's ranking at one load selection ("peak" or a load point label)."""

    workload: str
    selection: str  # "peak" or a load point label ("c64")
    rows: list[RankingRow] = field(default_factory=list)

    @property
    def ranked(self) -> list[RankingRow]:
        return [r for r in self.rows if r.rank is not None]


@dataclass
class WorkloadView:
    """Everything the report shows about one workload."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    points: list[PointView] = field(default_factory=list)
    rankings: list[Ranking] = field(default_factory=list)  # "peak" first, then by load
    # Per-run points of the history figure (pywebbench.report.history.HistoryPoint), filled
    # only when the report covers more than two runs.
    history: list[Any] = field(default_factory=list)

    @property
    def load_points(self) -> list[str]:
        seen: dict[str, float] = {}
        for p in self.points:
            seen.setdefault(p.load_point, p.load_sort)
        return sorted(seen, key=lambda k: seen[k])

    def ranking(self, selection: str = "peak") -> Ranking:
        for r in self.rankings:
            if r.selection == selection:
                return r
        raise KeyError(selection)


@dataclass
class IterationSeries:
    """Per-second series of one iteration, placed on the cell's timeline."""

    kind: str  # "warmup" | "measured"
    idx: int
    t0_s: float  # start on the replicate's timeline (iterations laid end to end)
    duration_s: float
    rps_t: list[float] = field(default_factory=list)  # second marks, relative to t0
    rps: list[float] = field(default_factory=list)
    mem_t: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    cpu_pct: list[float] = field(default_factory=list)  # server tree CPU % between samples
    # Samples (index into mem_t) at which a new process had appeared in the tree since the
    # previous sample: a worker replaced (recycled) meanwhile.
    replaced_at: list[int] = field(default_factory=list)


@dataclass
class CellSeriesView:
    """Time series of one replicate of one cell (one fresh server process)."""

    id: str  # unique, safe for HTML ids: "cell-12-r0"
    stack_key: str
    workload: str
    load_point: str
    replicate: int
    iterations: list[IterationSeries] = field(default_factory=list)


@dataclass
class FailureView:
    """A recorded failure: where in the pipeline it happened and why."""

    phase: str
    reason: str
    at: str
    run_id: str
    stack_key: str | None = None
    workload: str | None = None
    load_point: str | None = None
    replicate: int | None = None
    detail: str | None = None


@dataclass
class RunView:
    """One stored run and the host it ran on."""

    id: str
    created_at: str
    finished_at: str | None
    status: str
    profile: str | None
    host: list[tuple[str, str]] = field(default_factory=list)  # ordered facts
    steady: list[tuple[str, str]] = field(default_factory=list)  # steady-state method
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class SyscallsPoint:
    """The traced windows (``--syscalls``) of one stack x workload x load point."""

    stack_key: str
    workload: str
    load_point: str
    replicates: int = 0  # traced windows behind the figures
    requests: int = 0  # requests completed in them, in total
    per_request: float | None = None  # all syscalls per request, median over windows
    by_name: list[tuple[str, float]] = field(default_factory=list)  # median per request, desc
    top_by_time: list[str] = field(default_factory=list)  # most system time first
    errors: list[str] = field(default_factory=list)  # why a window has no figures


@dataclass
class InstructionsPoint:
    """The instruction counts (``--instructions``) of one stack x workload x load point."""

    stack_key: str
    workload: str
    load_point: str
    counts: list[float] = field(default_factory=list)  # instructions per request, per count
    requests: int = 0  # requests counted, in total
    processes: int = 0  # processes counted (most over the counts)
    threads: int = 0  # threads counted (most over the counts)
    cpu_us_per_request: float | None = None  # the timed figure's server CPU per request
    errors: list[str] = field(default_factory=list)  # why a count has no figure

    @property
    def per_request(self) -> float | None:
        """Instructions per request: the median over the counts."""
        return statistics.median(self.counts) if self.counts else None

    @property
    def spread(self) -> float | None:
        """The largest count over the smallest (1.0: identical; needs 2 counts)."""
        return spread(self.counts)


@dataclass
class AxisPair:
    """One stack x workload x load point measured two ways along an axis: keep-alive and a
    connection per request (``--connection-mode keepalive,close``), or HTTP/1.1 and h2c
    (``--protocol http1,h2c``)."""

    stack_key: str
    workload: str
    load_point: str  # the base point's label ("c16"): keep-alive, HTTP/1.1
    base: PointView
    other: PointView  # "c16 close", "c16 h2c"


@dataclass
class RecyclingPoint:
    """One point of a worker recycling sweep (``--worker-max-requests``)."""

    stack_key: str
    base_key: str  # the stack key without its recycling setting: the sweep's group
    workload: str
    load_point: str
    max_requests: int  # 0 = never recycled
    point: PointView
    replaced: int | None = None  # workers replaced in a measured iteration, at least (most)


@dataclass
class AxesView:
    """The study axes beyond the rankings: syscalls, instructions, connection mode,
    protocol, worker recycling."""

    syscalls: list[SyscallsPoint] = field(default_factory=list)
    instructions: list[InstructionsPoint] = field(default_factory=list)
    connection: list[AxisPair] = field(default_factory=list)
    protocol: list[AxisPair] = field(default_factory=list)
    recycling: list[RecyclingPoint] = field(default_factory=list)


@dataclass
class MixPoint:
    """One stack x workload x load point loaded with a traffic mix: its endpoints' figures
    (:mod:`pywebbench.report.endpoints`)."""

    stack_key: str
    workload: str
    load_point: str
    endpoints: list[EndpointFigures] = field(default_factory=list)


@dataclass
class FlamePoint:
    """The sampled windows of one stack x workload x load point."""

    stack_key: str
    workload: str
    load_point: str
    windows: list[FlameWindow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def breakdown(self) -> Breakdown:
        return breakdown(self.windows)

    @property
    def requests(self) -> int:
        return sum(w.requests for w in self.windows)


@dataclass
class ReportView:
    """A whole report."""

    title: str
    generated_at: str
    pywebbench_version: str
    runs: list[RunView] = field(default_factory=list)
    stacks: dict[str, StackView] = field(default_factory=dict)
    workloads: list[WorkloadView] = field(default_factory=list)
    cells: list[CellSeriesView] = field(default_factory=list)
    failures: list[FailureView] = field(default_factory=list)
    knees: list[KneeView] = field(default_factory=list)  # docs/slo.md
    axes: AxesView = field(default_factory=AxesView)
    nodes: NodesView | None = None  # --executor ray: which node measured which cell
    capacity: CapacityView | None = None  # `report --capacity`: docs/capacity.md
    flames: list[FlamePoint] = field(default_factory=list)  # run --flamegraph
    mixes: list[MixPoint] = field(default_factory=list)  # run --mix: figures per endpoint
    ab: list[AbRow] = field(default_factory=list)  # pywebbench ab runs (docs/ab.md)
    #: The runs pooled cell by cell, or (one run) the line that its intervals are within-run
    #: only (docs/pooling.md).
    pooled: PooledView | None = None

    @property
    def has_robustness(self) -> bool:
        """True when any point carries a robustness score (then the column is shown)."""
        return any(p.robustness is not None for w in self.workloads for p in w.points)

    @property
    def generator_bound_points(self) -> list[PointView]:
        return [p for w in self.workloads for p in w.points if p.generator_bound]
