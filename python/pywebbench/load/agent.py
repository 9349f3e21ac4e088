"""Running a load spec: `run_load()`, the `LoadAgent` protocol and the in-process `LocalAgent`.

An agent runs a plain load (:meth:`LoadAgent.run`) and a sliced one
(:meth:`LoadAgent.run_sliced`: several servers loaded in turn by one engine run,
:mod:`pywebbench.load.sliced`); the study, its interleaved groups and ``pywebbench ab`` load
only through an agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from pywebbench import _engine
from pywebbench.load.result import LoadResult
from pywebbench.load.sliced import SlicedProgressFn, SlicedResult, SlicePlan, run_sliced
from pywebbench.load.spec import LoadSpec


class LoadProgress(BaseModel):
    """A live snapshot (the engine's ``Progress``), handed to progress callbacks every
    ``interval_s``.

    ``requests``/``errors``/``timeouts`` are cumulative for the measured phase;
    ``rps`` is the rate over the last interval (warm-up included while it runs), worked out
    here from two snapshots.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    elapsed_s: float
    phase: Literal["warmup", "measure", "done"]
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


class _ProgressRelay:
    """Turns the engine's JSON snapshots into :class:`LoadProgress` for ``progress``, adding
    the rate over the last interval."""

    def __init__(self, progress: ProgressFn) -> None:
        self.progress = progress
        self.last_elapsed_s = 0.0
        self.last_done = 0

    def __call__(self, snapshot_json: str) -> bool:
        snapshot = json.loads(snapshot_json)
        done = int(snapshot["requests"]) + int(snapshot["warmup_requests"])
        elapsed = float(snapshot["elapsed_s"])
        dt = elapsed - self.last_elapsed_s
        rps = (done - self.last_done) / dt if dt > 0 else 0.0
        self.last_elapsed_s, self.last_done = elapsed, done
        snap = LoadProgress.model_validate({**snapshot, "rps": max(rps, 0.0)})
        return bool(self.progress(snap))  # True: enough, stop with a complete result


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
        ValueError: the spec cannot run (the message names the field), e.g. its host does
            not resolve.
        OSError: the system refused, e.g. not enough file descriptors.
    """
    relay = _ProgressRelay(progress) if progress is not None else None
    text = _engine.run_load(spec.to_json(), relay, interval_s)
    result = LoadResult.from_json(text)
    if result.interrupted and raise_on_interrupt:
        raise LoadInterrupted(result)
    return result


class LoadAgent(Protocol):
    """Something that runs a load spec and returns its result: in this process
    (:class:`LocalAgent`) or on other machines (``--load-agents``). The study runner and
    ``pywebbench ab`` only use this."""

    def run(self, spec: LoadSpec, progress: ProgressFn | None = None) -> LoadResult: ...

    def run_sliced(
        self, plan: SlicePlan, progress: SlicedProgressFn | None = None, *, interval_s: float
    ) -> SlicedResult: ...


class LocalAgent:
    """Runs load in this process (see :func:`run_load`)."""

    name = "local"

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s

    def run(self, spec: LoadSpec, progress: ProgressFn | None = None) -> LoadResult:
        """Run ``spec`` here; Ctrl-C returns the partial result with ``interrupted=True``."""
        return run_load(spec, progress, interval_s=self.interval_s)

    def run_sliced(
        self, plan: SlicePlan, progress: SlicedProgressFn | None = None, *, interval_s: float
    ) -> SlicedResult:
        """Run ``plan`` here (:func:`pywebbench.load.sliced.run_sliced`); ``progress`` sees
        every complete slice each ``interval_s``."""
        return run_sliced(plan, progress, interval_s=interval_s)
