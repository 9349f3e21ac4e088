"""`LoadResult`: everything a load run measured, typed (fields: docs/load-engine.md)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from pywebbench import _engine
from pywebbench.load.histogram import Histogram, HistSummary
from pywebbench.load.spec import LoadSpec


def _pick(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``d`` that are fields of dataclass ``cls`` (newer engines may add fields)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


@dataclass(frozen=True)
class HistData:
    """A stored histogram: its encoding and its summary."""

    hist: str
    summary: HistSummary

    @property
    def histogram(self) -> Histogram:
        return Histogram(self.hist)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HistData:
        return cls(hist=d["hist"], summary=HistSummary.from_dict(d.get("summary", {})))


@dataclass(frozen=True)
class ErrorEntry:
    """Count and first example message of one error class."""

    count: int
    example: str


@dataclass(frozen=True)
class SecondStats:
    """One second of the measured phase (``t`` = seconds since it started)."""

    t: int
    completed: int
    errors: int
    p50_us: int
    p99_us: int
    hist: str


@dataclass(frozen=True)
class OpenLoopStats:
    """Open-loop figures: offered vs achieved rate, queueing."""

    arrival: str
    offered_rate: float
    offered: int
    achieved_rate: float
    queue_limit: int
    queued: int
    queue_max: int
    unsent_at_end: int


@dataclass(frozen=True)
class ConnStats:
    """Connections: targeted, attempted, established, reopened, requests per connection."""

    targeted: int
    attempts: int
    established: int
    reopened: int
    in_flight_at_end: int
    pipeline_resent: int
    requests_per_connection: HistSummary

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConnStats:
        kw = _pick(cls, d)
        kw["requests_per_connection"] = HistSummary.from_dict(d.get("requests_per_connection", {}))
        return cls(**kw)


@dataclass(frozen=True)
class WarmupStats:
    """The warm-up phase, kept apart from the measured figures."""

    duration_s: float
    requests: int
    errors: int
    timeouts: int
    rps: float
    p50_us: int
    p99_us: int


@dataclass(frozen=True)
class ThreadStats:
    """One generator thread's self-check (measured phase)."""

    cpu: int | None
    cpu_s: float
    wall_s: float
    busy: float
    requests: int
    connections: int
    #: Open loop: CPU seconds spent spinning for exact send times (in ``cpu_s``, not ``busy``).
    spin_s: float = 0.0
    #: Seconds the thread was runnable but waited for a CPU (kernel schedstat); None: unknown.
    run_delay_s: float | None = None


@dataclass(frozen=True)
class GeneratorStats:
    """Generator self-check: CPU used, CPU per request, and whether it was the bottleneck."""

    threads: list[ThreadStats]
    cpu_s: float
    cpu_us_per_request: float
    nofile_limit: int
    generator_bound: bool

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GeneratorStats:
        kw = _pick(cls, d)
        kw["threads"] = [ThreadStats(**_pick(ThreadStats, t)) for t in d.get("threads", [])]
        return cls(**kw)


@dataclass(frozen=True)
class LoadResult:
    """The result of one load run.

    ``latency`` is measured from the actual write in closed loop, and from the intended send
    time (coordinated-omission corrected, queue wait included) in open loop, where
    ``service_time`` (from the actual write) and ``schedule_lag`` are also given. Timeouts are
    in ``latency`` as censored values (>= the timeout), so ``latency.summary.count`` is
    ``requests + timeouts``.
    """

    version: int
    spec: LoadSpec
    mode: str
    interrupted: bool
    started_at: float
    duration_s: float
    requests: int
    errors: int
    timeouts: int
    rps: float
    status_counts: dict[str, int]
    error_classes: dict[str, ErrorEntry]
    bytes_in: int
    bytes_out: int
    latency: HistData
    service_time: HistData | None
    schedule_lag: HistData | None
    open_loop: OpenLoopStats | None
    connections: ConnStats
    per_second: list[SecondStats]
    warmup: WarmupStats | None
    generator: GeneratorStats
    warnings: list[str] = field(default_factory=list)
    #: What the fault clients saw, when the spec had ``faults`` (docs/faults.md), as a dict.
    faults: dict[str, Any] | None = None

    @property
    def ok_requests(self) -> int:
        """Responses with a 2xx status."""
        return sum(n for code, n in self.status_counts.items() if code.startswith("2"))

    @property
    def non_2xx(self) -> int:
        """Responses with any other status."""
        return self.requests - self.ok_requests

    @property
    def generator_bound(self) -> bool:
        return self.generator.generator_bound

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadResult:
        """Build from the engine's JSON document (as a dict)."""

        def opt(key: str, build: Any) -> Any:
            v = d.get(key)
            return None if v is None else build(v)

        return cls(
            version=int(d["version"]),
            spec=LoadSpec.from_dict(d["spec"]),
            mode=d["mode"],
            interrupted=bool(d["interrupted"]),
            started_at=float(d["started_at"]),
            duration_s=float(d["duration_s"]),
            requests=int(d["requests"]),
            errors=int(d["errors"]),
            timeouts=int(d["timeouts"]),
            rps=float(d["rps"]),
            status_counts={str(k): int(v) for k, v in d["status_counts"].items()},
            error_classes={k: ErrorEntry(**v) for k, v in d["error_classes"].items()},
            bytes_in=int(d["bytes_in"]),
            bytes_out=int(d["bytes_out"]),
            latency=HistData.from_dict(d["latency"]),
            service_time=opt("service_time", HistData.from_dict),
            schedule_lag=opt("schedule_lag", HistData.from_dict),
            open_loop=opt("open_loop", lambda v: OpenLoopStats(**_pick(OpenLoopStats, v))),
            connections=ConnStats.from_dict(d["connections"]),
            per_second=[SecondStats(**_pick(SecondStats, s)) for s in d.get("per_second", [])],
            warmup=opt("warmup", lambda v: WarmupStats(**_pick(WarmupStats, v))),
            generator=GeneratorStats.from_dict(d["generator"]),
            warnings=list(d.get("warnings", [])),
            faults=d.get("faults"),
        )

    @classmethod
    def from_json(cls, text: str) -> LoadResult:
        """Parse the engine's JSON result."""
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict[str, Any]:
        """The result as the engine's JSON document (a plain dict)."""
        d = dataclasses.asdict(self)
        d["spec"] = self.spec.to_dict()
        if self.faults is None:
            del d["faults"]  # as the engine writes it
        return d

    def to_json(self, indent: int | None = None) -> str:
        """The result as JSON text (the engine's document layout)."""
        return json.dumps(self.to_dict(), indent=indent)

    @staticmethod
    def merge(results: list[LoadResult]) -> LoadResult:
        """Merge results of runs made at the same time by several load agents (counts and
        histograms add up, rates add up, the longest duration is kept)."""
        if not results:
            raise ValueError("results: nothing to merge")
        return LoadResult.from_json(_engine.merge_results([r.to_json() for r in results]))


def result_document(result: LoadResult | dict[str, Any]) -> dict[str, Any]:
    """A load result as its JSON-ready document (docs/load-engine.md), from a
    :class:`LoadResult` or from that document itself."""
    return result if isinstance(result, dict) else result.to_dict()
