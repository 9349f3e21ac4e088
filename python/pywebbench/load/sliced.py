"""Interleaved slices: one engine run that loads several targets in turn (the engine's
``slices`` module; docs/load-engine.md, "Interleaved slices").

::

    from pywebbench.load import LoadSpec
    from pywebbench.load.sliced import SlicePlan, run_sliced

    plan = SlicePlan(load=LoadSpec(url="http://x/", connections=64, warmup_s=2),
                     targets=["http://127.0.0.1:8001/", "http://127.0.0.1:8002/"],
                     slice_s=1.0, rounds=60)
    result = run_sliced(plan)
    for s in result.slices:
        print(s.round, s.target, s.rps)

Each target gets its own connections and generator threads; only one target is loaded at a
time; the order of the targets within each round is shuffled with ``seed``. Keep-alive
connections stay open across slices; with ``load.keepalive`` False (a connection per
request) or ``load.requests_per_connection``, connections are opened inside the target's
slices only. Targets may differ in slice length and first touch (``slice_s_by_target``,
``warmup_s_by_target``: a PyPy process beside CPython ones wants longer slices and a longer
touch), and each may be a server on a unix socket of its own (``unix_socket_by_target``, as a
load's ``unix_socket``: the URL still gives the path and the Host header). With
``load.rate`` (an open loop, constant or Poisson arrivals) every target is offered that rate
in its windows only: latency runs from each send's intended time, and a send not sent by
its window's end is dropped and counted in the slice's ``unsent``; such a run's progress
snapshots carry each slice's histogram.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from pywebbench import _engine
from pywebbench.load.result import EndpointStats, ErrorEntry, HistData, ThreadStats
from pywebbench.load.spec import LoadSpec

__all__ = [
    "SlicePlan",
    "SliceProgress",
    "SliceStats",
    "SlicedResult",
    "SlicedProgressFn",
    "TargetStats",
    "run_sliced",
]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SlicePlan(_Record):
    """What to run: the load shape (``load``: connections and threads per target, request,
    pinning, timeouts, connection mode; its ``url`` is not used, nor may it name a
    ``unix_socket``) and the plan."""

    load: LoadSpec
    targets: list[str] = Field(
        description="One URL per target (variant), >= 2, distinct (with their unix sockets)."
    )
    unix_socket_by_target: list[str] = Field(
        default_factory=list,
        description="Each target's unix socket, one per target ('' for one over TCP); empty: "
        "every target over TCP. The target's URL still gives the path and the Host header.",
    )
    slice_s: float = Field(
        description="Counted seconds of each slice (checked but unused with slice_s_by_target)."
    )
    slice_s_by_target: list[float] = Field(
        default_factory=list,
        description="Counted seconds of each target's slices, one per target (>= 0.05 each); "
        "empty: slice_s for every target.",
    )
    warmup_s_by_target: list[float] = Field(
        default_factory=list,
        description="Each target's first touch (load alone before the first round), one per "
        "target (>= 0 each); empty: load.warmup_s for every target.",
    )
    settle_s: float = Field(0.2, description="Uncounted seconds of load before each slice.")
    settle_s_by_target: list[float] = Field(
        default_factory=list,
        description="The settle after each target's slices (and first touch), one per target "
        "(>= 0 each): the next window's uncounted start, while that target's requests in "
        "flight drain; empty: settle_s after every target.",
    )
    rounds: int = Field(description="Rounds planned (one slice per target each).")
    seed: int = 0

    def unix_socket_of(self, target: int) -> str | None:
        """The unix socket ``target`` is reached over (None: TCP)."""
        return (self.unix_socket_by_target[target] or None) if self.unix_socket_by_target else None

    def slice_s_of(self, target: int) -> float:
        """Counted seconds of ``target``'s slices."""
        return self.slice_s_by_target[target] if self.slice_s_by_target else self.slice_s

    def warmup_s_of(self, target: int) -> float:
        """Seconds of ``target``'s first touch (its warm-up window)."""
        return self.warmup_s_by_target[target] if self.warmup_s_by_target else self.load.warmup_s

    def settle_s_after(self, target: int | None) -> float:
        """The settle of the window after one of ``target``'s (None: after none)."""
        if target is None or not self.settle_s_by_target:
            return self.settle_s
        return self.settle_s_by_target[target]

    def planned_s(self) -> float:
        """Seconds the whole plan lasts (warm-up windows included), summed as the engine's
        ``SlicedSpec::planned_s``: every target's first touch, then ``rounds`` times one
        settle and one slice of every target. With settles per target the engine sums each
        window's settle in the rounds' order, which it alone draws: this is within one
        settle of its figure."""
        touches = one_round = 0.0
        for t in range(len(self.targets)):  # in order, uncompensated (not sum()): as Rust's
            touches += self.warmup_s_of(t)
            one_round += self.settle_s_after(t) + self.slice_s_of(t)
        return touches + self.rounds * one_round

    def to_json(self) -> str:
        """The plan as the engine's JSON document."""
        doc = self.model_dump(mode="json")
        doc["load"] = self.load.to_dict()
        return json.dumps(doc)


class SliceStats(_Record):
    """One counted slice of one target (the engine's ``SliceStats``)."""

    index: int
    round: int
    target: int
    requests: int
    errors: int
    timeouts: int
    #: An open loop: sends due in the counted part, and sends of the window dropped at its
    #: end without being sent (queued, or waiting for a connection); 0 in a closed loop.
    offered: int = 0
    unsent: int = 0
    duration_s: float
    rps: float
    started_at: float
    ended_at: float
    p50_us: int
    p99_us: int
    #: CPU seconds the target's generator threads spent over the counted part, summed.
    generator_cpu_s: float = 0.0
    #: Seconds those threads were runnable but waited for a CPU, summed (None: the kernel
    #: did not say).
    generator_wait_s: float | None = None
    #: The generator limited this slice (the engine's rule: its threads busy 90% of it, or
    #: waiting for a CPU 5% of it while busy or waiting half of it): the figure may be low.
    generator_bound: bool = False
    latency: HistData | None = None
    #: A mix: each endpoint's figures in this slice (as a run's ``endpoints``); empty
    #: without a mix and in progress snapshots.
    endpoints: list[EndpointStats] = []


class TargetStats(_Record):
    """Whole-run figures of one target, settle parts and warm-up included."""

    url: str
    #: The unix socket it was reached over (None: TCP).
    unix_socket: str | None = None
    requests: int
    errors: int
    error_classes: dict[str, ErrorEntry]
    attempts: int
    established: int
    reopened: int


class SlicedResult(_Record):
    """Everything a sliced run measured."""

    version: int
    spec: dict[str, object]
    interrupted: bool
    stopped_early: bool
    elapsed_s: float
    slices: list[SliceStats]
    targets: list[TargetStats]
    threads: list[ThreadStats]
    warnings: list[str]


class SliceProgress(_Record):
    """A live snapshot: the slices complete so far (without histograms)."""

    elapsed_s: float
    planned_s: float
    slices: list[SliceStats]


class _NewSlices(_Record):
    """The engine's snapshot: the slices completed since its previous one."""

    elapsed_s: float
    planned_s: float
    new_slices: list[SliceStats]


#: Called with each snapshot; True ends the run early with a complete result.
SlicedProgressFn = Callable[[SliceProgress], bool | None]


def run_sliced(
    plan: SlicePlan, progress: SlicedProgressFn | None = None, *, interval_s: float = 0.25
) -> SlicedResult:
    """Run ``plan`` on the engine's threads; ``progress`` sees every complete slice.

    Raises ValueError naming the field for a bad plan, OSError when the system refuses.
    """

    done: list[SliceStats] = []  # the engine gives each slice once; the callback sees all

    def relay(snapshot: str) -> bool:
        assert progress is not None
        new = _NewSlices.model_validate_json(snapshot)
        done.extend(new.new_slices)
        so_far = SliceProgress.model_construct(
            elapsed_s=new.elapsed_s, planned_s=new.planned_s, slices=list(done)
        )
        return bool(progress(so_far))

    text = _engine.run_sliced(
        plan.to_json(), relay if progress is not None else None, interval_s=interval_s
    )
    return SlicedResult.model_validate_json(text)
