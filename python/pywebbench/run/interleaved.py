"""An interleaved group: every stack of the group up at once, loaded in slices of the same
rounds (docs/steady-state.md#the-interleaved-study).

A study with ``design = "interleaved"`` splits its cells into groups that can share the
server cores (:func:`interleaved_groups`: one interpreter, one workload, one load point).
For each group, :func:`run_group` starts ``processes`` server processes of every stack, each
pinned to the server cores and verified, and keeps them all up (a
:class:`~pywebbench.bringup.ServerPool`); one sliced engine run through the load agent
(:meth:`pywebbench.load.LoadAgent.run_sliced`) then loads them in slices, every process once a
round in a seeded random order, with connections kept open across slices. After each round
it judges every process's warm-up against the round and the stacks' intervals
(:mod:`pywebbench.analysis.group`), and ends the run once every process is warm, has
``MIN_ROUNDS`` measured rounds, and every stack's ratio to the group's reference is as narrow
as asked (or the group's budget is spent). While it runs, each process's memory is sampled;
one over the memory budget is stopped, marked ``leak`` with its memory curve, and the group
goes on without it.

What is stored is what a sequential study stores, so the report, ``compare``, ``history``
and the exports read it as they are: a replicate per server process, an iteration per slice
(``warmup`` before the process was warm, ``measured`` after; ``idx`` is the round), and the
group's figures in each cell's flags (``flags["group"]``: req/s at the group's average round,
the ratio to the reference with its interval, and the ratio to every other stack of the
group, from which ranks and ties are read).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pywebbench import formatting as fmt
from pywebbench.analysis.group import (
    GEOMETRIC_MEAN,
    GroupFit,
    Observation,
    WarmRule,
    fit_group,
    round_shares,
    warm_round,
)
from pywebbench.analysis.steady import (
    LEAK_FLOOR_BYTES_PER_1K,
    LEAK_FLOOR_JIT_BYTES_PER_1K,
    WarmupEnd,
    drift,
    leak,
    preload,
)
from pywebbench.analysis.warmup_class import WarmupClass, classify
from pywebbench.bringup import ServerPool, StackFailure
from pywebbench.load.sliced import SlicedResult, SlicePlan, SliceProgress, SliceStats
from pywebbench.meter.sampler import pin_this_thread, snapshot
from pywebbench.meter.slice_interference import CoreAccounting
from pywebbench.meter.slice_speed import Scaled, SliceSpeeds, at_one_speed
from pywebbench.run.measure import no_sigint
from pywebbench.run.rows import slice_iteration, started_server_columns
from pywebbench.run.schedule import CellOutcome, CellProgress
from pywebbench.store import CellStatus, IterationKind, Phase, Replicate, StoreWriter, utcnow
from pywebbench.study.config import LoadConfig
from pywebbench.study.matrix import CellPlan

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.load import LoadAgent, LoadSpec

#: Measured rounds every process needs (after its own warm round) before the group may stop.
MIN_ROUNDS = 8
#: The stop rule's interval half-width when the study sets no ``ci_target``.
DEFAULT_CI_WIDTH = 0.03
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
#: The share of the machine's memory the group's processes may use together when no
#: ``memory_budget_mib`` is set; each process gets its share of it.
MEMORY_SHARE = 0.75
#: A slice is dropped when other processes took more than this beyond the group's median
#: share of the server cores during it (plus the clock ticks' resolution): a burst that
#: hit one slice and not the round's others. Steady contention (steal, a neighbour there all
#: the time) hits every slice alike and cancels in the round.
WHY_BURST = "interference burst"
#: How a process stopped for its memory begins its reason (its replicate's and the cell's).
OVER_BUDGET = "memory budget"


def why_not_interleaved(cell: CellPlan, load: LoadConfig) -> str | None:
    """Why ``cell`` cannot be measured in an interleaved group (None: it can): what needs a
    server of its own per cell keeps the per-cell path (docs/steady-state.md)."""
    if load.design != "interleaved":
        return "design = sequential"
    if load.faults:
        return "--faults: the fault phase needs a server of its own"
    if load.slo:
        return "--slo: the knee search needs a server of its own"
    if load.syscalls or load.flamegraph:
        return "--syscalls/--flamegraph: per-cell windows"
    if load.load_agents > 1:
        return "--load-agents: a group's sliced run is one engine's"
    if load.warmup != "steady":
        return f"--warmup {load.warmup}: a warm-up of each server of its own"
    if load.server_scope == "stack":
        return "--server-scope stack: one server serves a stack's cells in turn"
    if cell.load_model != "closed":
        return "open loop: slices run a closed loop"
    if cell.connection_mode != "keepalive":
        return "--connection-mode: slices keep their connections open"
    if cell.workload.websocket:
        return "WebSocket: slices speak HTTP"
    if cell.protocol != "http1":
        return "--protocol h2c: per cell"
    if cell.bind != "tcp":
        return "--bind unix: per cell"
    return None


def group_key(cell: CellPlan) -> tuple[str, str, str, str, str]:
    """The cells that share the server cores in one interleaved group: one interpreter,
    one workload (and its parameters), one load point."""
    return (
        cell.variant.stack.interpreter.name,
        cell.workload.name,
        json.dumps(cell.params, sort_keys=True),
        cell.load_point,
        cell.bind,
    )


def rotation_seed(label: str, study_seed: int | None = None) -> int:
    """A group's rotation seed: its label's CRC (each group its own rotation, the same on
    every run of the study), or with the study's ``seed`` (``--seed``) mixed in."""
    import zlib

    text = label if study_seed is None else f"{study_seed}:{label}"
    return zlib.crc32(text.encode())


def interleaved_groups(cells: Sequence[CellPlan]) -> list[list[CellPlan]]:
    """``cells`` in interleaved groups (:func:`group_key`), in the matrix's order."""
    groups: dict[tuple[str, str, str, str, str], list[CellPlan]] = {}
    for c in cells:
        groups.setdefault(group_key(c), []).append(c)
    return list(groups.values())


@dataclass(frozen=True)
class GroupOptions:
    """How a group is measured."""

    processes: int = 3
    budget_s: float = 150.0
    jit_budget_s: float = 300.0  # on a JIT interpreter (PyPy)
    ci_width: float = DEFAULT_CI_WIDTH
    slice_s: float | None = None  # None: sized by the probe (slots)
    memory_budget_bytes: int | None = None  # None: sized from the machine's memory
    interference_max: float = 0.05
    seed: int = 0
    reference: str | None = None  # a stack key; None: the group's geometric mean
    #: Probe the server cores' speed and judge the slices at one speed (meter/slice_speed.py).
    core_speed: bool = True
    rule: WarmRule = field(default_factory=WarmRule)

    @classmethod
    def of(cls, load: LoadConfig, seed: int = 0) -> GroupOptions:
        """The options a study's ``[load]`` sets."""
        budget = load.memory_budget_mib
        return cls(
            processes=max(2, load.replicates),
            budget_s=load.group_budget_s,
            jit_budget_s=load.jit_group_budget_s,
            ci_width=load.ci_target if load.ci_target is not None else DEFAULT_CI_WIDTH,
            memory_budget_bytes=budget * 2**20 if budget is not None else None,
            interference_max=load.interference_max,
            seed=seed,
            reference=load.reference,
            core_speed=load.core_speed,
            slice_s=load.slice_s,
        )


@dataclass
class Member:
    """One server process of the group: the engine target ``index``."""

    index: int
    progress: CellProgress
    k: int  # its replicate number (its place among its stack's processes)
    server: RunningServer
    url: str
    replicate_id: int
    #: (unix time, RSS bytes of its tree) samples.
    memory: list[tuple[float, int]] = field(default_factory=list)
    #: Why it was stopped before the end (None: it ran to the end).
    stopped: str | None = None
    stopped_at: float | None = None

    @property
    def stack(self) -> str:
        return self.progress.cell.variant.key


@dataclass
class GroupJudgement:
    """Where the group stands after some rounds: each process's warm round, the fit."""

    warm: dict[int, int | None]  # member index -> the round it was warm from (None: not)
    fit: GroupFit | None
    rounds: int  # complete rounds
    measured: dict[int, int]  # member index -> measured rounds
    #: member index -> the first round its measured slices start at: its warm round, or
    #: (final judgement of a process that never settled) the middle of its rounds
    starts: dict[int, int | None] = field(default_factory=dict)

    def reference(self, named: str | None) -> str | None:
        """The reference the ratios are to: ``named`` when it is a stack of the fit, else
        None (the geometric mean): a stack of another group, or one that left this one."""
        return named if self.fit is not None and named in self.fit.levels else None

    def widest(self, reference: str | None) -> float:
        """The widest ratio interval of any stack to the reference (NaN: none, or a group
        of one stack, whose only ratio is to itself)."""
        if self.fit is None or len(self.fit.levels) < 2:
            return math.nan
        ref = self.reference(reference)
        widths = [self.fit.vs_reference(s, ref).half_width for s in self.fit.levels if s != ref]
        return max(widths) if widths else math.nan


def judge(
    slices: Sequence[SliceStats],
    members: Sequence[Member],
    rule: WarmRule,
    *,
    dropped: Callable[[SliceStats], str | None] = lambda _: None,
    final: bool = False,
) -> GroupJudgement:
    """Warm rounds and the fit from the complete slices so far. With ``final``, a process
    that never settled is measured on its last half of rounds (and flagged by the caller)."""
    alive = {m.index: m for m in members if m.stopped is None}
    obs = [
        Observation(s.round, s.target, s.rps)
        for s in slices
        if s.target in alive and s.requests > 0 and dropped(s) is None
    ]
    rounds = len({s.round for s in slices})
    shares = round_shares(obs)
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
    return GroupJudgement(warm, fit_group(kept, stack_of), rounds, measured, starts)


def enough(j: GroupJudgement, members: Sequence[Member], options: GroupOptions) -> bool:
    """The stop rule: every live process warm with :data:`MIN_ROUNDS` measured rounds, and
    every stack's ratio to the reference within +-``ci_width``."""
    live = [m for m in members if m.stopped is None]
    if not live or any(j.warm.get(m.index) is None for m in live):
        return False
    if min(j.measured.get(m.index, 0) for m in live) < MIN_ROUNDS:
        return False
    if j.fit is not None and len(j.fit.levels) < 2:
        return True  # one stack: nothing to compare, its processes are warm and measured
    width = j.widest(options.reference)
    return math.isfinite(width) and width <= options.ci_width


#: Rounds a group plans at least: the warm-up rule's window, then the measured rounds.
LEAST_ROUNDS = 20
#: The shortest slice that counts anything much, and the longest worth having.
SLICE_BOUNDS = (0.25, 2.0)


def slots(
    targets: int,
    budget_s: float,
    connections: int,
    rps: float,
    slice_s: float | None = None,
    *,
    shortest: float = SLICE_BOUNDS[0],
) -> tuple[float, float, int]:
    """(slice, settle, rounds) of a group's plan. The settle holds one response time of the
    slowest stack's probed process (``connections / rps``, at least 0.05 s, at most 0.5 s):
    the previous process's requests still in flight are served meanwhile, on the same core,
    and must not count against the next; a stack slower than the one probed would leave
    its requests running into the next slice (the quick study's CPython cpu group, settled
    by its first stack's 0.05 s, showed the idle processes taking 11% of the core in a
    tenth of the slices, 2026-12-05). The slice is twice that, within :data:`SLICE_BOUNDS`
    and at least ``shortest``
    (:data:`JIT_SLICE_S` on a JIT interpreter, whose collector pauses for tens of
    milliseconds and would empty a shorter slice now and then); the rounds fill the budget
    (never fewer than :data:`LEAST_ROUNDS`: a budget too small for them is exceeded)."""
    low, high = SLICE_BOUNDS
    latency = connections / rps if rps > 0 else 0.25
    settle = round(min(0.5, max(0.05, latency)), 3)
    if slice_s is None:
        # short: the host's speed moves within a second, so many short slices average it
        # out better than a few long ones; long enough to hold two response times
        slice_s = round(min(high, max(low, shortest, 2 * settle)), 3)
        if budget_s / (targets * (slice_s + settle)) < LEAST_ROUNDS:
            # a budget too small for the rounds the warm-up rule needs: one response time
            # a slice before the budget is exceeded
            slice_s = round(min(high, max(low, shortest, settle)), 3)
    rounds = max(LEAST_ROUNDS, int(budget_s / (targets * (slice_s + settle))))
    return slice_s, settle, rounds


def memory_budget(options: GroupOptions, processes: int) -> int:
    """Bytes one process may hold: the option, else its share of :data:`MEMORY_SHARE` of
    the machine's memory."""
    if options.memory_budget_bytes is not None:
        return options.memory_budget_bytes
    import psutil

    return int(psutil.virtual_memory().total * MEMORY_SHARE / max(1, processes))


class GroupRun:
    """One interleaved group on a host bench's stacks (module doc)."""

    def __init__(
        self,
        cells: Sequence[CellProgress],
        options: GroupOptions,
        *,
        store: StoreWriter,
        pool: ServerPool,
        agent: LoadAgent,
        load_spec: Callable[[CellPlan, str], LoadSpec],
        interference: Callable[[Sequence[int]], Any] | None = None,
        say: Callable[[str], None] = lambda _: None,
        rss: Callable[[int], int | None] | None = None,
        generator_cpus: Sequence[int] = (),
        server_cpus: Sequence[int] = (0,),
    ) -> None:
        self.cells = list(cells)
        self.options = options
        self.store = store
        #: The group's server processes: every one it started is stopped by :meth:`stop_all`.
        self.pool = pool
        self.agent = agent
        self._load_spec = load_spec
        self._interference = interference
        self._say = say
        self._rss = rss or tree_rss
        self.generator_cpus = list(generator_cpus)
        self.server_cpus = list(server_cpus)
        #: The slices at one core speed (meter/slice_speed.py), once measured.
        self.speed: Scaled | None = None
        self._accounting: Any = None  # the server cores' CPU accounting of the run
        #: What the idle processes took of the server cores during others' slices.
        self.idle: dict[str, float] | None = None
        self.members: list[Member] = []
        self.result: SlicedResult | None = None
        self.loaded_s = 0.0
        #: Ctrl-C ended the engine run (what it measured is stored all the same).
        self.interrupted = False

    # -- bring-up --------------------------------------------------------------------------

    def bring_up(self) -> None:
        """Start and verify every stack's processes, the stacks interleaved (process 1 of
        each, then process 2 of each, ...), so that no stack's processes are all older. A
        stack that fails to start or verify fails its cell; the others go on."""
        k_total = self.options.processes
        for k in range(k_total):
            for p in self.cells:
                if p.failure is not None:
                    continue
                self._say(f"starting {p.cell.variant.key} (process {k + 1} of {k_total})")
                number = p.next_rep + k  # after those of an interrupted attempt
                rep_id = self.store.add_replicate(
                    Replicate(None, p.cell_id, number, CellStatus.RUNNING, utcnow())
                )
                try:
                    server = self.pool.start(p.cell, k)
                except StackFailure as exc:
                    self._fail_replicate(rep_id, exc)
                    self._fail_cell(p, exc)
                    continue
                self.members.append(Member(len(self.members), p, number, server, "", rep_id))
                self.store.update_replicate(rep_id, **started_server_columns(server))
                self.members[-1].url = self._load_spec(p.cell, server.base_url).url
                self._say(f"verifying {p.cell.variant.key} {p.cell.workload.name}")
                failure = self.pool.verify(server, p.cell)
                if failure is not None:
                    self._fail_replicate(rep_id, failure)
                    self._fail_cell(p, failure, rep_id)

    def _fail_replicate(self, rep_id: int, exc: StackFailure) -> None:
        with no_sigint():
            self.store.update_replicate(
                rep_id,
                status=CellStatus.FAILED,
                finished_at=utcnow(),
                failure_phase=exc.phase,
                failure_reason=exc.reason,
            )

    def _fail_cell(self, p: CellProgress, exc: StackFailure, failed: int | None = None) -> None:
        """``p`` failed (replicate ``failed`` with ``exc``, already stored): its processes
        are stopped and leave the group, their replicates failed with it."""
        p.failure = exc
        for m in self.members:
            if m.progress is p and m.stopped is None:
                with no_sigint():
                    self.pool.stop(m.server)
                    if m.replicate_id == failed:
                        m.stopped, m.stopped_at = f"{exc.phase}: {exc.reason}", time.time()
                        continue
                    self.store.update_replicate(
                        m.replicate_id,
                        status=CellStatus.FAILED,
                        finished_at=utcnow(),
                        failure_phase=exc.phase,
                        failure_reason=f"another process of its stack failed: {exc.reason}",
                    )
                m.stopped, m.stopped_at = f"{exc.phase}: {exc.reason}", time.time()
        self.members = [m for m in self.members if m.progress is not p]
        for i, m in enumerate(self.members):
            m.index = i

    def fail_all(self, exc: StackFailure) -> None:
        """Every member's replicate failed with ``exc`` (the group could not be measured)."""
        for m in self.members:
            if m.stopped is None:
                self._fail_replicate(m.replicate_id, exc)

    def stop_all(self) -> None:
        """Stop every process still up (shielded from Ctrl-C)."""
        with no_sigint():
            try:
                self.pool.close()
            except Exception:  # noqa: BLE001 - the others are stopped; the outcome matters more
                pass

    # -- the run ---------------------------------------------------------------------------

    def measure(self) -> GroupJudgement | None:
        """The interleaved engine run and its judgement; None when fewer than two processes
        are up (nothing to interleave)."""
        live = [m for m in self.members if m.stopped is None]
        if len(live) < 2:
            return None
        first = live[0]
        is_jit = any(m.progress.cell.variant.stack.interpreter.is_pypy for m in live)
        touch_s = JIT_FIRST_TOUCH_S if is_jit else FIRST_TOUCH_S
        base = self._load_spec(first.progress.cell, first.server.base_url)
        n = len(live)
        rps = self._slowest_rps(live)  # the settle drains the slowest, whatever the slice
        budget_s = self.options.jit_budget_s if is_jit else self.options.budget_s
        slice_s, settle_s, rounds = slots(
            n, budget_s - n * touch_s, first.progress.cell.connections, rps,
            self.options.slice_s, shortest=JIT_SLICE_S if is_jit else SLICE_BOUNDS[0],
        )  # fmt: skip
        plan = SlicePlan(
            load=base.replace(warmup_s=touch_s),
            targets=[m.url for m in live],
            slice_s=slice_s,
            settle_s=settle_s,
            rounds=rounds,
            seed=self.options.seed,
        )
        # engine targets are the live members in order
        for i, m in enumerate(live):
            m.index = i
        budget = memory_budget(self.options, n)
        accounting = (
            self._interference([m.server.pid for m in live]) if self._interference else None
        )
        self._accounting = accounting
        # the generator's cores too: a burst there slows a fast stack's slice more than a
        # slow one's (the engine's CPU per request counts only when the server is quick)
        generator = (
            CoreAccounting.generator(self.generator_cpus)
            if accounting is not None and self.generator_cpus
            else None
        )
        sampled = [a for a in (accounting, generator) if a is not None]
        state = {"rounds": 0, "memory_at": 0.0}
        self._say(
            f"measuring {len({m.stack for m in live})} stacks x {self.options.processes} "
            f"processes interleaved: {slice_s:g} s slices, at most {rounds} rounds "
            f"({plan.planned_s():.0f} s)"
        )

        def watch(snap: SliceProgress) -> bool:
            now = time.time()
            for a in sampled:
                a.sample()
            if now - state["memory_at"] >= MEMORY_EVERY_S:
                state["memory_at"] = now
                self._sample_memory(live, now, budget)
            complete = _complete_rounds(snap.slices, n)
            if complete <= state["rounds"]:
                return False
            state["rounds"] = complete
            done = [s for s in snap.slices if s.round < complete]
            judged = at_one_speed(done, speeds).slices
            j = judge(judged, live, self.options.rule, dropped=self._dropper(accounting, generator))
            warm = sum(1 for m in live if m.stopped is None and j.warm.get(m.index) is not None)
            width = j.widest(self.options.reference)
            self._say(
                f"round {complete}: {warm} of {sum(1 for m in live if m.stopped is None)} "
                f"processes warm, widest CI "
                + (fmt.half_width(width) if math.isfinite(width) else "n/a")
            )
            return enough(j, live, self.options)

        speeds = SliceSpeeds.start(self.server_cpus) if self.options.core_speed else None
        preload()
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
            if speeds is not None:
                speeds.stop()
            if before is not None:
                pin_this_thread(before)
        self.loaded_s += time.monotonic() - started
        self.result = result
        self.interrupted = result.interrupted
        self._dropped = self._dropper(accounting, generator)
        self.idle = idle_share(result.slices, accounting) if accounting is not None else None
        self.speed = at_one_speed(result.slices, speeds)
        return judge(self.speed.slices, live, self.options.rule, dropped=self._dropped, final=True)

    def _slowest_rps(self, live: Sequence[Member]) -> float:
        """The lowest requests/s of a short probe of one process of each stack: the settle
        after a slice must drain the slowest stack's requests in flight (:func:`slots`)."""
        firsts: dict[str, Member] = {}
        for m in live:
            firsts.setdefault(m.stack, m)
        each = max(LEAST_PROBE_S, PROBE_S / len(firsts))
        rates: dict[str, float] = {}
        for stack, m in firsts.items():
            # a JIT's cold process serves a fraction of its rate for its first seconds, and
            # a settle sized by that stretches every slice of the group (a quick study's
            # PyPy cpu group got 0.5-s settles and 1-s slices, and took 9 minutes for 5)
            warm = JIT_PROBE_WARMUP_S if m.progress.cell.variant.stack.interpreter.is_pypy else 0
            spec = self._load_spec(m.progress.cell, m.server.base_url)
            probe = self.agent.run(spec.replace(duration_s=each, warmup_s=warm))
            self.loaded_s += each + warm
            if probe.interrupted:
                raise KeyboardInterrupt
            rates[stack] = probe.rps
        self._say("probed: " + ", ".join(f"{s} {r:,.0f} req/s" for s, r in rates.items()))
        return min(rates.values())

    def _dropper(
        self, accounting: Any, generator: Any = None
    ) -> Callable[[SliceStats], str | None]:
        """The interference rule of this run (module doc): a burst on the server cores or
        on the generator's; none without accounting."""
        # each with the median share others took of its cores so far (read once)
        watched = [
            (a, where, self._median_other(a))
            for a, where in ((accounting, "server"), (generator, "generator"))
            if a is not None
        ]
        if not watched:
            return lambda _: None
        limit = self.options.interference_max

        def dropped(s: SliceStats) -> str | None:
            for a, where, usual in watched:
                got = a.other_share_read(s.started_at, s.ended_at)
                if got is None:
                    continue
                share, resolution = got
                if share > limit + resolution + usual:
                    return f"{WHY_BURST}: other processes took {share:.0%} of the {where} cores"
            return None

        return dropped

    def _median_other(self, accounting: Any) -> float:
        """The median share other processes took of the server cores over the run so far,
        between successive samples."""
        at = accounting.at
        shares = []
        for i in range(1, len(at), max(1, len(at) // 200)):
            got = accounting.other_share(at[i - 1], at[i])
            if got is not None:
                shares.append(got)
        shares.sort()
        return shares[len(shares) // 2] if shares else 0.0

    def _sample_memory(self, live: Sequence[Member], now: float, budget: int) -> None:
        for m in live:
            if m.stopped is not None:
                continue
            rss = self._rss(m.server.pid)
            if rss is None:
                continue
            m.memory.append((now, rss))
            if rss > budget:
                m.stopped = (
                    f"{OVER_BUDGET}: {rss / 2**20:,.0f} MiB passed the memory budget of "
                    f"{budget / 2**20:,.0f} MiB"
                )
                m.stopped_at = now
                self._say(f"{m.stack} process {m.k + 1}: {m.stopped}; stopped")
                with no_sigint():
                    self.pool.stop(m.server)

    # -- the store -------------------------------------------------------------------------

    def store_outcome(self, j: GroupJudgement) -> dict[int, dict[str, Any]]:
        """Every slice, every process's judgement and the group's figures into the store;
        the group figures by cell id (for the cells' flags)."""
        assert self.result is not None
        slices = self.result.slices
        dropped = self._dropped
        by_member: dict[int, list[SliceStats]] = {}
        for s in slices:
            by_member.setdefault(s.target, []).append(s)
        started = min((s.started_at for s in slices), default=time.time())
        ended = max((s.ended_at for s in slices), default=started)
        with no_sigint():
            for m in self.members:
                if m.index >= len(self.result.targets):
                    continue
                self._store_member(m, by_member.get(m.index, []), j, dropped, started)
        return self._group_flags(j, started, ended)

    def _store_member(
        self,
        m: Member,
        mine: list[SliceStats],
        j: GroupJudgement,
        dropped: Callable[[SliceStats], str | None],
        t0: float,
    ) -> None:
        cell_id = m.progress.cell_id
        warm = j.warm.get(m.index)
        first = j.starts.get(m.index, warm)  # where the fit's slices of it start
        assert self.speed is not None  # measured
        judged = self.speed.slices
        shares = dict(round_shares(_observations(judged, dropped)).get(m.index, []))
        warm_part = [shares[s.round] for s in mine if s.round in shares and s.round < (first or 0)]
        measured_part = [
            shares[s.round] for s in mine if s.round in shares and s.round >= (first or 0)
        ]
        for s in mine:
            kind = (
                IterationKind.MEASURED
                if first is not None and s.round >= first and m.stopped is None
                else IterationKind.WARMUP
            )
            mem = [rss for t, rss in m.memory if s.started_at <= t <= s.ended_at + MEMORY_EVERY_S]
            it = slice_iteration(
                s,
                cell_id,
                dropped(s),
                self.speed.rates.get(s.index) if self.speed is not None else None,
                m.k,
                kind=kind,
                memory=(max(mem), mem[-1]) if mem else (None, None),
            )
            cpu = (
                self._accounting.tree_share(m.index, s.started_at, s.ended_at)
                if (self._accounting is not None)
                else None
            )
            if cpu is not None and cpu >= MIN_CPU_SHARE:  # requests per CPU-second
                it = dataclasses.replace(it, requests_per_cpu_s=s.rps / cpu)
            if self.interrupted:  # the group is measured again whole on --resume
                it = dataclasses.replace(it, interrupted=True)
            self.store.add_iteration(it)
        cls: WarmupClass | None = classify(warm_part, measured_part)
        if warm is None:
            cls = WarmupClass.NO_STEADY_STATE
        trend = drift(measured_part)
        is_jit = m.progress.cell.variant.stack.interpreter.is_pypy
        requests, memory = _requests_at(mine, m.memory)
        grows = leak(
            requests,
            memory,
            floor=LEAK_FLOOR_JIT_BYTES_PER_1K if is_jit else LEAK_FLOOR_BYTES_PER_1K,
        )
        leak_doc: dict[str, Any] = grows.to_dict()
        if m.stopped is not None and m.stopped.startswith(OVER_BUDGET):
            leak_doc["leaking"] = True  # passed the budget: marked leak, with its curve
            leak_doc["stopped"] = m.stopped
        leak_doc["curve"] = [[round(t - t0, 2), rss] for t, rss in m.memory]
        warm_s = next((s.started_at - t0 for s in mine if s.round == first), None)
        status = CellStatus.OK if m.stopped is None and measured_part else CellStatus.FAILED
        if self.interrupted:
            status = CellStatus.INTERRUPTED
        self.store.update_replicate(
            m.replicate_id,
            status=status,
            finished_at=utcnow(),
            warmup_end=str(WarmupEnd.STEADY if warm is not None else WarmupEnd.CAP),
            warmup_s=warm_s,
            steady_start_s=warm_s if warm is not None else None,
            warmup_curve_json=json.dumps(
                [[round(s.started_at - t0, 2), s.rps] for s in mine if s.round < (first or 0)]
            ),
            measured_curve_json=json.dumps(
                [[round(s.started_at - t0, 2), s.rps] for s in mine if s.round >= (first or 0)]
            ),
            drift_json=json.dumps(trend.to_dict()),
            leak_json=json.dumps(leak_doc),
            warmup_class=str(cls.value) if cls is not None else None,
            failure_phase=Phase.MEASURE if m.stopped else None,
            failure_reason=m.stopped,
        )

    def _group_flags(self, j: GroupJudgement, started: float, ended: float) -> dict[int, Any]:
        fit = j.fit
        out: dict[int, dict[str, Any]] = {}
        if fit is None:
            return out
        reference = self.options.reference
        if reference is not None and reference not in fit.levels:
            reference = None
        for p in self.cells:
            key = p.cell.variant.key
            if key not in fit.levels:
                continue
            vs = fit.vs_reference(key, reference)
            rps = fit.rps(key)
            rps_low, rps_high = vs.bounds_for(rps)
            out[p.cell_id] = {
                "group": group_label(p.cell),
                "reference": reference or GEOMETRIC_MEAN,
                "stacks": len(fit.levels),
                "processes": fit.counts[key],
                "df": fit.df,
                "rps": rps,
                "rps_low": rps_low,
                "rps_high": rps_high,
                "ratio": vs.ratio,
                "low": vs.low if math.isfinite(vs.low) else None,
                "high": vs.high if math.isfinite(vs.high) else None,
                "span": [_iso(started), _iso(ended)],
                "rounds": j.rounds,
                "seed": self.options.seed,
                "idle_cpu_share": self.idle,
                "vs": {
                    other: _triple(fit.ratio(key, other)) for other in fit.levels if other != key
                },
            }
        return out


def idle_share(slices: Sequence[SliceStats], accounting: Any) -> dict[str, float] | None:
    """What the group's idle processes cost the loaded one: the CPU every other process's
    tree used during each slice, as a share of the slice's core time (median and 90th
    percentile over the slices); None without two samples in any slice."""
    shares = []
    for s in slices:
        others = [
            accounting.tree_share(t, s.started_at, s.ended_at)
            for t in range(len(accounting.pids))
            if t != s.target
        ]
        known = [x for x in others if x is not None]
        if known and len(known) == len(others):
            shares.append(sum(known) / max(1, len(accounting.cores)))
    if not shares:
        return None
    shares.sort()
    return {
        "median": round(shares[len(shares) // 2], 4),
        "p90": round(shares[int(0.9 * (len(shares) - 1))], 4),
    }


def tree_rss(pid: int) -> int | None:
    """The RSS of a server's process tree (None: it is gone)."""
    try:
        return snapshot(pid, memory_detail=False).rss_bytes
    except Exception:  # noqa: BLE001 - a process that just went away
        return None


def group_label(cell: CellPlan) -> str:
    """``pypy3.9 | hello @ c64``: what the group's cells share."""
    return f"{cell.variant.stack.interpreter.name} | {cell.workload.name} @ {cell.load_point}"


def _triple(iv: Any) -> list[float | None]:
    return [
        iv.ratio,
        iv.low if math.isfinite(iv.low) else None,
        iv.high if math.isfinite(iv.high) else None,
    ]


def _iso(unix: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="seconds")


def _observations(
    slices: Sequence[SliceStats], dropped: Callable[[SliceStats], str | None]
) -> list[Observation]:
    return [
        Observation(s.round, s.target, s.rps)
        for s in slices
        if s.requests > 0 and s.errors == 0 and dropped(s) is None
    ]


def _complete_rounds(slices: Sequence[SliceStats], targets: int) -> int:
    """Rounds complete from the first: every target's slice of them is in."""
    per: dict[int, int] = {}
    for s in slices:
        per[s.round] = per.get(s.round, 0) + 1
    r = 0
    while per.get(r, 0) >= targets:
        r += 1
    return r


def _requests_at(
    mine: Sequence[SliceStats], memory: Sequence[tuple[float, int]]
) -> tuple[list[float], list[float]]:
    """(requests served by then, RSS) at each memory sample: the leak test's axes."""
    xs: list[float] = []
    ys: list[float] = []
    for t, rss in memory:
        served = sum(s.requests for s in mine if s.ended_at <= t)
        xs.append(float(served))
        ys.append(float(rss))
    return xs, ys


def run_group(
    run: GroupRun,
    say: Callable[[str], None] = lambda _: None,
) -> list[CellOutcome]:
    """Bring the group up, measure it, store it, take it down: each cell's outcome (the
    group's figures in its ``flags``). Raises KeyboardInterrupt on Ctrl-C, after storing
    every slice measured so far and stopping every process."""
    try:
        run.bring_up()
        j = run.measure()
        if j is not None:
            flags = run.store_outcome(j)
        else:
            flags = {}
            run.fail_all(StackFailure(Phase.MEASURE, "fewer than two server processes were up"))
    finally:
        run.stop_all()
    if run.interrupted:
        raise KeyboardInterrupt
    out = []
    for p in run.cells:
        ok = sum(1 for m in run.members if m.progress is p and m.stopped is None)
        failure = p.failure
        if failure is None and p.cell_id not in flags:
            mine = [m for m in run.members if m.progress is p]
            leaks = [m.stopped for m in mine if m.stopped and m.stopped.startswith(OVER_BUDGET)]
            if j is None:
                why = "fewer than two server processes of the group were up"
            elif mine and len(leaks) == len(mine):
                why = (
                    f"leak: all {len(mine)} server processes passed the memory budget "
                    f"(first: {leaks[0].removeprefix(OVER_BUDGET + ': ')}); their memory "
                    "curves are in the replicates"
                )
            else:
                why = "no measured slice (every process stopped or unsettled)"
            failure = StackFailure(Phase.MEASURE, why)
        out.append(
            CellOutcome(
                p.ok + ok if failure is None else p.ok,
                p.next_rep + run.options.processes,
                failure,
                None,
                flags.get(p.cell_id),
            )
        )
    return out


def stack_log_dir(log_dir: Path, cell: CellPlan) -> Path:
    """Where the logs of ``cell``'s processes go under the study's ``log_dir`` (each in
    ``process-K`` under it: :class:`~pywebbench.bringup.ServerPool`)."""
    return Path(log_dir) / cell.variant.key.replace("/", "_") / cell.workload.name
