"""Running a load spec: `run_load()`, the `LoadAgent` protocol and the in-process `LocalAgent`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pywebbench import _engine
from pywebbench.load.result import LoadResult
from pywebbench.load.spec import LoadSpec


@dataclass(frozen=True)
class LoadProgress:
    """A live snapshot, handed to progress callbacks every ``interval_s``.

    ``requests``/``errors``/``timeouts`` are cumulative for the measured phase;
    ``rps`` is the rate over the last interval (warm-up included while it runs).
    """

    elapsed_s: float
    phase: str  # "warmup" | "measure" | "done"
    warmup_s: float
    duration_s: float | None
    max_requests: int | None
    requests: int
    errors: int
    timeouts: int
    warmup_requests: int
    rps: float


#: Called with each progress snapshot; returning True stops the run early with a complete
#: (not interrupted) result: "enough", e.g. a warm-up that reached its steady state.
ProgressFn = Callable[[LoadProgress], bool | None]


class LoadInterrupted(KeyboardInterrupt):
    """Raised by ``run_load(..., raise_on_interrupt=True)`` on Ctrl-C; ``.result`` holds
    what was measured until then."""

    def __init__(self, result: LoadResult) -> None:
        super().__init__("load run interrupted")
        self.result = result


def run_load(
    spec: LoadSpec,
    progress: ProgressFn | None = None,
    *,
    interval_s: float = 0.25,
    raise_on_interrupt: bool = False,
) -> LoadResult:
    """Run ``spec`` in this process and return its result.

    The engine runs on its own threads with the GIL released; ``progress`` (if given) is called
    with a :class:`LoadProgress` every ``interval_s`` seconds. On Ctrl-C the engine stops within
    a fraction of a second and the partial result is returned with ``interrupted=True`` (or,
    with ``raise_on_interrupt=True``, raised inside :class:`LoadInterrupted`). An exception
    raised by ``progress`` other than KeyboardInterrupt stops the run and propagates;
    ``progress`` returning True stops it with a complete result (its duration is the time
    actually run).

    Raises:
        ValueError: the spec is invalid (the message names the field).
        OSError: the system refused, e.g. not enough file descriptors.
    """
    spec.validate()
    callback = None
    if progress is not None:
        last = [0.0, 0]

        def callback(snapshot_json: str) -> bool:
            d = json.loads(snapshot_json)
            done = int(d["requests"]) + int(d["warmup_requests"])
            dt = float(d["elapsed_s"]) - last[0]
            rps = (done - last[1]) / dt if dt > 0 else 0.0
            last[0], last[1] = float(d["elapsed_s"]), done
            return bool(progress(LoadProgress(rps=max(rps, 0.0), **d)))

    text = _engine.run_load(spec.to_json(), callback, interval_s)
    result = LoadResult.from_json(text)
    if result.interrupted and raise_on_interrupt:
        raise LoadInterrupted(result)
    return result


class LoadAgent(Protocol):
    """Something that runs a load spec and returns its result: in this process
    (:class:`LocalAgent`) or, later, on another machine. The runner only uses this."""

    def run(self, spec: LoadSpec, progress: ProgressFn | None = None) -> LoadResult: ...


class LocalAgent:
    """Runs load in this process (see :func:`run_load`)."""

    name = "local"

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s

    def run(self, spec: LoadSpec, progress: ProgressFn | None = None) -> LoadResult:
        """Run ``spec`` here; Ctrl-C returns the partial result with ``interrupted=True``."""
        return run_load(spec, progress, interval_s=self.interval_s)
