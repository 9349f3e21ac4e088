"""An interleaved group: every stack of the group up at once, loaded in slices of the same
rounds (docs/steady-state.md#the-interleaved-study).

A study with ``design = "interleaved"`` splits its cells into groups that can share the
server cores (:func:`interleaved_groups`: one workload, one load point, every interpreter).
For each group, :func:`run_group` starts ``processes`` server processes of every stack, each
pinned to the server cores and verified, and keeps them all up (a
:class:`~pywebbench.bringup.ServerPool`); one sliced engine run through the load agent
(:meth:`pywebbench.load.LoadAgent.run_sliced`) then loads them in slices, every process once a
round in a seeded random order (keep-alive connections kept open across slices; with
``--connection-mode close`` or N, opened inside each process's slices only). After each round
it judges every process's warm-up against the round and the stacks' intervals
(:mod:`pywebbench.analysis.group`), and ends the run once every process is warm, has
``MIN_ROUNDS`` measured rounds, and every stack's ratio to the group's reference is as narrow
as asked (or the group's budget is spent). While it runs, each process's memory is sampled;
one over the memory budget is stopped with its memory curve (marked ``leak``, or ``memory
share`` below its collector's floor: :func:`over_budget_failure`), and the group goes on
without it.

What is stored is what a sequential study stores, so the report, ``compare``, ``history``
and the exports read it as they are: a replicate per server process, an iteration per slice
(``warmup`` before the process was warm, ``measured`` after; ``idx`` is the round), and the
group's figures in each cell's flags (``flags["group"]``: req/s at the group's average round,
the ratio to the reference with its interval, and the ratio to every other stack of the
group, from which ranks and ties are read).

An open loop (``--rate``) offers every process the same rate in its slices (the engine's
arrivals start with each slice's window and stop at its end; what was not sent by then is
dropped and counted unsent). Its req/s is pinned at that rate, so its figures are latency:
each stack's p50 and p99 from its processes' merged measured slices, with intervals over
the processes (:func:`pywebbench.analysis.group.fit_percentile`); the warm-up is judged on
the slices' median latency, and the stop rule on every stack's p99 interval
(``flags["group"]["latency"]``; the req/s figures stay, without intervals).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pywebbench import formatting as fmt
from pywebbench.analysis.estimate import MIN_ROUNDS
from pywebbench.analysis.group import GEOMETRIC_MEAN, Disagreement, Observation, disagreement
from pywebbench.analysis.steady import (
    drift,
    leak,
)
from pywebbench.analysis.warmup import WarmRule, WarmupEnd, round_shares
from pywebbench.analysis.warmup_class import WarmupClass, classify
from pywebbench.bringup import ServerPool, StackFailure
from pywebbench.load.sliced import SlicedResult, SliceStats
from pywebbench.run.measure import no_sigint
from pywebbench.run.rotation import (
    JIT_SETTLE_S,
    JIT_SLICE_S,
    LEAST_ROUNDS,
    MEMORY_EVERY_S,
    OVER_BUDGET,
    SETTLE_BOUNDS,
    SLICE_BOUNDS,
    GroupJudgement,
    Member,
    Rotated,
    Rotation,
    RotationSettings,
    Rounds,
    below_collector,
    first_touch_s,
    judge,
    memory_budgets,
    settle_after,
    slots,
)
from pywebbench.run.rows import slice_iteration, started_server_columns
from pywebbench.run.schedule import CellOutcome, CellProgress
from pywebbench.run.steadiness import leak_floors
from pywebbench.store import CellStatus, IterationKind, Phase, Replicate, StoreWriter, utcnow
from pywebbench.study.config import LoadConfig
from pywebbench.study.matrix import CellPlan

if TYPE_CHECKING:
    from pywebbench.load import LoadAgent, LoadSpec

#: The stop rule's interval half-width when the study sets no ``ci_target``.
DEFAULT_CI_WIDTH = 0.03
#: Processes a group adds at once to a stack whose processes disagree (:meth:`GroupRun.grow`),
#: up to :data:`MOST_PROCESSES` times the group's ``processes`` a stack, at most
#: :data:`MOST_GROWTHS` times a group.
GROW_BY = 2
MOST_PROCESSES = 2
MOST_GROWTHS = 2
#: Measured rounds every process has before a group judges whether its processes disagree.
GROW_AFTER = MIN_ROUNDS // 2
#: How many times what their slices' noise explains the processes must spread before more
#: of them are started: then more rounds, which only shrink that noise, could narrow the
#: intervals by a quarter of their variance at most.
GROW_WHEN = 4.0
#: How far past its budget a group may run to give a stack more processes: a further leg
#: needs :func:`leg_rounds` rounds, and PyPy's processes are warm and measured only late in
#: a group's budget (the quick study's PyPy hello group of 2026-12-07 ended at +-7.8% with
#: 97% of its spread in one stack, its budget left short of a leg by a fifth).
GROW_OVERRUN = 0.25
#: Seconds of load each process gets alone at the start of a further leg (the processes
#: already measured reconnect; the new ones were warmed first, :data:`~pywebbench.run.rotation.
#: JIT_FIRST_TOUCH_S` on a JIT interpreter).
LEG_TOUCH_S = 0.25
#: A group sizes its settles again, once every process is warm, when its rounds would take
#: at most this share of their time (and give back more than the further run's reconnects).
REPLAN_WHEN = 0.9


#: A stack whose idle processes take more than this share of a core each during the others'
#: slices is named in the group's figures (``idle_burn``): every other stack's slices lack
#: what it takes (socketify-native's took ~3% each, and a group of 21 processes with three
#: of them read 0.75-0.89 of wrk, against 0.97-0.99 without them).
IDLE_BURN = 0.01
#: The largest process's memory a process's budget must hold this many times over before a
#: group starts more processes (each process's share of the machine shrinks with them).
MEMORY_HEADROOM = 1.5


def over_budget_failure(stopped: Sequence[Member], processes: int) -> str:
    """Why a stack fails whose server processes (``stopped``, every one of them) were all
    stopped at their memory budget in a group of ``processes``: a leak when some had
    passed their collector's floor (or have none: CPython), else this machine's memory
    shared among too many processes for that interpreter's heap (not a leak)."""
    first = (stopped[0].stopped or "").removeprefix(OVER_BUDGET + ": ")
    if any(not below_collector(m) for m in stopped):
        return (
            f"leak: all {len(stopped)} server processes were stopped at the memory budget "
            f"(first: {first}); their memory curves are in the replicates"
        )
    return (
        f"memory: all {len(stopped)} server processes were stopped at their share of this "
        f"machine's memory among the group's {processes} processes, before their collector "
        f"ran (first: {first}); not a leak: measure fewer stacks at once (--python one "
        "interpreter, fewer servers or frameworks) or set load.memory_budget_mib"
    )


def _jit(p: CellProgress) -> bool:
    """Whether ``p``'s stack runs on a JIT interpreter (PyPy)."""
    return p.cell.variant.stack.interpreter.is_pypy


def leg_rounds(rule: WarmRule) -> int:
    """Rounds a further leg needs, and a group's budget must have left before it starts
    one: the new processes' warm-up (the rule's first skipped rounds and its window), then
    their measured rounds."""
    return rule.skip + rule.window + MIN_ROUNDS


def least_load_s(cells: Sequence[CellPlan], load: LoadConfig) -> float:
    """The fewest seconds of load a group of ``cells`` plans, whatever its budget: every
    process's first touch, then the least rounds a group plans (with both interpreters the
    new processes' warm-up and measured rounds, :func:`leg_rounds`) of the shortest slots a
    round can have (each process's shortest slice and settle; a JIT process's
    :data:`JIT_SLICE_S` and :data:`JIT_SETTLE_S`). The slices the first touches size, and
    the settles, are longer for slower stacks: this is a floor."""
    jit = [c.variant.stack.interpreter.is_pypy for c in cells]
    options = GroupOptions.of(load)
    processes = [options.processes_for(j) for j in jit]
    both = any(jit) and not all(jit)
    shortest = load.slice_s or (JIT_SLICE_S if any(jit) and not both else SLICE_BOUNDS[0])
    touches = sum(n * first_touch_s(j) for n, j in zip(processes, jit, strict=True))
    slots = sum(
        n * (max(shortest, JIT_SLICE_S) + JIT_SETTLE_S if j else shortest + SETTLE_BOUNDS[0])
        for n, j in zip(processes, jit, strict=True)
    )
    rounds = leg_rounds(WarmRule()) if both else LEAST_ROUNDS
    return touches + rounds * slots


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
    return None


def group_key(cell: CellPlan) -> tuple[str, str, str, str]:
    """The cells that share the server cores in one interleaved group: one workload (and its
    parameters), one load point, whatever the interpreter (CPython's and PyPy's stacks are
    compared in the same rounds; each interpreter's processes keep their own variance in
    the fit, and PyPy's their longer slices). The load point names the protocol (``c64
    h2c``) and a WebSocket workload is its own, so a group speaks one protocol: the sliced
    run's load is one spec for every target."""
    return (
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
    groups: dict[tuple[str, str, str, str], list[CellPlan]] = {}
    for c in cells:
        groups.setdefault(group_key(c), []).append(c)
    return list(groups.values())


@dataclass(frozen=True)
class GroupOptions:
    """How a group is measured."""

    processes: int = 3
    #: Processes of a stack on a JIT interpreter (PyPy); None: ``processes``.
    jit_processes: int | None = None
    budget_s: float = 150.0
    jit_budget_s: float = 300.0  # on a JIT interpreter (PyPy)
    ci_width: float = DEFAULT_CI_WIDTH
    slice_s: float | None = None  # None: sized by the first touches (slots)
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
            jit_processes=max(2, load.jit_replicates) if load.jit_replicates else None,
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

    def processes_for(self, jit: bool) -> int:
        """The processes a stack starts with: ``jit_processes`` on a JIT interpreter, when
        set, else ``processes``."""
        return self.jit_processes if jit and self.jit_processes is not None else self.processes


@dataclass(kw_only=True)
class GroupMember(Member):
    """One server process of the group, with its cell and its replicate."""

    progress: CellProgress
    replicate_id: int


def enough(j: GroupJudgement, members: Sequence[Member], options: GroupOptions) -> bool:
    """The stop rule: every live process warm with
    :data:`~pywebbench.run.rotation.MIN_ROUNDS` measured rounds
    (:meth:`GroupJudgement.settled`), and every gap of the ranking and every stack's ratio
    to the reference within +-``ci_width``, or an open loop's every stack's p99 interval
    over its processes (:meth:`GroupJudgement.widest`)."""
    if not j.settled(members):
        return False
    if j.judged is not None and len(j.judged.levels) < 2:
        return True  # one stack: nothing to compare, its processes are warm and measured
    width = j.widest(options.reference)
    return math.isfinite(width) and width <= options.ci_width


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
        #: An open loop (``--rate``): every process offered the cells' rate, latency judged.
        self.open_loop = any(p.cell.load_model == "open" for p in self.cells)
        self.store = store
        #: The group's server processes: every one it started is stopped by :meth:`stop_all`.
        self.pool = pool
        self._load_spec = load_spec
        self._say = say
        self.rotation = Rotation(
            pool,
            agent,
            server_cpus=server_cpus,
            generator_cpus=generator_cpus,
            interference=interference,
            rss=rss,
            say=say,
        )
        self.members: list[GroupMember] = []
        #: What the engine run measured, once measured (its legs joined).
        self.rotated: Rotated | None = None
        #: Cell id -> processes started for it.
        self.started: dict[int, int] = {}
        #: The stacks given more processes, and why (:meth:`grow`).
        self.grown: list[dict[str, Any]] = []
        #: The members loaded in the engine run's legs (by index).
        self.measured: set[int] = set()
        #: The settles sized again once every process was warm (:meth:`_warm_rates`): a
        #: round's seconds before and after, each stack's settle and warm rate, the round it
        #: began; None: not.
        self.replanned: dict[str, Any] | None = None
        #: How the rounds were planned (:meth:`measure`), stored with the group's figures.
        self.plan: dict[str, Any] = {}
        #: Legs ended to leave out the windows of processes stopped in them (their memory):
        #: the round the next leg began with, and how many were left out.
        self.left_out: list[dict[str, Any]] = []
        #: Why the group last declined to start more processes of a stack whose processes
        #: disagree (:meth:`_to_grow`), said with its wide intervals; None: it never had to.
        self.not_grown: str | None = None

    @property
    def result(self) -> SlicedResult | None:
        """The sliced engine run's result, once measured."""
        return self.rotated.result if self.rotated is not None else None

    @property
    def interrupted(self) -> bool:
        """Ctrl-C ended the engine run (what it measured is stored all the same)."""
        return self.rotated is not None and self.rotated.interrupted

    @property
    def loaded_s(self) -> float:
        """Seconds of load given so far (probes and the run)."""
        return self.rotation.loaded_s

    # -- bring-up --------------------------------------------------------------------------

    def bring_up(self) -> None:
        """Start and verify every stack's processes, the stacks interleaved (process 1 of
        each, then process 2 of each, ...), so that no stack's processes are all older. A
        stack that fails to start or verify fails its cell; the others go on."""
        asked = {p.cell_id: self.options.processes_for(_jit(p)) for p in self.cells}
        for k in range(max(asked.values(), default=0)):
            for p in self.cells:
                if p.failure is None and k < asked[p.cell_id]:
                    self._start(p, k, f"process {k + 1} of {asked[p.cell_id]}")

    def _start(
        self, p: CellProgress, k: int, which: str, *, fails_cell: bool = True
    ) -> GroupMember | None:
        """Start and verify process ``k`` of ``p``'s stack into the group; None when it does
        not come up or answer: the cell failed, its processes stopped, or (``fails_cell``
        False: a process added to a measured stack) that process alone failed and left."""
        self._say(f"starting {p.cell.variant.key} ({which})")
        number = p.next_rep + k  # after those of an interrupted attempt
        self.started[p.cell_id] = max(self.started.get(p.cell_id, 0), k + 1)
        rep_id = self.store.add_replicate(
            Replicate(None, p.cell_id, number, CellStatus.RUNNING, utcnow())
        )
        try:
            server = self.pool.start(p.cell, k)
        except StackFailure as exc:
            self._fail_replicate(rep_id, exc)
            if fails_cell:
                self._fail_cell(p, exc)
            return None
        member = GroupMember(
            index=1 + max((m.index for m in self.members), default=-1),
            stack=p.cell.variant.key,
            k=number,
            server=server,
            url="",
            jit=p.cell.variant.stack.interpreter.is_pypy,
            family=p.cell.variant.stack.interpreter.name,
            collects_from=leak_floors(p.cell.variant.stack.interpreter)[1],
            progress=p,
            replicate_id=rep_id,
        )
        self.members.append(member)
        self.store.update_replicate(rep_id, **started_server_columns(server))
        spec = self._load_spec(p.cell, server.base_url)
        member.url, member.unix_socket = spec.url, spec.unix_socket
        self._say(f"verifying {p.cell.variant.key} {p.cell.workload.name}")
        failure = self.pool.verify(server, p.cell)
        if failure is not None:
            self._fail_replicate(rep_id, failure)
            if fails_cell:
                self._fail_cell(p, failure, rep_id)
            else:
                with no_sigint():
                    self.pool.stop(server)
                self.members.remove(member)
            return None
        return member

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
        if self.rotated is None:  # not measured yet: the engine's targets are renumbered
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
        are up (nothing to interleave).

        Where the variance lives decides what the budget buys (Kalibera & Jones): when a
        stack's processes disagree more than their slices' noise explains, more rounds will
        not narrow its intervals and more processes will, so the run ends its leg, starts
        more processes of that stack (:meth:`grow`) and goes on with all of them in a further
        leg of the same rounds' numbering (:meth:`Rotation.run` with ``after``)."""
        live = [m for m in self.members if m.stopped is None]
        if len(live) < 2:
            return None
        first = live[0]
        jit = any(m.jit for m in live)
        both = jit and not all(m.jit for m in live)  # interpreters of both kinds
        base = self._load_spec(first.progress.cell, first.server.base_url)
        n = len(live)
        budget_s = self.options.jit_budget_s if jit else self.options.budget_s
        started = time.monotonic()

        # every process's first touch, alone, its last part counted: what each stack's
        # slowest process serves sizes the settle after that stack's slices (a JIT's cold
        # process serves a fraction of its rate: once every process is warm the settles
        # are sized again); the sliced run's first round then opens the connections again
        # (the warm-up rule never judges a first round), a further leg's reconnects alone
        # first (LEG_TOUCH_S)
        touched = self.rotation.touch(live, self._spec_of)
        if touched is None:
            raise KeyboardInterrupt
        rates: dict[str, float] = {}
        jits = {m.stack for m in live if m.jit}
        for m, rps in zip(live, touched, strict=True):
            rates[m.stack] = min(rps, rates.get(m.stack, math.inf))
        self._say("probed: " + ", ".join(f"{s} {r:,.0f} req/s" for s, r in rates.items()))
        connections = first.progress.cell.connections
        touched_s = time.monotonic() - started

        def planned(
            rates: Mapping[str, float], left_s: float, touch_s: float = LEG_TOUCH_S
        ) -> RotationSettings:
            """The rotation's settings for ``live`` with ``left_s`` of budget left and each
            stack's slowest process at ``rates``: a sliced run whose processes were touched
            already (each reconnects alone for ``touch_s`` first: a further leg's
            :data:`LEG_TOUCH_S`; the first leg's 0, its first round unjudged). The slice
            holds two response times of the slowest stack; each stack's settle two of its
            own (:func:`~pywebbench.run.rotation.settle_after`)."""
            touches = len(live) * touch_s
            slice_s, settle_s, rounds = slots(
                len(live), left_s - touches, connections, min(rates.values()),
                self.options.slice_s,
                shortest=JIT_SLICE_S if jit and not both else SLICE_BOUNDS[0],
            )  # fmt: skip
            settings = RotationSettings(
                slice_s=slice_s,
                settle_s=settle_s,
                rounds=rounds,
                seed=self.options.seed,
                touch_s=touch_s,
                core_speed=self.options.core_speed,
                interference_max=self.options.interference_max,
                memory_budget_bytes=self.options.memory_budget_bytes,
                settle_s_by_stack={
                    s: settle_after(connections, r, s in jits) for s, r in rates.items()
                },
            )
            if both:  # each process its own slice: PyPy's longer, CPython's as sized
                settings = dataclasses.replace(settings, jit_slice_s=max(slice_s, JIT_SLICE_S))
            least = leg_rounds(self.options.rule) if both else LEAST_ROUNDS
            rounds = max(least, int((left_s - touches) / settings.round_s(live) + 1e-9))
            return dataclasses.replace(settings, rounds=rounds)

        settings = planned(rates, budget_s - touched_s, touch_s=0.0)
        #: how the rounds were planned, stored with the group's figures (``group.plan``)
        self.plan = {
            "touch_s": round(touched_s, 1),
            "slice_s": settings.slice_s,
            "jit_slice_s": settings.jit_slice_s,
            "settle_s_by_stack": dict(settings.settle_s_by_stack),
            "round_s": round(settings.round_s(live), 2),
            "rounds_planned": settings.rounds,
        }
        slices_said = f"{settings.slice_s:g} s slices" + (
            f" ({settings.jit_slice_s:g} s on a JIT)" if both else ""
        )
        settles = sorted(settings.settle_s_by_stack.values())
        self._say(
            f"measuring {len({m.stack for m in live})} stacks, {len(live)} processes "
            f"interleaved: {slices_said}, {settles[0]:g}-{settles[-1]:g} s settles, "
            f"at most {settings.rounds} rounds ({settings.planned_s(live):.0f} s)"
        )
        grow: list[Disagreement] = []  # what ended a leg to give a stack more processes
        #: processes stopped in this leg, when they ended it: their windows would stay empty
        dead: list[GroupMember] = []
        leg_first = 0  # the round this leg began with
        #: each stack's warm rate, when it ended a leg to shorten the settles
        replan: list[dict[str, float]] = []

        def stop(so_far: Rounds) -> bool:
            members = [m for m in self.members if m.stopped is None]
            j = judge(
                so_far.slices,
                self.members,
                self.options.rule,
                dropped=so_far.dropped,
                open_loop=self.open_loop,
            )
            warm = sum(1 for m in members if j.warm.get(m.index) is not None)
            width = j.widest(self.options.reference)
            self._say(
                f"round {so_far.complete}: {warm} of {len(members)} processes warm, "
                "widest CI " + (fmt.half_width(width) if math.isfinite(width) else "n/a")
            )
            if enough(j, self.members, self.options):
                return True
            left_s = budget_s - (time.monotonic() - started)
            stopped = [m for m in live if m.stopped is not None]
            if stopped and len(live) - len(stopped) >= 2:
                # a stopped process's windows stay in the leg's plan, empty: end the leg
                # when they would take longer than a further leg's reconnects
                rounds_left = settings.rounds - (so_far.complete - leg_first)
                empty = rounds_left * sum(
                    settings.slice_for(m) + settings.settle_after(m) for m in stopped
                )
                if empty > 2 * len(live) * LEG_TOUCH_S:
                    dead.extend(stopped)
                    return True
            if self.replanned is None:
                warm_rates = self._warm_rates(j, so_far)
                if warm_rates is not None:
                    shorter = planned(warm_rates, left_s)
                    needed = self._leg_s(shorter, members)
                    # a further leg reconnects every process: worth it when the rounds get
                    # shorter by a tenth or more and give back more than that in those left
                    now, then = settings.round_s(members), shorter.round_s(members)
                    saved = (now - then) * max(0, settings.rounds - so_far.complete)
                    cost = 2 * len(members) * LEG_TOUCH_S
                    if then <= REPLAN_WHEN * now and saved > cost and left_s >= needed:
                        replan.append(warm_rates)
                        return True
            found = self._to_grow(j, left_s + GROW_OVERRUN * budget_s, settings, len(self.grown))
            if found is not None:
                grow.append(found)
                return True
            return False

        while True:
            grow.clear()
            replan.clear()
            dead.clear()
            leg_first = self.rotated.next_round() if self.rotated is not None else 0
            self.measured.update(m.index for m in live)
            self.rotated = self.rotation.run(live, base, settings, stop, after=self.rotated)
            if self.rotated.interrupted:
                break
            done = self.rotated.next_round() - leg_first
            live = [m for m in self.members if m.stopped is None]
            if dead:
                self.left_out.append({"round": self.rotated.next_round(), "processes": len(dead)})
                self._say(
                    f"{len(dead)} processes stopped: the rounds go on without their windows "
                    f"from round {self.rotated.next_round()}"
                )
                settings = dataclasses.replace(
                    settings, rounds=max(1, settings.rounds - done), touch_s=LEG_TOUCH_S
                )
                continue
            if replan:
                before = settings.round_s(live)
                settings = planned(replan[0], budget_s - (time.monotonic() - started))
                self.replanned = {
                    "round_s": [round(before, 2), round(settings.round_s(live), 2)],
                    "settle_s_by_stack": dict(settings.settle_s_by_stack),
                    "warm_rps": {s: round(r, 1) for s, r in replan[0].items()},
                    "round": self.rotated.next_round(),
                }
                self._say(
                    f"every process warm: settles sized again, rounds of "
                    f"{settings.round_s(live):.1f} s instead of {before:.1f} s from round "
                    f"{self.rotated.next_round()}"
                )
                continue
            if not grow or not self.grow(grow[0]):
                break
            live = [m for m in self.members if m.stopped is None]
            left_s = budget_s - (time.monotonic() - started)
            n = len(live)
            settings = dataclasses.replace(
                settings,
                touch_s=LEG_TOUCH_S,
                rounds=max(
                    leg_rounds(self.options.rule),
                    int((left_s - n * LEG_TOUCH_S) / settings.round_s(live)),
                ),
            )
        return judge(
            self.rotated.speed.slices,
            self.members,
            self.options.rule,
            dropped=self.rotated.dropped,
            final=True,
            open_loop=self.open_loop,
        )

    def _spec_of(self, m: GroupMember) -> LoadSpec:
        """The load on process ``m`` (its cell's, at its URL)."""
        return self._load_spec(m.progress.cell, m.server.base_url)

    def _leg_s(self, settings: RotationSettings, members: Sequence[Member]) -> float:
        """Seconds a further leg of ``members`` needs at ``settings``: their reconnects, then
        :func:`leg_rounds` rounds."""
        return len(members) * LEG_TOUCH_S + leg_rounds(self.options.rule) * settings.round_s(
            members
        )

    def _warm_rates(self, j: GroupJudgement, so_far: Rounds) -> dict[str, float] | None:
        """Each stack's slowest live process's median requests/s over its warm slices, once
        every live process is warm (None before, or without a slice to read): what each
        settle must drain, read warm. The first touches that sized the settles read each
        process cold, and a JIT may be far from warm then."""
        live = [m for m in self.members if m.stopped is None]
        if not live or j.unsettled(live):
            return None
        rates: dict[str, float] = {}
        for m in live:
            start = j.starts.get(m.index)
            mine = [s.rps for s in so_far.slices if s.target == m.index and start is not None
                    and s.round >= start and s.requests > 0]  # fmt: skip
            if not mine:
                return None
            rates[m.stack] = min(statistics.median(mine), rates.get(m.stack, math.inf))
        return rates

    def _to_grow(
        self, j: GroupJudgement, left_s: float, settings: RotationSettings, growths: int
    ) -> Disagreement | None:
        """The stack to give more processes now, ``growths`` done, ``left_s`` of the budget
        left (:data:`GROW_OVERRUN` past the budget included) and ``settings`` the rotation's
        (:meth:`measure`), or None: not every process
        warm with :data:`GROW_AFTER` measured rounds yet, the intervals narrow enough or
        narrowing with rounds, the stack at its most processes, the memory or the budget
        left too small for them, or :data:`MOST_GROWTHS` done."""
        judged = j.judged
        if growths >= MOST_GROWTHS or judged is None or len(judged.levels) < 2:
            return None
        if not j.settled(self.members, GROW_AFTER):
            return None
        if j.widest(self.options.reference) <= self.options.ci_width:
            return None
        live = [m for m in self.members if m.stopped is None]
        found = disagreement(judged, {m.index: m.stack for m in live}, at_least=GROW_WHEN)
        if found is None:
            return None
        mine = [m for m in live if m.stack == found.stack]
        if len(mine) + GROW_BY > MOST_PROCESSES * self.options.processes_for(mine[0].jit):
            self.not_grown = f"{found.stack} has {len(mine)} processes, the most it may have"
            return None
        after = live + mine[:1] * GROW_BY  # the processes with the new ones
        budgets = memory_budgets(self.options.memory_budget_bytes, [m.jit for m in after])
        for m, budget in zip(after, budgets, strict=True):
            largest = max((o.memory[-1][1] for o in live if o.memory and o.jit == m.jit), default=0)
            if budget < MEMORY_HEADROOM * largest:
                self.not_grown = (
                    f"with {GROW_BY} more processes each would get {budget / 2**20:,.0f} MiB, "
                    f"under {MEMORY_HEADROOM:g}x the {largest / 2**20:,.0f} MiB one holds"
                )
                return None
        needed_s = self._leg_s(settings, after)
        if left_s < needed_s:
            self.not_grown = (
                f"a further leg of {leg_rounds(self.options.rule)} rounds with "
                f"{GROW_BY} more processes needs {needed_s:.0f} s, and the budget (with its "
                f"overrun) had {max(0.0, left_s):.0f} s left"
            )
            return None
        return found

    def grow(self, why: Disagreement) -> bool:
        """Start :data:`GROW_BY` more processes of ``why.stack`` (warmed with their first
        touch, continuous, before they join the rotation); False when none came up."""
        p = next(p for p in self.cells if p.cell.variant.key == why.stack)
        have = sum(1 for m in self.members if m.progress is p and m.stopped is None)
        by_index = {m.index: m for m in self.members}
        reason = why.describe(lambda i: str(by_index[i].k + 1)).split(": more rounds")[0]
        self._say(f"{reason}: starting {GROW_BY} more processes of {why.stack}")
        added = []
        for _ in range(GROW_BY):
            k = self.started.get(p.cell_id, 0)
            m = self._start(p, k, f"process {k + 1}, added", fails_cell=False)
            if m is None:
                continue
            added.append(m)
            touched = self.rotation.touch([m], self._spec_of)
            if touched is None and self.rotated is not None:  # stored as it stands
                self.rotated = dataclasses.replace(
                    self.rotated,
                    result=self.rotated.result.model_copy(update={"interrupted": True}),
                )
                return False
        self.grown.append(
            {
                "stack": why.stack,
                "added": len(added),
                "processes": have + len(added),
                "why": reason,
            }
        )
        return bool(added)

    # -- the store -------------------------------------------------------------------------

    def store_outcome(self, j: GroupJudgement) -> dict[int, dict[str, Any]]:
        """Every slice, every process's judgement and the group's figures into the store;
        the group figures by cell id (for the cells' flags)."""
        rotated = self.rotated
        assert rotated is not None  # measured
        slices = rotated.result.slices
        dropped = rotated.dropped
        by_member: dict[int, list[SliceStats]] = {}
        for s in slices:
            by_member.setdefault(s.target, []).append(s)
        started = min((s.started_at for s in slices), default=time.time())
        ended = max((s.ended_at for s in slices), default=started)
        with no_sigint():
            for m in self.members:
                if m.index not in self.measured:
                    continue
                self._store_member(m, by_member.get(m.index, []), j, dropped, started)
        return self._group_flags(j, started, ended)

    def _store_member(
        self,
        m: GroupMember,
        mine: list[SliceStats],
        j: GroupJudgement,
        dropped: Callable[[SliceStats], str | None],
        t0: float,
    ) -> None:
        cell_id = m.progress.cell_id
        warm = j.warm.get(m.index)
        first = j.starts.get(m.index, warm)  # where the fit's slices of it start
        rotated = self.rotated
        assert rotated is not None  # measured
        judged = rotated.speed.slices
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
                rotated.speed.rates.get(s.index),
                m.k,
                kind=kind,
                memory=(max(mem), mem[-1]) if mem else (None, None),
            )
            cpu = rotated.cpu_share(s)
            if cpu is not None:  # requests per CPU-second
                it = dataclasses.replace(it, requests_per_cpu_s=s.rps / cpu)
            if self.interrupted:  # the group is measured again whole on --resume
                it = dataclasses.replace(it, interrupted=True)
            self.store.add_iteration(it)
        cls: WarmupClass | None = classify(warm_part, measured_part)
        if warm is None:
            cls = WarmupClass.NO_STEADY_STATE
        trend = drift(measured_part)
        requests, memory = _requests_at(mine, m.memory)
        floor, _ = leak_floors(m.progress.cell.variant.stack.interpreter)
        grows = leak(requests, memory, floor=floor, collector_floor=m.collects_from)
        leak_doc: dict[str, Any] = grows.to_dict()
        if m.stopped is not None and m.stopped.startswith(OVER_BUDGET):
            leak_doc["stopped"] = m.stopped
            if below_collector(m):
                # stopped before its collector's first major collection: no evidence of a
                # leak, the group's processes wanted more than this machine's share each
                leak_doc.update(leaking=False, uncollected=True, over_share=True)
            else:
                leak_doc["leaking"] = True  # passed the budget: marked leak, with its curve
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
        wide = self._why_wide(j, reference)
        burners = self._idle_burners()
        apart = fit.apart()
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
                # the stacks the geometric mean is over (its interpreter's, in a group of
                # several)
                "basis": fit.basis(key) if reference is None else [reference],
                "stacks": len(fit.levels),
                "processes": fit.counts[key],
                # the ratio's own (a ratio across interpreters: Welch-Satterthwaite's)
                "df": int(vs.df) if math.isfinite(vs.df) else fit.df,
                "rps": rps,
                "rps_low": rps_low,
                "rps_high": rps_high,
                "ratio": vs.ratio,
                "low": vs.low if math.isfinite(vs.low) else None,
                "high": vs.high if math.isfinite(vs.high) else None,
                "span": [_iso(started), _iso(ended)],
                "rounds": j.rounds,
                "seed": self.options.seed,
                "idle_cpu_share": self.rotated.idle if self.rotated is not None else None,
                "vs": {
                    other: _triple(fit.ratio(key, other)) for other in fit.levels if other != key
                },
            }
            if self.open_loop:
                out[p.cell_id].update(self._open_loop_flags(j, p, out[p.cell_id]))
            if wide is not None:
                out[p.cell_id]["wide_because"] = wide
            if apart:
                out[p.cell_id]["apart"] = apart
            if self.grown:
                out[p.cell_id]["grown"] = self.grown
            if self.replanned is not None:
                out[p.cell_id]["replanned"] = self.replanned
            if self.plan:
                out[p.cell_id]["plan"] = self.plan | {
                    "legs": self.rotated.legs if self.rotated is not None else 0,
                    "left_out": self.left_out,
                }
            if burners:
                out[p.cell_id]["idle_burn"] = burners
        return out

    def _open_loop_flags(
        self, j: GroupJudgement, p: CellProgress, flags: dict[str, Any]
    ) -> dict[str, Any]:
        """An open loop's figures of ``p``'s stack, over ``flags`` (the req/s ones): its
        req/s without intervals (pinned at the offered rate, the ratios are read, not
        judged), and ``latency``: the offered rate, its p50 and p99 (us) with their
        intervals over its processes, and the sends its measured slices were offered and
        dropped unsent."""
        key = p.cell.variant.key
        latency: dict[str, Any] = {"rate": p.cell.rate}
        if j.latency is not None and key in j.latency.p99.levels:
            for name, fit in (("p50", j.latency.p50), ("p99", j.latency.p99)):
                iv = fit.level_interval(key)
                latency[f"{name}_us"] = iv.ratio
                latency[f"{name}_low"] = iv.low if math.isfinite(iv.low) else None
                latency[f"{name}_high"] = iv.high if math.isfinite(iv.high) else None
        rotated = self.rotated
        assert rotated is not None  # measured
        mine = {m.index for m in self.members if m.progress is p}
        measured = [s for s in j.measured_slices(rotated.result.slices) if s.target in mine]
        latency["offered"] = sum(s.offered for s in measured)
        latency["unsent"] = sum(s.unsent for s in measured)
        return {
            "rps_low": None,
            "rps_high": None,
            "low": None,
            "high": None,
            "vs": {other: [v[0], None, None] for other, v in flags["vs"].items()},
            "latency": latency,
        }

    def _idle_burners(self) -> dict[str, float]:
        """The stacks whose idle processes take more than :data:`IDLE_BURN` of a core each
        during the others' slices (the median over their slices, then over the stack's
        processes), said: every other stack of the group reads that much lower."""
        rotated = self.rotated
        if rotated is None or not rotated.idle_of:
            return {}
        by_stack: dict[str, list[float]] = {}
        for m in self.members:
            shares = rotated.idle_of.get(m.index)
            if shares:
                by_stack.setdefault(m.stack, []).append(statistics.median(shares))
        burners = {
            stack: round(statistics.median(v), 4)
            for stack, v in by_stack.items()
            if statistics.median(v) > IDLE_BURN
        }
        for stack, share in burners.items():
            self._say(
                f"{stack}: its idle processes took {share:.1%} of a core each during the "
                "other processes' slices, which every other stack's slices lack"
            )
        return burners

    def _why_wide(self, j: GroupJudgement, reference: str | None) -> str | None:
        """Why the group ended wider than asked: said, and stored with the group's figures;
        None when it ended as narrow as asked. Its processes disagree more than its slices
        do (:func:`pywebbench.analysis.group.disagreement`: more processes would narrow
        it), or they agree within the slices' noise and the budget ended first (more rounds
        would: how many, and the flag that gives them)."""
        fit = j.judged
        width = j.widest(reference)
        if fit is None or width <= self.options.ci_width:
            return None
        by_index = {m.index: m for m in self.members}
        found = disagreement(fit, {i: m.stack for i, m in by_index.items()})
        if found is not None:
            why = found.describe(lambda i: str(by_index[i].k + 1))
            if self.not_grown is not None:
                why += f"; none were added: {self.not_grown}"
        elif math.isfinite(width):
            jit = any(m.jit for m in self.members)
            why = (
                f"the budget ended before its slices' noise allowed the "
                f"+-{self.options.ci_width:.1%} asked: judged no narrower than that noise "
                f"gives, its widest interval was +-{width:.1%}. The processes agree within it "
                f"(a slice {fit.slice_sd:.1%} off its round and process, sd), and more rounds "
                f"narrow it: about {(width / self.options.ci_width) ** 2:.1f}x its {j.rounds} "
                f"rounds ({'--jit-group-budget' if jit else '--group-budget'}), or a quieter "
                "machine"
            )
        else:
            return None
        self._say(f"wide intervals: {why}")
        return why


def group_label(cell: CellPlan) -> str:
    """``hello @ c64``: what the group's cells share."""
    return f"{cell.workload.name} @ {cell.load_point}"


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
            over = [m for m in mine if m.stopped and m.stopped.startswith(OVER_BUDGET)]
            if j is None:
                why = "fewer than two server processes of the group were up"
            elif mine and len(over) == len(mine):
                why = over_budget_failure(over, len(run.members))
            else:
                why = "no measured slice (every process stopped or unsettled)"
            failure = StackFailure(Phase.MEASURE, why)
        out.append(
            CellOutcome(
                p.ok + ok if failure is None else p.ok,
                p.next_rep + run.started.get(p.cell_id, run.options.processes_for(_jit(p))),
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
