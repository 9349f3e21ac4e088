"""The robustness of one stack: the same load measured clean and under a fault mix.

The score (0-100, higher is better; documented in docs/faults.md)::

    retained   = min(1, rps_faulted / rps_clean)
    latency    = min(1, p99_clean / p99_faulted)
    errors     = max(0, 1 - 10 * error_rate_faulted)     # 10 % failed good requests -> 0
                 (0 when no good request completed under faults)
    malformed  = mean over malformed kinds run of 1 (rejected or closed), 0.5 (5xx or no
                 answer), 0 (accepted, or a smuggled request answered); 1 if none ran
    score      = 100 * (0.5 retained + 0.2 latency + 0.15 errors + 0.15 malformed)
                 * (1 if it answered normally after the fault phase else 0.5)
                 * (1 if the server process survived else 0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pywebbench.faults.session import FaultReport
from pywebbench.load.result import LoadResult

__all__ = ["Measure", "Robustness", "measure_of", "robustness"]

W_RETAINED, W_LATENCY, W_ERRORS, W_MALFORMED = 0.5, 0.2, 0.15, 0.15
ERROR_RATE_FOR_ZERO = 0.10


@dataclasses.dataclass(frozen=True)
class Measure:
    """The numbers the score needs from one load run of the good clients."""

    rps: float
    p99_us: float | None
    #: good requests answered: a 2xx, or with a traffic mix a status the request's entry
    #: expects.
    requests: int
    #: transport errors (timeouts included) plus non-2xx responses seen by the good clients
    #: (with a mix: statuses their entries do not expect, check_failed), plus the requests
    #: left unanswered at the end of a run that stalled.
    errors: int
    #: Of ``errors``: requests still unanswered at the end of a run whose last second (or
    #: more) completed nothing. They never completed, so they count as timeouts, as they do
    #: in a run long enough for the timeout to fire; p99 is then at least the stall.
    unanswered: int = 0

    @property
    def error_rate(self) -> float:
        """Failed good requests over all good requests attempted."""
        total = self.requests + self.errors
        return self.errors / total if total else 0.0


def measure_of(result: LoadResult | Mapping[str, Any]) -> Measure:
    """A :class:`Measure` from a ``pywebbench.load.LoadResult`` (or its JSON document)."""
    r = LoadResult.of(result)
    p99 = float(r.latency.summary.p99 or 0)
    stalled_s = r.stalled_tail_s() if r.requests else r.duration_s
    unanswered = r.connections.in_flight_at_end if stalled_s >= 1.0 or not r.requests else 0
    total = r.requests + r.errors + unanswered
    if unanswered and unanswered >= 0.01 * total:
        # More than 1 % never answered: the 99th percentile is at least their wait.
        p99 = max(p99, stalled_s * 1e6)
    answered = r.ok_requests
    if r.spec.mix:  # a status its entry expects is an answer (a 404 page's 404s), any other
        failed = r.error_classes.get("check_failed")  # is already an error: check_failed
        answered = r.requests - (failed.count if failed is not None else 0)
    return Measure(
        rps=r.rps,
        p99_us=p99 or None,
        requests=answered,
        errors=r.errors + r.non_2xx + unanswered,
        unanswered=unanswered,
    )


@dataclasses.dataclass(frozen=True)
class Robustness:
    """Per stack: how the good clients fared under the fault mix, and the score."""

    retained_pct: float
    p99_clean_ms: float | None
    p99_faulted_ms: float | None
    good_errors: int
    good_error_rate: float
    survived: bool
    answered_after: bool
    #: malformed kind -> worst class (rejected, closed, timed_out, server_error, accepted).
    malformed: dict[str, str]
    #: malformed kinds accepted as valid, and "smuggle" if a hidden request got an answer.
    malformed_accepted: list[str]
    score: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def _kind_points(cls: str | None) -> float:
    return {"rejected": 1.0, "closed": 1.0, "server_error": 0.5, "timed_out": 0.5}.get(
        cls or "", 0.0
    )


def robustness(
    clean: Measure,
    faulted: Measure,
    report: FaultReport | None,
    *,
    survived: bool,
    answered_after: bool,
) -> Robustness:
    """The robustness of one stack (see the module docstring for the formula)."""
    retained = min(1.0, faulted.rps / clean.rps) if clean.rps > 0 else 0.0
    if clean.p99_us and faulted.p99_us:
        latency = min(1.0, clean.p99_us / faulted.p99_us)
    else:
        latency = 0.0 if faulted.requests == 0 else 1.0
    # No good request completed at all: the good clients saw nothing but failure.
    errors = (
        0.0 if faulted.requests == 0 else max(0.0, 1.0 - faulted.error_rate / ERROR_RATE_FOR_ZERO)
    )
    malformed: dict[str, str] = {}
    accepted: list[str] = []
    points: list[float] = []
    if report is not None:
        smuggled = any(f.what == "smuggled-request-answered" for f in report.findings)
        for name, k in report.kinds.items():
            cls = k.classification()
            if cls is None:
                continue
            if k.kind == "smuggle" and smuggled:
                cls = "accepted"
            malformed[name] = cls
            points.append(_kind_points(cls))
            if cls == "accepted":
                accepted.append(name)
    malformed_factor = sum(points) / len(points) if points else 1.0
    score = 100.0 * (
        W_RETAINED * retained
        + W_LATENCY * latency
        + W_ERRORS * errors
        + W_MALFORMED * malformed_factor
    )
    if not answered_after:
        score *= 0.5
    if not survived:
        score = 0.0
    return Robustness(
        retained_pct=round(100.0 * (faulted.rps / clean.rps if clean.rps > 0 else 0.0), 1),
        p99_clean_ms=clean.p99_us / 1000.0 if clean.p99_us else None,
        p99_faulted_ms=faulted.p99_us / 1000.0 if faulted.p99_us else None,
        good_errors=faulted.errors,
        good_error_rate=faulted.error_rate,
        survived=survived,
        answered_after=answered_after,
        malformed=malformed,
        malformed_accepted=sorted(accepted),
        score=round(score, 1),
    )
