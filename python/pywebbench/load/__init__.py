"""The typed Python face of the Rust load engine (``pywebbench._engine``).

::

    from pywebbench.load import LoadSpec, run_load

    result = run_load(LoadSpec(url="http://127.0.0.1:8080/", connections=64, duration_s=10))
    print(result.rps, result.latency.summary.p99, result.error_classes)

Specs are validated by the engine's own rules; results are pydantic models of exactly what the
engine writes. Fields, error classes and how latency is measured: docs/load-engine.md.
"""

from pywebbench import _engine
from pywebbench.load.agent import (
    LoadAgent,
    LoadInterrupted,
    LoadProgress,
    LocalAgent,
    ProgressFn,
    run_load,
)
from pywebbench.load.histogram import Histogram, HistSummary
from pywebbench.load.rate_phases import parse_rate
from pywebbench.load.result import (
    ConnStats,
    EndpointStats,
    ErrorEntry,
    GeneratorStats,
    HistData,
    IterationFigures,
    LoadResult,
    OpenLoopStats,
    SecondStats,
    ThreadStats,
    WarmupStats,
    WsStats,
    iteration_figures,
)
from pywebbench.load.spec import LoadMode, LoadSpec, RatePhase, spec_for_request

#: The stable error class names (docs/load-engine.md), as the engine defines them.
ERROR_CLASSES: tuple[str, ...] = tuple(_engine.error_classes())

__all__ = [
    "ERROR_CLASSES",
    "ConnStats",
    "EndpointStats",
    "ErrorEntry",
    "GeneratorStats",
    "HistData",
    "HistSummary",
    "Histogram",
    "IterationFigures",
    "LoadAgent",
    "LoadInterrupted",
    "LoadMode",
    "LoadProgress",
    "LoadResult",
    "LoadSpec",
    "LocalAgent",
    "OpenLoopStats",
    "ProgressFn",
    "RatePhase",
    "SecondStats",
    "ThreadStats",
    "WarmupStats",
    "WsStats",
    "iteration_figures",
    "parse_rate",
    "run_load",
    "spec_for_request",
]
