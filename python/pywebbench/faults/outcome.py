"""What a cell's fault phase found, as stored in the cell's flags (``flags.robustness``).

:func:`pywebbench.run.robustness.fault_phase` returns a :class:`CellRobustness`; the runner
stores it with :meth:`CellRobustness.to_flag`; the console and the report read it back with
:meth:`CellRobustness.from_flag`, so no reader picks keys out of an untyped dict. The stored
JSON keeps the layout earlier versions wrote (docs/faults.md), so their stores still read.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pywebbench.faults.session import FaultReport

__all__ = ["CellRobustness", "CurvePoint", "RobustnessCurve"]


class _Stored(BaseModel):
    # Keys a later version adds are ignored by an earlier reader, not an error.
    model_config = ConfigDict(extra="ignore", frozen=True)


class CurvePoint(_Stored):
    """One attack size of a sweep: how the good clients fared on a fresh server."""

    size: int
    retained_pct: float
    p99_faulted_ms: float | None
    p99_clean_ms: float | None
    clean_rps: float
    faulted_rps: float
    good_errors: int
    good_error_rate: float
    survived: bool
    score: float
    #: The largest share of a core other processes took from the pinned cores over the
    #: point's clean or faulted window (None: not known); ``interfered``: above the
    #: threshold after every re-measure (docs/interference.md).
    others_share: float | None = None
    interfered: bool = False
    remeasured: int = 0


class RobustnessCurve(_Stored):
    """An intensity sweep (``--faults 'slowloris=10,100,1000'``): every size and the breaking
    point, the smallest size at which the good clients kept under 50% of their clean
    throughput (None: not broken up to the largest size)."""

    kind: str
    sizes: list[int]
    points: list[CurvePoint]
    breaking_point: int | None
    fresh_share: float
    lead_s: float

    @property
    def largest(self) -> int:
        """The largest attack size measured."""
        return max((p.size for p in self.points), default=0)


class CellRobustness(_Stored):
    """The fault phase of a cell: the good clients clean and under the fault mix (the largest
    size's measurement when the mix is a sweep, whose every size is in ``curve``)."""

    # (the fields in the order earlier versions stored them)
    mix: str
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
    score: float  # 0-100 (faults/score.py)
    clean_rps: float
    faulted_rps: float
    good_unanswered: int = 0
    fresh_share: float = 0.0
    lead_s: float = 0.0
    recovery_s: float | None = None
    #: What the fault clients saw (:class:`FaultReport`'s JSON form).
    report: dict[str, Any] = {}
    curve: RobustnessCurve | None = None
    #: The interference guard over the clean and faulted windows (docs/interference.md):
    #: the largest share of a core other processes took over either (None: not known),
    #: whether it stayed above ``load.interference_max`` after ``remeasured`` re-measures.
    others_share: float | None = None
    interfered: bool = False
    remeasured: int = 0

    @property
    def fault_report(self) -> FaultReport:
        """What the fault clients saw, typed."""
        return FaultReport.from_dict(self.report)

    def to_flag(self) -> dict[str, Any]:
        """The JSON stored as ``flags.robustness`` (no ``curve`` key without a sweep)."""
        doc = self.model_dump(mode="json")
        if doc["curve"] is None:
            del doc["curve"]
        return doc

    @classmethod
    def from_flag(cls, value: object) -> CellRobustness | None:
        """The stored fault phase, or None where there is none (or only a bare score, as the
        earliest versions stored)."""
        if not isinstance(value, dict):
            return None
        try:
            return cls.model_validate(value)
        except ValidationError:
            return None
