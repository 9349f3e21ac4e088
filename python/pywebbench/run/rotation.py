"""The interleaved run: several server processes up at once on the server cores, loaded in
slices of the same rounds. One mechanism for a study's interleaved group
(:mod:`pywebbench.run.interleaved`) and for ``ab`` (:mod:`pywebbench.ab.session`), which is a
group of two sides (docs/steady-state.md#the-interleaved-study, docs/ab.md).

A :class:`Rotation` takes processes already started and verified (a
:class:`~pywebbench.bringup.ServerPool`'s), each a :class:`Member`: the engine target
``index``, the stack (or side) it is a process of. It

- reads what its processes serve to size the slices (:func:`slots`: the slice holds two
  response times of the slowest stack; :func:`settle_after`: the settle after a process's
  slice drains its requests in flight; ``ab`` probes one process of each side
  (:meth:`Rotation.slowest_rps`), a study's group reads every process's first touch
  (:meth:`Rotation.touch`));
- runs one sliced engine run through the load agent
  (:meth:`pywebbench.load.LoadAgent.run_sliced`): every process gets ``touch_s`` of load
  alone first (its *first touch*: connections, imports, a JIT's first compilations; a
  study's group gives it with :meth:`Rotation.touch` first, and its sliced run only
  reconnects), then
  one slice a round in a seeded random order (keep-alive connections kept open across
  slices; with a connection per request, or N per connection, connections are opened inside
  a process's slices only), each process at its own URL or unix socket;
- meanwhile samples the server cores' and the generator cores' CPU accounting
  (:mod:`pywebbench.meter.slice_interference`), the server cores' speed
  (:mod:`pywebbench.meter.slice_speed`) and every process's memory: a process over its
  memory budget is stopped and the run goes on without it;
- after each complete round hands the rounds so far (at one core speed) to the caller's stop
  rule, which may end the run.

What is judged is the caller's, with the shared warm-up rule (:func:`judge`: a process is
warm when its share of the round has stopped moving, :func:`pywebbench.analysis.warmup.warm_round`)
and the shared interference rule (:meth:`Rotated.dropped`: a burst that hit one slice of a
round and not the others).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pywebbench.analysis.estimate import MIN_ROUNDS
from pywebbench.analysis.group import (
    GroupFit,
    LatencyFit,
    Observation,
    fit_group,
    fit_percentile,
    widest,
)
from pywebbench.analysis.steady import preload, slope_bounds
from pywebbench.analysis.warmup import WarmRule, round_shares, warm_round
from pywebbench.load.sliced import SlicedResult, SlicePlan, SliceProgress, SliceStats
from pywebbench.meter.core_speed import CORE_SPEED_THREAD
from pywebbench.meter.sampler import Trees, pin_this_thread, yield_to_others
from pywebbench.meter.slice_interference import CoreAccounting
from pywebbench.meter.slice_speed import Scaled, SliceSpeeds, at_one_speed
from pywebbench.run.measure import no_sigint

if TYPE_CHECKING:
    from pywebbench.bringup import ServerPool
    from pywebbench.launch import RunningServer
    from pywebbench.load import LoadAgent, LoadSpec

#: Seconds of load each process gets alone before the first round (connections opened,
#: imports and caches filled; a JIT compiles the path): CPython, and a JIT interpreter.
FIRST_TOUCH_S = 0.5
JIT_FIRST_TOUCH_S = 3.0
#: The shortest slice on a JIT interpreter (PyPy): its collector's pauses and the JIT's
#: compilations take tens to hundreds of milliseconds, and 0.1-0.15-s slices read 0.02-4x
#: their process's median share in the quick study's PyPy hello group (2026-12-03).
JIT_SLICE_S = 0.5
#: Seconds of load on one process of each stack that size the settle and the slices
#: (:func:`slots`), shared among the stacks, at least :data:`LEAST_PROBE_S` each.
PROBE_S = 1.0
LEAST_PROBE_S = 0.25
#: Seconds of load a process on a JIT interpreter gets before its probe is counted.
JIT_PROBE_WARMUP_S = 1.0
#: The counted end of a JIT process's first touch (:meth:`Rotation.touch`): a cold JIT's
#: rate moves within the second.
JIT_PROBE_S = 1.0
#: A slice whose server used less than this share of a core gives no per-CPU figure (too
#: few of the kernel's clock ticks to divide by).
MIN_CPU_SHARE = 0.02
#: Seconds between the engine's progress snapshots, each a sample of the server cores' CPU
#: accounting: a slice of :data:`SLICE_BOUNDS`'s shortest holds two or more of them (and of
#: the core-speed probe's readings, every 0.1 s), so that its interference, its per-CPU
#: figure and its core speed can be read.
SAMPLE_EVERY_S = 0.1
#: Seconds between memory samples of the processes.
MEMORY_EVERY_S = 1.0
#: The share of the machine's memory the processes may use together when no budget is
#: set; each process gets its share of it.
MEMORY_SHARE = 0.75
#: A process on a JIT interpreter takes this many shares of that memory to a CPython
#: process's one: PyPy's collector sizes its nursery from the CPU's cache and its processes
#: held 120-750 MiB in the quick study's groups (2026-12-03/06), CPython's tens of MiB.
JIT_MEMORY_SHARES = 6
#: How a slice dropped for interference begins its reason: other processes took more than
#: the limit beyond their usual share of the cores in its round (plus the clock ticks'
#: resolution), a burst that hit one slice and not the round's others (:func:`burst_rule`).
#: Steady contention (steal, a neighbour there all the time) hits every slice alike and
#: cancels in the round.
WHY_BURST = "interference burst"
#: How the reason of a process stopped for its memory begins.
OVER_BUDGET = "memory budget"
#: What such a reason says when the process had not yet reached its collector's floor
#: (PyPy's, asked of that PyPy): its growth is no evidence of a leak, the group's processes
#: took more memory than this machine gives each of them (:func:`below_collector`).
NOT_COLLECTED = "nothing collected below"
#: Seconds of memory samples a process's growth is read from before it may be stopped ahead
#: of its budget (:func:`will_pass`), the later half of them judged.
FORESEE_AFTER_S = 30.0
#: The most of those samples the growth is fitted on (evenly thinned): the judging runs on
#: the generator's core, once a second per process, beside the engine.
FORESEE_POINTS = 60
#: Rounds a group plans at least: the warm-up rule's window, then the measured rounds.
LEAST_ROUNDS = 20
#: The shortest slice that counts anything much, and the longest worth having.
SLICE_BOUNDS = (0.25, 2.0)
#: The settle's bounds (:func:`slots`): a sized slice is at most twice the longest.
SETTLE_BOUNDS = (0.05, 0.5)
#: Response times of the previous process a group's settle holds (:func:`settle_after`),
#: and its least after a JIT process's slice (its collector's pauses hold its last
#: requests, as they would empty a short slice: :data:`JIT_SLICE_S`).
DRAINS = 2.0
JIT_SETTLE_S = 0.25


def first_touch_s(jit: bool) -> float:
    """Seconds of load each process gets alone before the first round."""
    return JIT_FIRST_TOUCH_S if jit else FIRST_TOUCH_S


def slots(
    targets: int,
    budget_s: float,
    connections: int,
    rps: float,
    slice_s: float | None = None,
    *,
    shortest: float = SLICE_BOUNDS[0],
    least_rounds: int = LEAST_ROUNDS,
) -> tuple[float, float, int]:
    """(slice, settle, rounds) of a rotation's plan. The settle holds one response time of
    the slowest stack's probed process (``connections / rps``, at least 0.05 s, at most
    0.5 s): the previous process's requests still in flight are served meanwhile, on the
    same core, and must not count against the next; a stack slower than the one probed
    would leave its requests running into the next slice (the quick study's CPython cpu
    group, settled by its first stack's 0.05 s, showed the idle processes taking 11% of the
    core in a tenth of the slices, 2026-12-05). The slice is twice that, within
    :data:`SLICE_BOUNDS` and at least ``shortest`` (:data:`JIT_SLICE_S` on a JIT
    interpreter, whose collector pauses for tens of milliseconds and would empty a shorter
    slice now and then); the rounds fill the budget (never fewer than ``least_rounds``: a
    budget too small for them is exceeded)."""
    low, high = SLICE_BOUNDS
    settle = settle_for(connections, rps)
    if slice_s is None:
        # short: the host's speed moves within a second, so many short slices average it
        # out better than a few long ones; long enough to hold two response times
        slice_s = round(min(high, max(low, shortest, 2 * settle)), 3)
        if budget_s / (targets * (slice_s + settle)) < least_rounds:
            # a budget too small for the rounds the warm-up rule needs: one response time
            # a slice before the budget is exceeded
            slice_s = round(min(high, max(low, shortest, settle)), 3)
    rounds = max(least_rounds, int(budget_s / (targets * (slice_s + settle)) + 1e-9))
    return slice_s, settle, rounds


def settle_for(connections: int, rps: float) -> float:
    """One response time of a process serving ``rps`` over ``connections``, within
    :data:`SETTLE_BOUNDS`: the common settle :func:`slots` sizes (``ab``'s)."""
    latency = connections / rps if rps > 0 else 0.25
    return round(min(SETTLE_BOUNDS[1], max(SETTLE_BOUNDS[0], latency)), 3)


def settle_after(connections: int, rps: float, jit: bool) -> float:
    """The settle after a slice of a stack's process serving ``rps`` over ``connections``
    in a group (:attr:`RotationSettings.settle_s_by_stack`): :data:`DRAINS` response times,
    within :data:`SETTLE_BOUNDS`, and :data:`JIT_SETTLE_S` at least after a JIT's. The
    requests it left in flight drain while the next process's load has begun on the same
    core; one response time left them in the next slice: in the quick study's cpu group a
    CPython slice after a CPython one read 3-6% below one after a PyPy one, and with
    0.05-s settles a hello slice after a PyPy one spread 14-16% (3% after 0.25 s)."""
    latency = connections / rps if rps > 0 else 0.25
    settle = min(SETTLE_BOUNDS[1], max(SETTLE_BOUNDS[0], DRAINS * latency))
    return round(max(settle, JIT_SETTLE_S) if jit else settle, 3)


def memory_budget(budget_bytes: int | None, processes: int) -> int:
    """Bytes one process may hold: ``budget_bytes``, else its share of
    :data:`MEMORY_SHARE` of the machine's memory among ``processes``."""
    if budget_bytes is not None:
        return budget_bytes
    import psutil

    return int(psutil.virtual_memory().total * MEMORY_SHARE / max(1, processes))


def memory_budgets(budget_bytes: int | None, jit: Sequence[bool]) -> list[int]:
    """Bytes each of processes ``jit`` (on a JIT interpreter or not) may hold:
    ``budget_bytes`` each, else their shares of :data:`MEMORY_SHARE` of the machine's memory,
    a JIT process :data:`JIT_MEMORY_SHARES` of them (:func:`memory_budget` when all are
    alike)."""
    if budget_bytes is not None or len(set(jit)) < 2:
        return [memory_budget(budget_bytes, len(jit))] * len(jit)
    shares = [JIT_MEMORY_SHARES if j else 1 for j in jit]
    one = memory_budget(None, sum(shares))
    return [one * k for k in shares]


@dataclass
class Member:
    """One server process of the rotation: the engine target ``index``."""

    index: int
    #: What it is a process of: a stack's key (a study's group) or a side (``ab``).
    stack: str
    k: int  # its place among its stack's processes
    server: RunningServer
    url: str
    jit: bool = False  # on a JIT interpreter (PyPy)
    #: The unix socket it listens on (None: TCP, at ``url``); ``url`` then gives the path and
    #: the Host header, as a load's ``unix_socket``.
    unix_socket: str | None = None
    #: Its stack's family: processes of one family share a process variance in the fit
    #: (:func:`pywebbench.analysis.group.fit_group`'s ``families``; a study's: the
    #: interpreter).
    family: str = ""
    #: (unix time, RSS bytes of its tree) samples.
    memory: list[tuple[float, int]] = field(default_factory=list)
    #: Bytes below which its collector collects nothing (PyPy's first major collection,
    #: :mod:`pywebbench.meter.pypy_gc`; None: none known). A process growing below it keeps
    #: growing, and one bound to pass its budget before the rounds end is stopped early
    #: (:func:`will_pass`).
    collects_from: float | None = None
    #: Why it was stopped before the end (None: it ran to the end).
    stopped: str | None = None
    stopped_at: float | None = None


#: A member of a rotation, of whatever kind its caller keeps.
M = TypeVar("M", bound=Member)


@dataclass(frozen=True)
class RotationSettings:
    """How the rotation runs, once sized."""

    slice_s: float
    settle_s: float
    rounds: int
    seed: int
    touch_s: float  # each process's first touch (:func:`first_touch_s`)
    core_speed: bool = True  # judge the slices at one core speed
    interference_max: float = 0.05  # the burst rule's limit (WHY_BURST)
    memory_budget_bytes: int | None = None  # per process; None: sized from the machine
    #: A JIT process's slice, in a rotation of both kinds (None: as the others'): its
    #: collector's pauses need longer slices (:data:`JIT_SLICE_S`).
    jit_slice_s: float | None = None
    #: The settle after each stack's slices (:func:`settle_after`: response times of its
    #: slowest process); a stack not in it: ``settle_s``. A settle drains the requests the
    #: slice before it left in flight, so a fast stack's need not wait as a slow one's.
    settle_s_by_stack: Mapping[str, float] = field(default_factory=dict)

    def slice_for(self, m: Member) -> float:
        """The counted seconds of ``m``'s slices."""
        return self.jit_slice_s if m.jit and self.jit_slice_s is not None else self.slice_s

    def settle_after(self, m: Member) -> float:
        """The settle of the window after one of ``m``'s slices."""
        return self.settle_s_by_stack.get(m.stack, self.settle_s)

    def round_s(self, members: Sequence[Member]) -> float:
        """Seconds one round of ``members`` takes."""
        return sum(self.slice_for(m) + self.settle_after(m) for m in members)

    def planned_s(self, members: Sequence[Member]) -> float:
        """Seconds the whole plan takes, first touches included."""
        return len(members) * self.touch_s + self.rounds * self.round_s(members)


@dataclass
class Rounds:
    """The complete rounds so far, as the stop rule sees them."""

    slices: list[SliceStats]  # at one core speed
    complete: int
    dropped: Callable[[SliceStats], str | None]
    accounting: CoreAccounting | None  # the server cores' (None: not sampled)


def cpu_share(accounting: CoreAccounting | None, s: SliceStats) -> float | None:
    """The share of a core the slice's own server tree used during it (None: not sampled,
    or below :data:`MIN_CPU_SHARE`, too few clock ticks to divide by)."""
    if accounting is None:
        return None
    share = accounting.tree_share(s.target, s.started_at, s.ended_at)
    return share if share is not None and share >= MIN_CPU_SHARE else None


def per_cpu_second(
    slices: Sequence[SliceStats], accounting: CoreAccounting | None
) -> list[SliceStats]:
    """The slices with ``rps`` replaced by requests per CPU-second of their own server tree
    (what a CPU-bound server would do with a core to itself: CPU other processes took from
    it does not count against it); slices without a usable CPU figure (:func:`cpu_share`)
    are left out, so their rounds are incomplete."""
    out = []
    for s in slices:
        share = cpu_share(accounting, s)
        if share is not None:
            out.append(s.model_copy(update={"rps": s.rps / share}))
    return out


@dataclass
class GroupJudgement:
    """Where the processes stand after some rounds: each one's warm round, the fit."""

    warm: dict[int, int | None]  # member index -> the round it was warm from (None: not)
    fit: GroupFit | None
    rounds: int  # complete rounds
    measured: dict[int, int]  # member index -> measured rounds
    #: member index -> the first round its measured slices start at: its warm round, or
    #: (final judgement of a process that never settled) the middle of its rounds
    starts: dict[int, int | None] = field(default_factory=dict)
    #: An open loop: each stack's p50 and p99 over its processes' merged measured slices
    #: (:func:`latency_fit`), what its stop rule judges; None: a closed loop, or no slice.
    latency: LatencyFit | None = None
    open_loop: bool = False

    @property
    def judged(self) -> GroupFit | None:
        """The fit whose intervals the stop rule judges and whose processes' disagreement
        may grow a stack: an open loop's p99 (its req/s is pinned at the offered rate: None
        before its latency is fitted), else the req/s fit."""
        if self.open_loop:
            return self.latency.p99 if self.latency is not None else None
        return self.fit

    def reference(self, named: str | None) -> str | None:
        """The reference the ratios are to: ``named`` when it is a stack of the fit, else
        None (the geometric mean): a stack of another group, or one that left this one."""
        return named if self.fit is not None and named in self.fit.levels else None

    def widest(self, reference: str | None) -> float:
        """The widest interval the stop rule judges: every gap of the ranking and every
        stack's ratio to the reference (:func:`pywebbench.analysis.group.widest`); an open
        loop's, every stack's p99 interval (:meth:`LatencyFit.widest`). NaN: none, or a
        group of one stack."""
        if self.open_loop:
            fits = self.latency
            return fits.widest() if fits is not None and len(fits.p99.levels) > 1 else math.nan
        return widest(self.fit, self.reference(reference)) if self.fit is not None else math.nan

    def measured_slices(self, slices: Sequence[SliceStats]) -> list[SliceStats]:
        """``slices`` from each process's first measured round on (its warm round)."""
        return [
            s
            for s in slices
            if (start := self.starts.get(s.target)) is not None and s.round >= start
        ]

    def unsettled(self, members: Sequence[Member]) -> list[Member]:
        """The live processes never judged warm."""
        return [m for m in members if m.stopped is None and self.warm.get(m.index) is None]

    def settled(self, members: Sequence[Member], rounds: int = MIN_ROUNDS) -> bool:
        """Every live process is warm and has ``rounds`` measured rounds: the first half of
        every stop rule (a group's, ``ab``'s)."""
        live = [m for m in members if m.stopped is None]
        if not live or self.unsettled(live):
            return False
        return min(self.measured.get(m.index, 0) for m in live) >= rounds


def judge(
    slices: Sequence[SliceStats],
    members: Sequence[Member],
    rule: WarmRule,
    *,
    dropped: Callable[[SliceStats], str | None] = lambda _: None,
    final: bool = False,
    open_loop: bool = False,
) -> GroupJudgement:
    """Warm rounds and the fit from the complete slices so far. With ``final``, a process
    that never settled is measured on its last half of rounds (and flagged by the caller).

    An open loop (``open_loop``: its slices carry their histograms) serves the offered rate
    whatever a process does: its warm-up is judged on its slices' median latency (as a
    speed, 1/p50: faster is larger, as req/s), and its figures are its stacks' latencies
    (:func:`latency_fit`)."""
    alive = {m.index: m for m in members if m.stopped is None}
    kept_slices = [s for s in slices if s.target in alive and s.requests > 0 and dropped(s) is None]
    obs = [Observation(s.round, s.target, s.rps) for s in kept_slices]
    rounds = len({s.round for s in slices})
    paced = (
        [Observation(s.round, s.target, 1e6 / s.p50_us) for s in kept_slices if s.p50_us > 0]
        if open_loop
        else obs
    )
    shares = round_shares(paced)
    warm: dict[int, int | None] = {}
    starts: dict[int, int | None] = {}
    measured: dict[int, int] = {}
    kept: list[Observation] = []
    for index in alive:
        series = shares.get(index, [])
        w = warm_round(series, rule)
        warm[index] = w
        if w is None and final and series:
            w = series[len(series) // 2][0]
        starts[index] = w
        mine = [o for o in obs if o.process == index and w is not None and o.round >= w]
        measured[index] = len(mine)
        kept += mine
    stack_of = {m.index: m.stack for m in alive.values()}
    families = {m.stack: m.family for m in alive.values()}
    fit = fit_group(kept, stack_of, families=families)
    latency = None
    if open_loop:
        measured_slices = [
            s for s in kept_slices if (w := starts.get(s.target)) is not None and s.round >= w
        ]
        latency = latency_fit(measured_slices, stack_of, families)
    return GroupJudgement(warm, fit, rounds, measured, starts, latency, open_loop)


def latency_fit(
    slices: Sequence[SliceStats], stack_of: Mapping[int, str], families: Mapping[str, str]
) -> LatencyFit | None:
    """An open loop's p50 and p99 per stack, over its processes (module doc of
    :mod:`pywebbench.analysis.group`, "Open loops"): each process's percentiles from the
    histograms of its measured ``slices`` merged (by the engine's HdrHistogram); None
    without a slice (or one without its histogram: the engine gives an open loop's)."""
    from pywebbench.load.histogram import Histogram

    by_process: dict[int, list[str]] = {}
    for s in slices:
        if s.latency is None:
            return None
        by_process.setdefault(s.target, []).append(s.latency.hist)
    quantiles = {
        p: Histogram.merge_all(hists).quantiles([0.5, 0.99]) for p, hists in by_process.items()
    }
    fits = []
    for k, field_name in enumerate(("p50_us", "p99_us")):
        noise = [Observation(s.round, s.target, float(getattr(s, field_name))) for s in slices]
        fit = fit_percentile(
            {p: q[k] for p, q in quantiles.items() if q[k] > 0},
            noise,
            stack_of,
            families=families,
        )
        if fit is None:
            return None
        fits.append(fit)
    return LatencyFit(p50=fits[0], p99=fits[1])


@dataclass
class Rotated:
    """What a rotation measured."""

    result: SlicedResult
    speed: Scaled  # the slices at one core speed (or as measured)
    #: The server cores' CPU accounting (None: not sampled).
    accounting: CoreAccounting | None
    #: Why a slice is left out (None: kept): the burst rule of this run.
    dropped: Callable[[SliceStats], str | None]
    elapsed_s: float
    #: A slice's index -> the share of a core its own server tree used (:func:`cpu_share`;
    #: absent: unknown), read when the run ended.
    cpu: dict[int, float] = field(default_factory=dict)
    #: A slice's index -> what the idle processes took of the server cores during it.
    idle_by_slice: dict[int, float] = field(default_factory=dict)
    #: A member's index -> the share of a core its tree took during each of the others'
    #: slices (:func:`idle_figures`): what it costs them while it idles.
    idle_of: dict[int, list[float]] = field(default_factory=dict)
    #: Engine runs it joins (:meth:`Rotation.run` with ``after``): 1 for one run.
    legs: int = 1

    @property
    def interrupted(self) -> bool:
        """Ctrl-C ended the engine run (what it measured is kept all the same)."""
        return self.result.interrupted

    @property
    def idle(self) -> dict[str, float] | None:
        """What the idle processes took of the server cores during others' slices: the
        median and 90th percentile over the slices (None: not sampled)."""
        return summarize_idle(list(self.idle_by_slice.values()))

    def cpu_share(self, s: SliceStats) -> float | None:
        """The share of a core the slice's own server tree used (:func:`cpu_share`)."""
        return self.cpu.get(s.index)

    def next_round(self) -> int:
        """The first round number after this run's (where a further leg's rounds start)."""
        return 1 + max((s.round for s in self.result.slices), default=-1)

    def next_index(self) -> int:
        """The first slice index after this run's."""
        return 1 + max((s.index for s in self.result.slices), default=-1)

    def then(self, later: Rotated) -> Rotated:
        """This run followed by ``later`` (its slices already numbered after this one's):
        one run's figures, as the group stores them. The accounting is the later run's."""
        first = self.next_index()  # the later run's slices are numbered from here
        mine = self.dropped

        def dropped(s: SliceStats) -> str | None:
            return mine(s) if s.index < first else later.dropped(s)

        idle_by_slice = {**self.idle_by_slice, **later.idle_by_slice}
        idle_of = {
            m: [*self.idle_of.get(m, []), *later.idle_of.get(m, [])]
            for m in {*self.idle_of, *later.idle_of}
        }
        return Rotated(
            result=later.result.model_copy(
                update={
                    "slices": [*self.result.slices, *later.result.slices],
                    "targets": [*self.result.targets, *later.result.targets],
                    "elapsed_s": self.result.elapsed_s + later.result.elapsed_s,
                }
            ),
            speed=Scaled(
                [*self.speed.slices, *later.speed.slices],
                {**self.speed.rates, **later.speed.rates},
                later.speed.reference,
                later.speed.elasticity,
            ),
            accounting=later.accounting,
            dropped=dropped,
            elapsed_s=self.elapsed_s + later.elapsed_s,
            cpu={**self.cpu, **later.cpu},
            idle_by_slice=idle_by_slice,
            idle_of=idle_of,
            legs=self.legs + later.legs,
        )


class Rotation:
    """Runs processes of a pool in slices of the same rounds (module doc)."""

    def __init__(
        self,
        pool: ServerPool,
        agent: LoadAgent,
        *,
        server_cpus: Sequence[int],
        generator_cpus: Sequence[int] = (),
        interference: Callable[[Sequence[int]], Any] | None = None,
        rss: Callable[[int], int | None] | None = None,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.pool = pool
        self.agent = agent
        self.server_cpus = list(server_cpus)
        self.generator_cpus = list(generator_cpus)
        self._interference = interference
        #: A tree's RSS by its root's pid (None: read all of them at once with Trees).
        self._rss = rss
        self._say = say
        #: Seconds of load given so far (probes and runs).
        self.loaded_s = 0.0

    def touch(self, members: Sequence[M], spec: Callable[[M], LoadSpec]) -> list[float] | None:
        """Each of ``members`` loaded alone for its first touch (:func:`first_touch_s`),
        continuous, one after another: the requests/s of each over the touch's last part
        (:data:`LEAST_PROBE_S`, a JIT's :data:`JIT_PROBE_S`), which sizes the settle after
        its slices; None when Ctrl-C ended one (the others untouched)."""
        rates = []
        for m in members:
            each = first_touch_s(m.jit)
            counted = JIT_PROBE_S if m.jit else LEAST_PROBE_S
            touched = self.agent.run(spec(m).replace(duration_s=counted, warmup_s=each - counted))
            self.loaded_s += each
            if touched.interrupted:
                return None
            rates.append(touched.rps)
        return rates

    def slowest_rps(self, live: Sequence[M], spec: Callable[[M], LoadSpec]) -> float:
        """The lowest requests/s of a short probe of one process of each stack (``spec``:
        its load): the settle after a slice must drain the slowest stack's requests in
        flight (:func:`slots`)."""
        firsts: dict[str, M] = {}
        for m in live:
            firsts.setdefault(m.stack, m)
        each = max(LEAST_PROBE_S, PROBE_S / len(firsts))
        rates: dict[str, float] = {}
        for stack, m in firsts.items():
            # a JIT's cold process serves a fraction of its rate for its first seconds, and
            # a settle sized by that stretches every slice of the group (a quick study's
            # PyPy cpu group got 0.5-s settles and 1-s slices, and took 9 minutes for 5)
            warm = JIT_PROBE_WARMUP_S if m.jit else 0.0
            probe = self.agent.run(spec(m).replace(duration_s=each, warmup_s=warm))
            self.loaded_s += each + warm
            if probe.interrupted:
                raise KeyboardInterrupt
            rates[stack] = probe.rps
        self._say("probed: " + ", ".join(f"{s} {r:,.0f} req/s" for s, r in rates.items()))
        return min(rates.values())

    def run(
        self,
        live: Sequence[Member],
        load: LoadSpec,
        settings: RotationSettings,
        stop: Callable[[Rounds], bool],
        *,
        after: Rotated | None = None,
    ) -> Rotated:
        """One sliced engine run over ``live`` (their ``index`` set to their engine target,
        in order), ``load`` giving the load's shape (its ``unix_socket`` is not used: each
        member's own is); ``stop`` sees the complete rounds after each new one and ends the
        run by returning True.

        With ``after`` (an earlier run of the same group), this run is a further *leg* of
        it: the members keep their ``index`` (a new member has its own), its slices are
        numbered after ``after``'s (their ``target`` is the member's ``index``, their
        rounds and indexes continue), ``stop`` sees both runs' rounds, and what is returned
        joins both (:meth:`Rotated.then`)."""
        n = len(live)
        slices = [settings.slice_for(m) for m in live]
        settles = [settings.settle_after(m) for m in live]
        sockets = [m.unix_socket or "" for m in live]
        plan = SlicePlan(
            load=load.replace(warmup_s=settings.touch_s, unix_socket=None),
            targets=[m.url for m in live],
            # servers on unix sockets: each process its own (their URLs may all be alike)
            unix_socket_by_target=sockets if any(sockets) else [],
            slice_s=settings.slice_s,
            # one settle for all (the members' own, when they have one) or one each
            settle_s=settles[0] if len(set(settles)) == 1 else settings.settle_s,
            rounds=settings.rounds,
            seed=settings.seed + (after.legs if after is not None else 0),
            # a rotation of both kinds: each process its own slice
            slice_s_by_target=slices if len(set(slices)) > 1 else [],
            settle_s_by_target=settles if len(set(settles)) > 1 else [],
        )
        if after is None:
            for i, m in enumerate(live):
                m.index = i
        first_round = after.next_round() if after is not None else 0
        first_index = after.next_index() if after is not None else 0
        index_of = [m.index for m in live]

        def numbered(slices: Sequence[SliceStats]) -> list[SliceStats]:
            if after is None:
                return list(slices)
            return [
                s.model_copy(
                    update={
                        "target": index_of[s.target],
                        "round": s.round + first_round,
                        "index": s.index + first_index,
                    }
                )
                for s in slices
            ]

        budgets = memory_budgets(settings.memory_budget_bytes, [m.jit for m in live])
        pids = [m.server.pid for m in live]
        accounting = self._interference(pids) if self._interference else None
        # the generator's cores too: a burst there slows a fast stack's slice more than a
        # slow one's (the engine's CPU per request counts only when the server is quick)
        generator = (
            CoreAccounting.generator(self.generator_cpus)
            if accounting is not None and self.generator_cpus
            else None
        )
        sampled = [a for a in (accounting, generator) if a is not None]
        trees = Trees(pids)
        # the run's planned end, by which a process must not pass its memory budget
        state = {"rounds": 0, "memory_at": 0.0, "end_at": time.time() + plan.planned_s()}
        limit = settings.interference_max
        restore: list[Callable[[], None]] = []

        def watch(snap: SliceProgress) -> bool:
            if not restore:
                # the engine's threads are up: from now on they run first on the generator's
                # core and this process's Python threads (the sampling, the judging, the
                # console's refresh) take what they leave; sharing it evenly made a fast
                # stack's generator wait 22% of its slices. The core-speed probe keeps its
                # share of the server cores, where it runs.
                ours = [
                    t.native_id
                    for t in threading.enumerate()
                    if t.native_id is not None and t.name != CORE_SPEED_THREAD
                ]
                restore.append(yield_to_others(ours) or (lambda: None))
            now = time.time()
            for a in sampled:
                a.sample()
            if now - state["memory_at"] >= MEMORY_EVERY_S:
                state["memory_at"] = now
                self._sample_memory(live, now, budgets, trees, state["end_at"])
            complete = _complete_rounds(snap.slices, n)
            if complete <= state["rounds"]:
                return False
            state["rounds"] = complete
            done = numbered([s for s in snap.slices if s.round < complete])
            judged = at_one_speed(done, speeds).slices
            dropped = burst_rule(accounting, generator, limit, done)
            if after is None:
                return stop(Rounds(judged, complete, dropped, accounting))
            mine, earlier = dropped, after.dropped

            def either(s: SliceStats) -> str | None:
                return earlier(s) if s.index < first_index else mine(s)

            return stop(
                Rounds([*after.speed.slices, *judged], first_round + complete, either, accounting)
            )

        speeds = SliceSpeeds.start(self.server_cpus) if settings.core_speed else None
        preload()  # the first judgement does not hold up the run on its imports
        started = time.monotonic()
        # this thread (the judging, the sampling) off the server cores, as the sampler of a
        # sequential study keeps it (meter/sampler.py)
        before = pin_this_thread(self.generator_cpus)
        try:
            for a in sampled:
                a.sample()
            result = self.agent.run_sliced(plan, watch, interval_s=SAMPLE_EVERY_S)
            for a in sampled:
                a.sample()
        finally:
            for undo in restore:
                undo()
            if speeds is not None:
                speeds.stop()
            if before is not None:
                pin_this_thread(before)
        elapsed = time.monotonic() - started
        self.loaded_s += elapsed
        # what needs the engine's own targets (the accounting's trees) is read before the
        # slices are numbered into the group's
        cpu = {
            s.index + first_index: share
            for s in result.slices
            if (share := cpu_share(accounting, s)) is not None
        }
        by_slice, by_tree = idle_figures(result.slices, accounting)
        mine = numbered(result.slices)
        rotated = Rotated(
            result=result.model_copy(update={"slices": mine}) if after is not None else result,
            speed=at_one_speed(mine, speeds),
            accounting=accounting,
            dropped=burst_rule(accounting, generator, limit, mine),
            elapsed_s=elapsed,
            cpu=cpu,
            idle_by_slice={i + first_index: v for i, v in by_slice.items()},
            idle_of={index_of[t]: v for t, v in by_tree.items()},
        )
        return after.then(rotated) if after is not None else rotated

    def _sample_memory(
        self,
        live: Sequence[Member],
        now: float,
        budgets: Sequence[int],
        trees: Trees,
        end_at: float,
    ) -> None:
        """Each live process's memory now; one over its budget, or bound to pass it
        before ``end_at`` (the run's planned end, :func:`will_pass`), is stopped."""
        read = trees.rss() if self._rss is None else [self._rss(m.server.pid) for m in live]
        for m, rss, budget in zip(live, read, budgets, strict=True):
            if m.stopped is not None:
                continue
            if rss is None:
                continue
            m.memory.append((now, rss))
            if rss > budget:
                m.stopped = (
                    f"{OVER_BUDGET}: {rss / 2**20:,.0f} MiB passed the memory budget of "
                    f"{budget / 2**20:,.0f} MiB"
                )
                if m.collects_from is not None and rss < m.collects_from:
                    m.stopped += f", {NOT_COLLECTED} {m.collects_from / 2**30:,.1f} GiB"
            else:
                m.stopped = will_pass(m.memory, budget, m.collects_from, end_at)
            if m.stopped is not None:
                m.stopped_at = now
                self._say(f"{m.stack} process {m.k + 1}: {m.stopped}; stopped")
                with no_sigint():
                    self.pool.stop(m.server)


def below_collector(m: Member) -> bool:
    """Whether process ``m``'s last memory sample is below the floor under which its
    collector runs no major collection (PyPy's: ``m.collects_from``): its growth so far is
    no evidence of a leak (:func:`pywebbench.analysis.steady.leak`'s ``collector_floor``)."""
    return m.collects_from is not None and bool(m.memory) and m.memory[-1][1] < m.collects_from


def will_pass(
    memory: Sequence[tuple[float, int]],
    budget: int,
    collects_from: float | None,
    end_at: float,
) -> str | None:
    """Why a process whose ``memory`` samples ((unix time, bytes), the last one now) are
    below ``budget`` will pass it before ``end_at`` (None: it may not): its collector
    collects nothing below ``collects_from``, above the budget, so nothing will stop its
    growth, and even the low end of the growth's 95% interval (Theil-Sen, over the later
    half of at least :data:`FORESEE_AFTER_S` of samples) takes it past the budget by then.
    A process on such a host (PyPy's 1.9-GiB floor) would hold every round's windows until
    it passed, then be stopped all the same."""
    if collects_from is None or collects_from <= budget or len(memory) < 8:
        return None
    now, rss = memory[-1]
    if now - memory[0][0] < FORESEE_AFTER_S or rss > budget:
        return None
    later = memory[len(memory) // 2 :]
    if len(later) > FORESEE_POINTS:
        step = len(later) / FORESEE_POINTS
        later = [later[int(k * step)] for k in range(FORESEE_POINTS)] + [later[-1]]
    _, low, _ = slope_bounds([t for t, _ in later], [float(b) for _, b in later], 0.95)
    if not math.isfinite(low) or low <= 0 or rss + low * (end_at - now) <= budget:
        return None
    return (
        f"{OVER_BUDGET}: {rss / 2**20:,.0f} MiB and growing {low * 60 / 2**20:,.0f} MiB a "
        f"minute or more, {NOT_COLLECTED} {collects_from / 2**30:,.1f} GiB: it would "
        f"pass the memory budget of {budget / 2**20:,.0f} MiB before the rounds end"
    )


def burst_rule(
    accounting: CoreAccounting | None,
    generator: CoreAccounting | None,
    limit: float,
    slices: Sequence[SliceStats],
) -> Callable[[SliceStats], str | None]:
    """The interference rule of a run (:data:`WHY_BURST`): why a slice of ``slices`` is
    dropped. Others' share of the server cores (``accounting``) or of the generator's during
    the slice is judged against its round: more than ``limit`` (plus what the clock ticks
    cannot resolve) beyond the round's usual share, the median over the round's slices (the
    lower of two). What hit the whole round hits every process of it alike and cancels in
    the round's effect, as the host's drift does; a burst that hit one slice does not. None
    dropped without accounting."""
    watched = [(a, where) for a, where in ((accounting, "server"), (generator, "generator")) if a]
    if not watched:
        return lambda _: None
    reads: dict[tuple[int, int], tuple[float, float]] = {}  # (watched, slice index) -> read
    by_round: dict[tuple[int, int], list[float]] = {}  # (watched, round) -> shares
    for w, (a, _) in enumerate(watched):
        for s in slices:
            got = a.other_share_read(s.started_at, s.ended_at)
            if got is not None:
                reads[w, s.index] = got
                by_round.setdefault((w, s.round), []).append(got[0])
    usual = {
        key: (statistics.median(shares) if len(shares) > 2 else min(shares))
        for key, shares in by_round.items()
    }

    def dropped(s: SliceStats) -> str | None:
        for w, (_, where) in enumerate(watched):
            got = reads.get((w, s.index))
            if got is None:
                continue
            share, resolution = got
            if share > limit + resolution + usual[w, s.round]:
                return f"{WHY_BURST}: other processes took {share:.0%} of the {where} cores"
        return None

    return dropped


def idle_figures(
    slices: Sequence[SliceStats], accounting: CoreAccounting | None
) -> tuple[dict[int, float], dict[int, list[float]]]:
    """What the idle processes take from the loaded one, from one read of every other tree's
    share of a core during each slice (trees in the engine's target numbering):

    - by slice index, the CPU all the other trees used, as a share of the slice's core time
      (slices without two samples of every tree are left out);
    - by tree, its share during each of the others' slices (its idle cost: a server
      whose event loop keeps timers running takes a few percent; most take well under one).

    Both empty without accounting."""
    by_slice: dict[int, float] = {}
    by_tree: dict[int, list[float]] = {}
    if accounting is None:
        return by_slice, by_tree
    for s in slices:
        others = {
            t: accounting.tree_share(t, s.started_at, s.ended_at)
            for t in range(len(accounting.pids))
            if t != s.target
        }
        known = {t: x for t, x in others.items() if x is not None}
        for t, x in known.items():
            by_tree.setdefault(t, []).append(x)
        if known and len(known) == len(others):
            by_slice[s.index] = sum(known.values()) / max(1, len(accounting.cores))
    return by_slice, by_tree


def summarize_idle(shares: list[float]) -> dict[str, float] | None:
    """What the idle processes cost the loaded one (:func:`idle_figures`, by slice): the
    median and 90th percentile over the slices (None: none)."""
    if not shares:
        return None
    shares.sort()
    return {
        "median": round(shares[len(shares) // 2], 4),
        "p90": round(shares[int(0.9 * (len(shares) - 1))], 4),
    }


def _complete_rounds(slices: Sequence[SliceStats], targets: int) -> int:
    """Rounds complete from the first: every target's slice of them is in."""
    per: dict[int, int] = {}
    for s in slices:
        per[s.round] = per.get(s.round, 0) + 1
    r = 0
    while per.get(r, 0) >= targets:
        r += 1
    return r
