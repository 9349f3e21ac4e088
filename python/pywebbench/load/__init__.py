"""The typed Python face of the Rust load engine (``pywebbench._engine``).

::

    from pywebbench.load import LoadSpec, run_load

    result = run_load(LoadSpec(url="http://127.0.0.1:8080/", connections=64, duration_s=10))
    print(result.rps, result.latency.summary.p99, result.error_classes)

Spec and result fields, error classes and how latency is measured: docs/load-engine.md.
"""

from pywebbench.load.agent import (
    LoadAgent,
    LoadInterrupted,
    LoadProgress,
    LocalAgent,
    ProgressFn,
    run_load,
)
from pywebbench.load.histogram import Histogram, HistSummary
from pywebbench.load.result import (
    ConnStats,
    ErrorEntry,
    GeneratorStats,
    HistData,
    LoadResult,
    OpenLoopStats,
    SecondStats,
    ThreadStats,
    WarmupStats,
)
from pywebbench.load.spec import LoadSpec

#: The stable error class names (docs/load-engine.md).
ERROR_CLASSES = (
    "connect_refused",
    "connect_timeout",
    "connect_error",
    "reset_before_response",
    "reset_mid_body",
    "eof_before_headers",
    "eof_mid_body",
    "malformed_status_line",
    "malformed_headers",
    "malformed_chunked",
    "header_timeout",
    "body_timeout",
    "fd_exhaustion",
    "addr_unavailable",
    "write_error",
    "check_failed",
    "queue_overflow",
)

__all__ = [
    "ERROR_CLASSES",
    "ConnStats",
    "ErrorEntry",
    "GeneratorStats",
    "HistData",
    "HistSummary",
    "Histogram",
    "LoadAgent",
    "LoadInterrupted",
    "LoadProgress",
    "LoadResult",
    "LoadSpec",
    "LocalAgent",
    "OpenLoopStats",
    "ProgressFn",
    "SecondStats",
    "ThreadStats",
    "WarmupStats",
    "run_load",
]
