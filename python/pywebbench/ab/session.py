"""Run an A/B: a group of two sides measured as a study's interleaved group is, then the
estimate.

The services the sides' workload needs (redis, PostgreSQL) are started first, as a study
starts them. Each side's servers (``processes`` of them, so that the interval holds the
difference between two server processes of the same app: :mod:`pywebbench.analysis.estimate`)
are started with the shared bring-up (:mod:`pywebbench.bringup`: its launch options, with the
services' environment, and one :class:`~pywebbench.bringup.ServerPool` for both sides),
pinned to the same server cores, and stay up for the whole run. They are then measured by
the rotation a study's interleaved group uses (:mod:`pywebbench.run.rotation`): one sliced
engine run through the load agent whose targets are every side's servers, the sides'
processes alternating; each process's first touch, then its warm-up judged against the round
(its slices count from the round its share stopped moving); a slice that a burst of other
work hit is dropped (and its round's pair with it); a process over its memory budget is
stopped. After every round the ratio is re-estimated from the pairs of warm slices; once
every process is warm and the CI is narrower than asked the engine is told "enough". With
``instructions`` each side is then counted under valgrind (:mod:`pywebbench.run.instructions`)
on ``processes`` fresh servers of its own, the sides in turn, after the timed run, so no
count shares the cores with it; the counts' ratio has an interval over those server
processes, like the time ratio.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pywebbench import bringup
from pywebbench.ab.sides import SideError, SideStudy
from pywebbench.analysis.estimate import (
    DropRule,
    RoundPair,
    half_width,
    kept_rounds,
    narrow_enough,
    pair_rounds,
    paired_ratio,
    side_process,
    target,
)
from pywebbench.analysis.ratio import RatioEstimate, count_span, ratio_of_medians
from pywebbench.analysis.stats import median
from pywebbench.analysis.warmup import WarmRule
from pywebbench.compare.endpoints import EndpointChange, ranked
from pywebbench.load import LoadAgent, LoadResult, LoadSpec
from pywebbench.load.sliced import SlicedResult, SliceStats
from pywebbench.meter.slice_interference import CoreAccounting
from pywebbench.meter.slice_speed import Scaled
from pywebbench.run import instructions
from pywebbench.run.host import split_cpus
from pywebbench.run.rotation import (
    JIT_SLICE_S,
    SETTLE_BOUNDS,
    SLICE_BOUNDS,
    Member,
    Rotation,
    RotationSettings,
    Rounds,
    first_touch_s,
    judge,
    per_cpu_second,
    slots,
)

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.provision.venv import ProvisionedEnv
    from pywebbench.study.matrix import CellPlan

#: How the run ended: the CI reached the asked width, the time budget ran out, or Ctrl-C.
STOPPED_CI = "ci"
STOPPED_BUDGET = "budget"
STOPPED_INTERRUPTED = "interrupted"

#: The figures a slice gives: requests per second of wall time, and requests per CPU-second
#: of the side's own server tree (what a CPU-bound server would do with a core to itself:
#: CPU that other processes took from it does not count against it).
FIGURE_RPS = "rps"
FIGURE_CPU = "cpu"
#: Requests per instruction: the inverse of the counted instructions per request, so that
#: below 1 is slower, as for the other two (counted under valgrind after the timed run).
FIGURE_INSTRUCTIONS = "instructions"
FIGURES = (FIGURE_RPS, FIGURE_CPU, FIGURE_INSTRUCTIONS)
#: The longest load time by default, warm-up included (``--budget``).
BUDGET_S = 180.0


@dataclass(frozen=True)
class AbOptions:
    """How to measure."""

    ci_width: float = 0.01  # stop once the CI lies within +-this
    budget_s: float = BUDGET_S
    #: Counted seconds of each slice; None: sized from a probe
    #: (:func:`pywebbench.run.rotation.slots`).
    slice_s: float | None = None
    #: Uncounted seconds before each slice; None: one response time (``slots``).
    settle_s: float | None = None
    #: Seconds of load each server process gets alone before the first round; None: its
    #: first touch (:func:`pywebbench.run.rotation.first_touch_s`). The warm-up after it is
    #: judged against the round (``rule``).
    warmup_s: float | None = None
    level: float = 0.95
    #: A slice is dropped (its round's pair with it) when other processes took more than
    #: this share of the cores beyond their usual share during it (run/rotation.py).
    interference_limit: float = 0.05
    #: What the verdict and the gate judge: one of FIGURES. The timed run's stop rule judges
    #: FIGURE_CPU when it is that, else FIGURE_RPS (instructions are counted afterwards).
    figure: str = "rps"
    seed: int = 0
    log_dir: Path = Path("pywebbench-results/logs/ab")
    #: Count each side's instructions per request under valgrind after the timed run, on
    #: ``processes`` fresh servers a side (FIGURE_INSTRUCTIONS needs it).
    instructions: bool = False
    #: Probe the server cores' speed and judge the slices at one speed (meter/slice_speed.py).
    core_speed: bool = True
    #: Server processes per side, each loaded in every round; the interval is over them
    #: (analysis/estimate.py). 1: over the rounds, without the process-to-process variation.
    processes: int = 4
    #: Bytes one server process may hold before it is stopped; None: its share of the
    #: machine's memory (run/rotation.py).
    memory_budget_bytes: int | None = None
    #: When a process is warm: its share of the round has stopped moving (analysis/warmup.py).
    rule: WarmRule = field(default_factory=WarmRule)


@dataclass
class AbSideRun:
    """What one side was and what it did."""

    study: SideStudy
    #: Every server process's base URL and PID, in process order (engine targets:
    #: :func:`pywebbench.analysis.estimate.target`).
    urls: list[str]
    pids: list[int]
    slices: list[SliceStats] = field(default_factory=list)
    #: Each process's first measured round: the round it was judged warm from, or (one that
    #: never settled) the middle of its rounds; None: none measured (stopped, or no slice).
    starts: list[int | None] = field(default_factory=list)
    #: Each process never judged warm (True: measured on its last half of rounds).
    unsettled: list[bool] = field(default_factory=list)
    #: Why each process was stopped before the end (None: it ran to the end).
    stopped: list[str | None] = field(default_factory=list)
    errors: int = 0
    requests: int = 0
    #: Median share of the server cores other processes took during this side's slices.
    other_share: float | None = None
    #: ``--instructions``: one count's document per counted server process
    #: (run/instructions.py), or ``{"error": ...}`` for the one that could not be counted
    #: (the side's counting stops there). Empty: not counted.
    instructions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def counts(self) -> list[float] | None:
        """Instructions per request of every counted server process; None when a count
        failed or none was made."""
        per = [_per_request(doc) for doc in self.instructions]
        if not per or any(x is None or x <= 0 for x in per):
            return None
        return cast(list[float], per)

    @property
    def label(self) -> str:
        """``base: cpython3.11/gunicorn-gthread/raw-wsgi | cpu @ c64``."""
        return f"{self.study.side.role}: {self.study.cell.label}"


@dataclass
class AbOutcome:
    """The measured A/B."""

    base: AbSideRun
    change: AbSideRun
    pairs: list[RoundPair[SliceStats]]
    rps: RatioEstimate | None
    cpu: RatioEstimate | None  # requests per server CPU-second, CHANGE/BASE
    p50: RatioEstimate | None
    p99: RatioEstimate | None
    #: The slices' requests/s at one core speed (``reference`` None: as measured).
    speed: Scaled
    #: CHANGE/BASE requests/s of the slices as measured (the same as ``rps`` when ``speed``
    #: did not scale them).
    rps_measured: RatioEstimate | None
    stopped: str
    elapsed_s: float
    options: AbOptions
    result: SlicedResult
    server_cpus: list[int]
    generator_cpus: list[int]
    #: ``ab --mix``: each endpoint's p50 and p99 CHANGE/BASE, the one whose p50 grew most
    #: first (:mod:`pywebbench.compare.endpoints`).
    endpoints: list[EndpointChange] = field(default_factory=list)

    @property
    def kept(self) -> int:
        """Kept pairs (one per process a side, in each round)."""
        return sum(1 for p in self.pairs if p.dropped is None)

    @property
    def rounds(self) -> int:
        """Rounds with at least one slice pair."""
        return len({p.round for p in self.pairs})

    @property
    def timed(self) -> RatioEstimate | None:
        """The time estimate the stop rule judged: per server CPU-second with FIGURE_CPU,
        else requests/s."""
        return self.cpu if self.options.figure == FIGURE_CPU else self.rps

    @property
    def judged(self) -> RatioEstimate | None:
        """The estimate the verdict and the gate judge (``options.figure``)."""
        if self.options.figure == FIGURE_INSTRUCTIONS:
            est = self.instructions
            # one count on a side (Ctrl-C in the counting) gives no interval: no figure
            return per_instruction(est) if est is not None and math.isfinite(est.low) else None
        return self.timed

    @property
    def half_width(self) -> float | None:
        """The judged estimate's CI half-width (:func:`pywebbench.analysis.estimate.half_width`)."""
        est = self.judged
        return half_width(est) if est is not None and math.isfinite(est.low) else None

    @property
    def instructions(self) -> RatioEstimate | None:
        """CHANGE/BASE instructions per request: the ratio of the sides' median counts, with
        ``compare``'s interval over the counted server processes (:func:`ratio_of_medians`:
        Welch's t on the log counts, a bootstrap from 10 a side; NaN bounds with one count on
        a side); None when a side has no count or a count failed."""
        return instructions_estimate(self.base.counts, self.change.counts, self.options.level)

    @property
    def instructions_ratio(self) -> float | None:
        """CHANGE/BASE instructions per request, when both sides were counted."""
        est = self.instructions
        return est.ratio if est is not None else None

    @property
    def instructions_span(self) -> tuple[float, float, float] | None:
        """The ratio, and the lowest and highest ratio of any CHANGE count to any BASE count:
        what an ``instructions>X%`` rule judges (as ``compare`` does)."""
        base, change = self.base.counts, self.change.counts
        if base is None or change is None:
            return None
        return count_span(base, change)


def instructions_estimate(
    base: Sequence[float] | None, change: Sequence[float] | None, level: float
) -> RatioEstimate | None:
    """CHANGE/BASE of the sides' median instructions per request, with ``compare``'s
    interval over the counted server processes (:func:`ratio_of_medians`); None when a side
    has no counts."""
    if not base or not change:
        return None
    return ratio_of_medians([[x] for x in base], [[x] for x in change], seed=0, level=level)


#: Counts a side before the counting may stop early: the fewest that give an interval.
MIN_COUNTS = 2


def counted_enough(runs: Sequence[AbSideRun], options: AbOptions) -> bool:
    """True once every side has at least :data:`MIN_COUNTS` counts and the requests per
    instruction ratio's CI lies within +-``options.ci_width``: the counting's own "stop when
    it knows" (the timed run's is :func:`pywebbench.analysis.estimate.narrow_enough`)."""
    counts = [r.counts for r in runs]
    if any(c is None or len(c) < MIN_COUNTS for c in counts):
        return False
    est = per_instruction(instructions_estimate(counts[0], counts[1], options.level))
    return est is not None and math.isfinite(est.low) and half_width(est) <= options.ci_width


def per_instruction(est: RatioEstimate | None) -> RatioEstimate | None:
    """An instructions-per-request ratio turned into requests per instruction (its inverse,
    bounds swapped), so that below 1 reads slower like requests/s."""
    return est.inverse() if est is not None else None


def _per_request(doc: dict[str, Any] | None) -> float | None:
    if doc is None or doc.get("per_request") is None:
        return None
    return float(doc["per_request"])


#: A sized slice holds at least this many responses per connection of the slower side: an
#: A/B of fib(20) at ~1,600 requests/s over 64 connections held ~6 in 0.25-s slices and
#: read +-4.3% (docs/ab.md, "Measured here", 2026-11-27).
RESPONSES_PER_SLICE = 10


def sized(options: AbOptions, rps: float, connections: int, jit: bool) -> tuple[AbOptions, int]:
    """``options`` with the first touch, the slice and the settle decided, and the rounds
    that fit the budget after the first touches (at least 2): the rotation's sizing
    (:func:`pywebbench.run.rotation.slots`) from ``rps``, the slower side's probed rate,
    with slices of :data:`RESPONSES_PER_SLICE` responses per connection at least."""
    touch = options.warmup_s if options.warmup_s is not None else first_touch_s(jit)
    targets = 2 * options.processes
    left = options.budget_s - targets * touch
    held = RESPONSES_PER_SLICE * connections / rps if rps > 0 else 0.0
    slice_s, settle_s, _ = slots(
        targets, left, connections, rps, options.slice_s,
        shortest=max(JIT_SLICE_S if jit else SLICE_BOUNDS[0], held), least_rounds=2,
    )  # fmt: skip
    if options.settle_s is not None:
        settle_s = options.settle_s
    rounds = max(2, math.floor(left / (targets * (slice_s + settle_s)) + 1e-9))
    out = dataclasses.replace(options, slice_s=slice_s, settle_s=settle_s, warmup_s=touch)
    return out, rounds


def least_budget_s(
    processes: int,
    warmup_s: float | None,
    slice_s: float | None = None,
    settle_s: float | None = None,
    sides: int = 2,
) -> float:
    """The shortest ``--budget`` with room for two rounds after the first touches: every
    server process's first touch (as given, else CPython's: a JIT's longer one makes its
    two rounds run past a budget this short), then two slices of each, the
    slices and settles as given or, when they are to be sized, at their longest (2-s
    slices, 0.5-s settles: :func:`sized`)."""
    touch = warmup_s if warmup_s is not None else first_touch_s(jit=False)
    settle = settle_s if settle_s is not None else SETTLE_BOUNDS[1]
    longest = slice_s if slice_s is not None else SLICE_BOUNDS[1]
    return sides * processes * (touch + 2 * (longest + settle))


def slice_latency(s: SliceStats, which: str, endpoint: str | None = None) -> float:
    """A slice's latency percentile (``p50_us``/``p99_us``; of one ``endpoint`` of its mix
    when given, 0 when the slice has none of it)."""
    if endpoint is None:
        return float(getattr(s, which))
    for e in s.endpoints:
        if e.name == endpoint and e.requests:
            summary = e.latency.summary
            return float(summary.p50 if which == "p50_us" else summary.p99)
    return 0.0


def latency_ratio(
    pairs: Sequence[RoundPair[SliceStats]],
    which: str,
    level: float,
    processes: int,
    endpoint: str | None = None,
) -> RatioEstimate | None:
    """CHANGE/BASE of a slice latency percentile (``p50_us``/``p99_us``; of one
    ``endpoint`` of a mix when given), paired by round."""
    values = [
        RoundPair(
            p.round,
            p.base.model_copy(update={"rps": slice_latency(p.base, which, endpoint)}),
            p.change.model_copy(update={"rps": slice_latency(p.change, which, endpoint)}),
            p.dropped,
            p.process,
        )
        for p in pairs
        if slice_latency(p.base, which, endpoint) > 0
        and slice_latency(p.change, which, endpoint) > 0
    ]
    return paired_ratio(values, level=level, processes=processes)


def endpoint_latency(
    pairs: Sequence[RoundPair[SliceStats]], level: float, processes: int
) -> list[EndpointChange]:
    """With a mix on both sides: each endpoint's p50 and p99 CHANGE/BASE, paired by round
    as the whole mix's, the one whose p50 grew most first (as ``compare`` ranks them)."""
    names = {e.name: None for p in pairs for e in (*p.base.endpoints, *p.change.endpoints)}
    out = []
    for name in names:
        p50 = latency_ratio(pairs, "p50_us", level, processes, name)
        if p50 is not None:
            p99 = latency_ratio(pairs, "p99_us", level, processes, name)
            out.append(EndpointChange(name, p50, p99))
    return ranked(out)


def run_ab(
    base: SideStudy,
    change: SideStudy,
    options: AbOptions,
    *,
    agent: LoadAgent,
    say: Callable[[str], None] = lambda _: None,
    steps: bringup.BringUp | None = None,
    cpu_accounting: Callable[[Sequence[int], Sequence[int]], CoreAccounting | None] = (
        CoreAccounting
    ),
) -> AbOutcome:
    """Start the services the sides' workload needs (redis, PostgreSQL), up for the whole
    run, ``--instructions``' counts included; bring both sides up (SideError naming the side
    when one fails), measure through ``agent``, take everything down. ``steps`` provision,
    start services, and start, check and stop servers (default: :mod:`pywebbench.bringup`'s);
    ``cpu_accounting`` reads the server cores' CPU (cores, server PIDs; default: the kernel's)."""
    steps = steps or bringup.BringUp()
    needed = bringup.services_needed(study.cell.workload for study in (base, change))
    if needed:
        say(f"starting services: {', '.join(needed)}")
    with steps.services(needed, options.log_dir / "services") as services:
        return _measure(
            base, change, options, services, agent=agent, say=say, steps=steps,
            cpu_accounting=cpu_accounting,
        )  # fmt: skip


def _measure(
    base: SideStudy,
    change: SideStudy,
    options: AbOptions,
    services: bringup.Services,
    *,
    agent: LoadAgent,
    say: Callable[[str], None],
    steps: bringup.BringUp,
    cpu_accounting: Callable[[Sequence[int], Sequence[int]], CoreAccounting | None],
) -> AbOutcome:
    """:func:`run_ab` once the services run."""
    config = base.config
    server_cpus, generator_cpus = split_cpus(config.cpus.server, config.cpus.generator)
    sides = (base, change)
    envs: list[ProvisionedEnv] = []
    launches: list[bringup.LaunchOptions] = []

    def launch(cell: CellPlan) -> tuple[ProvisionedEnv, bringup.LaunchOptions]:
        i = next(i for i, study in enumerate(sides) if study.cell is cell)
        return envs[i], launches[i]

    with bringup.ServerPool(launch, verify_timeout_s=config.timeouts.verify_s, steps=steps) as pool:
        for study in sides:
            cell = study.cell
            failure = services.failure_for(cell.workload)
            if failure is not None:
                raise SideError(f"{study.side.flag}: {failure}")
            say(f"{study.side.role}: provisioning {cell.variant.stack.name}")
            try:
                envs.append(steps.provision(cell.variant.stack, progress=say))
            except bringup.StackFailure as exc:
                raise SideError(f"{study.side.flag}: {exc}") from None
            launches.append(
                bringup.launch_options(
                    cell.variant,
                    log_dir=options.log_dir / study.side.role,
                    cpus=server_cpus,
                    services=services,
                    bind=cell.bind,
                    protocol=cell.protocol,
                    config=study.config,
                )
            )
        runs = [AbSideRun(study, [], []) for study in sides]
        # the sides' processes alternate, in starting as in the engine's targets (process
        # k of BASE is target 2k, of CHANGE 2k + 1): neither side's processes are older,
        # and the first touches, which go in target order, favour neither
        members: list[Member] = []
        for k in range(options.processes):
            for side, (study, run) in enumerate(zip(sides, runs, strict=True)):
                say(f"{study.side.role}: starting server process {k + 1} of {options.processes}")
                server, url = _start_process(pool, study, k, generator_cpus)
                run.urls.append(url)
                run.pids.append(server.pid)
                jit = study.cell.variant.stack.interpreter.is_pypy
                members.append(Member(target(side, k), study.side.role, k, server, url, jit))
        rotation = Rotation(
            pool,
            agent,
            server_cpus=server_cpus,
            generator_cpus=generator_cpus,
            interference=lambda pids: cpu_accounting(server_cpus, pids),
            say=say,
        )
        jit = any(m.jit for m in members)

        def spec(m: Member) -> LoadSpec:
            return base.cell.load_spec(
                m.server.base_url, config.load, generator_cpus, duration_s=1.0
            )

        rps = 0.0  # the slowest side's: only sized slices or settles need one
        if options.slice_s is None or options.settle_s is None:
            rps = rotation.slowest_rps(members, spec)
        options, rounds = sized(options, rps, base.cell.connections, jit)
        assert options.slice_s is not None and options.settle_s is not None
        assert options.warmup_s is not None
        settings = RotationSettings(
            slice_s=options.slice_s,
            settle_s=options.settle_s,
            rounds=rounds,
            seed=options.seed,
            touch_s=options.warmup_s,
            core_speed=options.core_speed,
            interference_max=options.interference_limit,
            memory_budget_bytes=options.memory_budget_bytes,
        )
        k = options.processes
        reached = False

        def stop(so_far: Rounds) -> bool:
            nonlocal reached
            j = judge(so_far.slices, members, options.rule, dropped=so_far.dropped)
            if not j.settled(members):
                return False
            judged = j.measured_slices(so_far.slices)
            if options.figure == FIGURE_CPU:
                judged = per_cpu_second(judged, so_far.accounting)
            pairs = pair_rounds(judged, processes=k, drop=_either(so_far.dropped))
            est = paired_ratio(pairs, level=options.level, processes=k, stopping=True)
            reached = narrow_enough(est, kept_rounds(pairs), options.ci_width)
            return reached

        say(
            f"measuring: {rounds} rounds at most of {options.slice_s:g} s slices "
            f"({k} server processes a side, {options.warmup_s:g} s first touch each), "
            f"until every process is warm and the {options.level:.0%} CI is within "
            f"+-{options.ci_width:.1%}"
        )
        rotated = rotation.run(members, spec(members[0]), settings, stop)
    result, speed, accounting = rotated.result, rotated.speed, rotated.accounting
    final = judge(speed.slices, members, options.rule, dropped=rotated.dropped, final=True)
    drop = _either(rotated.dropped)

    def paired(slices: Sequence[SliceStats]) -> list[RoundPair[SliceStats]]:
        return pair_rounds(final.measured_slices(slices), processes=k, drop=drop)

    def ratio(pairs: Sequence[RoundPair[SliceStats]]) -> RatioEstimate | None:
        return paired_ratio(pairs, level=options.level, processes=k)

    pairs = paired(speed.slices)
    for i, r in enumerate(runs):
        own = [m for m in members if side_process(m.index)[0] == i]
        r.slices = [s for s in result.slices if side_process(s.target)[0] == i]
        r.starts = [final.starts.get(m.index) for m in own]
        r.unsettled = [m.stopped is None and final.warm.get(m.index) is None for m in own]
        r.stopped = [m.stopped for m in own]
        shares = (
            [accounting.other_share(s.started_at, s.ended_at) for s in r.slices]
            if accounting is not None
            else []
        )
        known = [x for x in shares if x is not None]
        r.other_share = median(known) if known else None
        r.requests = sum(result.targets[m.index].requests for m in own)
        r.errors = sum(result.targets[m.index].errors for m in own)
    elapsed = rotated.elapsed_s
    interrupted = result.interrupted
    if options.instructions and not interrupted:
        interrupted = not count_sides(
            runs, envs, launches, generator_cpus, options.processes, say, agent=agent,
            enough=lambda: counted_enough(runs, options),
        )  # fmt: skip
    stopped = (
        STOPPED_INTERRUPTED
        if interrupted
        else STOPPED_CI
        if result.stopped_early and reached
        else STOPPED_BUDGET
    )
    return AbOutcome(
        base=runs[0],
        change=runs[1],
        pairs=pairs,
        rps=ratio(pairs),
        cpu=ratio(paired(per_cpu_second(speed.slices, accounting))),
        speed=speed,
        rps_measured=ratio(paired(result.slices)),
        p50=latency_ratio(pairs, "p50_us", options.level, k),
        p99=latency_ratio(pairs, "p99_us", options.level, k),
        endpoints=endpoint_latency(pairs, options.level, k),
        stopped=stopped,
        elapsed_s=elapsed,
        options=options,
        result=result,
        server_cpus=list(server_cpus),
        generator_cpus=list(generator_cpus),
    )


def _either(dropped: Callable[[SliceStats], str | None]) -> DropRule[SliceStats]:
    """The pair rule of a slice rule: a round's pair is dropped when either slice is."""
    return lambda b, c: dropped(b) or dropped(c)


def _start_process(
    pool: bringup.ServerPool, study: SideStudy, k: int, generator_cpus: Sequence[int]
) -> tuple[RunningServer, str]:
    """Start and verify a side's ``k``-th server process in ``pool``; it and its URL.
    SideError naming the side when it does not start or fails verification."""
    cell = study.cell
    try:
        server = pool.start(cell, k)
    except bringup.StackFailure as exc:
        raise SideError(f"{study.side.flag}: {exc}") from None
    failure = pool.verify(server, cell)
    if failure is not None:
        raise SideError(
            f"{study.side.flag}: {cell.label} (server process {k + 1}) fails verification: "
            + failure.reason
        )
    spec = cell.load_spec(server.base_url, study.config.load, generator_cpus, duration_s=1.0)
    return server, spec.url


def count_sides(
    runs: Sequence[AbSideRun],
    envs: Sequence[ProvisionedEnv],
    launches: Sequence[bringup.LaunchOptions],
    generator_cpus: Sequence[int],
    processes: int,
    say: Callable[[str], None],
    *,
    agent: LoadAgent,
    enough: Callable[[], bool] = lambda: False,
    count: Callable[
        [SideStudy, ProvisionedEnv, bringup.LaunchOptions, Sequence[int], LoadAgent],
        dict[str, Any],
    ]
    | None = None,
) -> bool:
    """Count up to ``processes`` fresh servers a side, the sides in turn (BASE 1, CHANGE 1,
    BASE 2, ...), into each side's ``instructions``. The counting ends early once ``enough()``
    says so after a round of counts (:func:`counted_enough`: the interval is as narrow as
    asked), and at the first count that fails (the ratio needs every count). False when
    Ctrl-C ended it (the counts made so far are kept). ``count`` makes one count (default
    :func:`count_side`; a test hands in a fake)."""
    count = count or count_side
    try:
        for k in range(processes):
            if k and enough():
                return True
            for r, env, launch in zip(runs, envs, launches, strict=True):
                say(
                    f"{r.study.side.role}: counting instructions per request under valgrind "
                    f"(server process {k + 1} of {processes})"
                )
                doc = count(r.study, env, launch, generator_cpus, agent)
                r.instructions.append(doc)
                if "error" in doc:
                    return True
    except KeyboardInterrupt:
        return False
    return True


def count_side(
    study: SideStudy,
    env: ProvisionedEnv,
    launch: bringup.LaunchOptions,
    generator_cpus: Sequence[int],
    agent: LoadAgent,
) -> dict[str, Any]:
    """One side's instructions per request, on a fresh server of its own under valgrind
    (docs/instructions.md); ``{"error": ...}`` when it cannot be counted (PyPy, a server
    that does not start under valgrind). Ctrl-C ends the count with :class:`KeyboardInterrupt`."""
    stack = study.cell.variant.stack
    why = instructions.cannot_count(stack.interpreter.is_pypy)
    if why is not None:
        return {"error": why}
    ready = bringup.ready_path(stack, [study.cell.workload])

    def start(wrapper: list[str], start_timeout_s: float) -> AbstractContextManager[RunningServer]:
        counted = dataclasses.replace(launch, wrapper=wrapper, start_timeout_s=start_timeout_s)
        return bringup.running(stack, env, counted, ready)

    def batch_load(spec: LoadSpec) -> LoadResult:
        result = agent.run(spec)
        if result.interrupted:
            raise KeyboardInterrupt
        return result

    return instructions.count_fresh_server(
        start, launch.start_timeout_s, study.cell, study.config.load, generator_cpus, batch_load
    )
