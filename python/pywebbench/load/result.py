"""`LoadResult`: everything a load run measured, typed as the engine writes it.

Each model mirrors one struct of crates/engine/src/result/mod.rs, field for field
(docs/load-engine.md documents them). Unknown keys are refused and every key the engine always
writes is required, so a drift between the engine and these models fails loudly
(tests/load/test_contract.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from pywebbench import _engine
from pywebbench.load.histogram import Histogram, HistSummary
from pywebbench.load.spec import LoadMode, LoadSpec


class _EngineRecord(BaseModel):
    """A part of the engine's result document: immutable, no key the engine does not write."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class HistData(_EngineRecord):
    """A stored histogram: its encoding (HdrHistogram V2+DEFLATE, base64) and its summary."""

    hist: str
    summary: HistSummary

    @property
    def histogram(self) -> Histogram:
        """The histogram itself, for quantiles and merging."""
        return Histogram(self.hist)


class ErrorEntry(_EngineRecord):
    """Count and first example message of one error class."""

    count: int
    example: str


class SecondStats(_EngineRecord):
    """One second of the measured phase (``t`` = seconds since it started)."""

    t: int
    completed: int
    errors: int
    p50_us: int
    p99_us: int
    #: Latency histogram of this second (2 significant digits), for re-merging.
    hist: str
    #: Open loop: the offered rate of this second (requests/s; the mean over the measured
    #: part for the last one), beside the achieved ``completed``. None otherwise.
    offered_rate: float | None = None


class OpenLoopStats(_EngineRecord):
    """Open-loop figures: offered vs achieved rate, queueing."""

    arrival: str
    offered_rate: float
    offered: int
    achieved_rate: float
    queue_limit: int
    queued: int
    queue_max: int
    unsent_at_end: int


class ConnStats(_EngineRecord):
    """Connections: targeted, attempted, established, reopened, requests per connection."""

    targeted: int
    attempts: int
    established: int
    reopened: int
    in_flight_at_end: int
    pipeline_resent: int
    requests_per_connection: HistSummary
    #: Local addresses the connections were spread over (empty: the kernel's choice).
    source_addresses: list[str] = []


class WarmupStats(_EngineRecord):
    """The warm-up phase, kept apart from the measured figures."""

    duration_s: float
    requests: int
    errors: int
    timeouts: int
    rps: float
    p50_us: int
    p99_us: int


class ThreadStats(_EngineRecord):
    """One generator thread's self-check (measured phase)."""

    cpu: int | None
    cpu_s: float
    wall_s: float
    busy: float
    #: Open loop: CPU seconds spent spinning for exact send times (in ``cpu_s``, not ``busy``).
    spin_s: float
    #: Seconds the thread was runnable but waited for a CPU (kernel schedstat); None: unknown.
    run_delay_s: float | None
    requests: int
    connections: int


class GeneratorStats(_EngineRecord):
    """Generator self-check: CPU used, CPU per request, and whether it was the bottleneck."""

    threads: list[ThreadStats]
    cpu_s: float
    cpu_us_per_request: float
    nofile_limit: int
    generator_bound: bool


class WsStats(_EngineRecord):
    """WebSocket (protocol ``ws``): the upgrade handshakes of the measured phase."""

    #: Size of each message (bytes).
    message_bytes: int
    #: Upgrades completed (101 with the right Sec-WebSocket-Accept).
    handshakes: int
    #: Handshakes per second: connections opened per second.
    handshake_rate: float
    #: From writing the upgrade request to its 101 answer (microseconds).
    handshake_time: HistData


class EndpointStats(_EngineRecord):
    """One endpoint of a traffic mix (docs/mix.md): its requests, errors and latencies in the
    measured phase, as the whole run's but for its requests only."""

    name: str
    #: Its entries' summed weight, and that weight's share of the mix (0..1).
    weight: float
    weight_share: float
    #: Responses completed (any status).
    requests: int
    #: Failed requests drawn for this endpoint (errors before any request was drawn, e.g. a
    #: queue overflow, are in the whole run's figures only), and by class.
    errors: int
    error_classes: dict[str, int]
    timeouts: int
    status_counts: dict[str, int]
    #: Mergeable, as the whole run's ``latency``.
    latency: HistData


class LoadResult(_EngineRecord):
    """The result of one load run.

    ``latency`` is measured from the actual write in closed loop, and from the intended send
    time (coordinated-omission corrected, queue wait included) in open loop, where
    ``service_time`` (from the actual write) and ``schedule_lag`` are also given. Timeouts are
    in ``latency`` as censored values (>= the timeout), so ``latency.summary.count`` is
    ``requests + timeouts``.
    """

    version: int
    spec: LoadSpec
    mode: LoadMode
    #: The I/O backend that ran: ``uring`` or ``epoll`` (``mixed`` in a merge of both);
    #: documents from before the io_uring backend ran on epoll.
    io: str = "epoll"
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
    #: protocol ws only: the handshakes (messages are the requests). The engine omits the
    #: key otherwise.
    websocket: WsStats | None = None
    connections: ConnStats
    per_second: list[SecondStats]
    warmup: WarmupStats | None
    generator: GeneratorStats
    warnings: list[str]
    #: What the fault clients saw, when the spec had ``faults`` (docs/faults.md; read it with
    #: ``pywebbench.faults.FaultReport.from_dict``). The engine omits the key otherwise.
    faults: dict[str, Any] | None = None
    #: Unix ns at which the engine actually started (after waiting for the spec's
    #: ``start_at_unix_ns``); None in results stored before it was recorded.
    launched_at_unix_ns: int | None = None
    #: A mix: each endpoint's figures, in the mix's order (docs/mix.md). The engine omits
    #: the key otherwise.
    endpoints: list[EndpointStats] = []

    @model_serializer(mode="wrap")
    def _engine_layout(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        for optional in ("faults", "launched_at_unix_ns", "websocket"):
            if doc[optional] is None:
                del doc[optional]  # as the engine writes it
        if not doc["endpoints"]:
            del doc["endpoints"]
        return doc

    @property
    def ok_requests(self) -> int:
        """Responses with a 2xx status; over WebSocket, every echoed message (an echo that
        differs is an error, ``ws_echo_mismatch``: messages have no status)."""
        if self.spec.protocol == "ws":
            return self.requests
        return sum(n for code, n in self.status_counts.items() if code.startswith("2"))

    @property
    def non_2xx(self) -> int:
        """Responses with any other status; 0 with a mix, whose entries say which statuses
        they expect (a 404 page's 404s are its answers, another status is already an error:
        ``check_failed``)."""
        if self.spec.mix:
            return 0
        return self.requests - self.ok_requests

    @property
    def generator_bound(self) -> bool:
        """The generator may have limited the result (see ``warnings``)."""
        return self.generator.generator_bound

    def stalled_tail_s(self) -> float:
        """Seconds at the end of the per-second series with no completed response.

        A server that answers for a while and then hangs shows up here even though the run
        as a whole has requests. The last, partial second is not counted.
        """
        full = [s for s in self.per_second if s.t + 1 <= self.duration_s + 1e-6]
        stalled = 0
        for second in reversed(full):
            if second.completed > 0:
                break
            stalled += 1
        return float(stalled)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> LoadResult:
        """Build from the engine's JSON document (as a dict)."""
        return cls.model_validate(doc)

    @classmethod
    def from_json(cls, text: str) -> LoadResult:
        """Parse the engine's JSON result."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def of(cls, result: LoadResult | Mapping[str, Any]) -> LoadResult:
        """``result`` itself, or the result its JSON document describes."""
        return result if isinstance(result, LoadResult) else cls.from_dict(result)

    def to_dict(self) -> dict[str, Any]:
        """The result as the engine's JSON document (a plain dict)."""
        return self.model_dump(mode="json")

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


class IterationFigures(TypedDict):
    """The summary figures of one load result that the store keeps per iteration (the load
    columns of the ``iterations`` table, docs/store-schema.md)."""

    duration_s: float
    requests: int
    errors: int
    non_2xx: int
    timeouts: int
    rps: float
    latency_mean_us: float
    latency_p50_us: float
    latency_p90_us: float
    latency_p99_us: float
    latency_p999_us: float
    latency_max_us: float
    bytes_in: int
    bytes_out: int
    generator_cpu_s: float
    generator_bound: bool
    interrupted: bool


def iteration_figures(result: LoadResult) -> IterationFigures:
    """The store's per-iteration summary of ``result`` (latency: the ``latency`` histogram,
    timeouts included as censored values)."""
    lat = result.latency.summary
    return IterationFigures(
        duration_s=result.duration_s,
        requests=result.requests,
        errors=result.errors,
        non_2xx=result.non_2xx,
        timeouts=result.timeouts,
        rps=result.rps,
        latency_mean_us=lat.mean,
        latency_p50_us=float(lat.p50),
        latency_p90_us=float(lat.p90),
        latency_p99_us=float(lat.p99),
        latency_p999_us=float(lat.p999),
        latency_max_us=float(lat.max),
        bytes_in=result.bytes_in,
        bytes_out=result.bytes_out,
        generator_cpu_s=result.generator.cpu_s,
        generator_bound=result.generator_bound,
        interrupted=result.interrupted,
    )
