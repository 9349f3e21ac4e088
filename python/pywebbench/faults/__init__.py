"""Robustness studies: misbehaving clients mixed into the load, and a robustness score.

- :mod:`pywebbench.faults.mix`: fault kinds, mixes (``--faults default`` or
  ``slowloris=50,reset-mid-response=10/s``), :func:`parse_mix`.
- :mod:`pywebbench.faults.session`: :class:`FaultSession` runs the engine's fault clients
  (Rust, GIL released) beside a load run; :class:`FaultReport` is what they saw.
- :mod:`pywebbench.faults.score`: :func:`robustness` compares the clean and the faulted run.
- :mod:`pywebbench.faults.study`: :func:`measure_robustness` does all of it for one server.

See docs/faults.md.
"""

from pywebbench.faults.mix import (
    DEFAULT_MIX,
    KINDS,
    NAMED_MIXES,
    FaultKindInfo,
    FaultMixError,
    FaultSpec,
    format_mix,
    parse_mix,
)
from pywebbench.faults.score import Measure, Robustness, measure_of, robustness
from pywebbench.faults.session import (
    FaultReport,
    FaultSession,
    Finding,
    HeldSummary,
    KindReport,
    target_of,
)
from pywebbench.faults.study import RobustnessRun, answered_normally, measure_robustness

__all__ = [
    "DEFAULT_MIX",
    "KINDS",
    "NAMED_MIXES",
    "FaultKindInfo",
    "FaultMixError",
    "FaultReport",
    "FaultSession",
    "FaultSpec",
    "Finding",
    "HeldSummary",
    "KindReport",
    "Measure",
    "Robustness",
    "RobustnessRun",
    "answered_normally",
    "format_mix",
    "measure_of",
    "measure_robustness",
    "parse_mix",
    "robustness",
    "target_of",
]
