"""Run an A/B: both sides' servers up and verified, one interleaved engine run, the estimate.

The services the sides' workload needs (redis, PostgreSQL) are started first, as a study
starts them. Each side's servers (``processes`` of them, so that the interval holds the
difference between two server processes of the same app: :mod:`pywebbench.analysis.estimate`)
are started with the shared bring-up (:mod:`pywebbench.bringup`: its launch options, with the
services' environment, and one :class:`~pywebbench.bringup.ServerPool` for both sides),
pinned to the same server cores, and stay up and warm for the whole run; the load comes from
one sliced engine run through the load agent (:meth:`pywebbench.load.LoadAgent.run_sliced`)
whose targets are every side's servers.
While it runs, every progress snapshot samples the server cores' CPU accounting
(:mod:`pywebbench.meter.slice_interference`) and re-estimates the ratio; once its CI is
narrower than asked the engine is told "enough". With ``instructions`` each side is then
counted under valgrind (:mod:`pywebbench.run.instructions`) on ``processes`` fresh servers
of its own, the sides in turn, after the timed run, so no count shares the cores with it;
the counts' ratio has an interval over those server processes, like the time ratio.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pywebbench import bringup
from pywebbench.ab.sides import SideError, SideStudy
from pywebbench.analysis.estimate import (
    RoundPair,
    half_width,
    kept_rounds,
    narrow_enough,
    pair_rounds,
    paired_ratio,
    side_process,
)
from pywebbench.analysis.ratio import RatioEstimate, count_span, ratio_of_medians
from pywebbench.analysis.stats import median
from pywebbench.analysis.steady import preload
from pywebbench.compare.endpoints import EndpointChange, ranked
from pywebbench.load import LoadAgent, LoadResult, LoadSpec
from pywebbench.load.sliced import (
    AUTO_SLICE_S,
    SlicedResult,
    SlicePlan,
    SliceProgress,
    SliceStats,
    auto_slice_s,
)
from pywebbench.meter.slice_interference import CoreAccounting
from pywebbench.meter.slice_speed import Scaled, SliceSpeeds, at_one_speed
from pywebbench.run import instructions
from pywebbench.run.host import split_cpus

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
#: A slice whose server used less than this share of a core gives no per-CPU figure (too few
#: of the kernel's 10 ms clock ticks to divide by: 2 in a 1-s slice).
MIN_CPU_SHARE = 0.02


@dataclass(frozen=True)
class AbOptions:
    """How to measure."""

    ci_width: float = 0.01  # stop once the CI lies within +-this
    budget_s: float = BUDGET_S
    #: Counted seconds of each slice; None: sized from a probe (:func:`auto_slice_s`).
    slice_s: float | None = None
    #: Uncounted seconds before each slice; None: a fifth of the slice.
    settle_s: float | None = None
    warmup_s: float = 3.0  # per side, before the first round
    level: float = 0.95
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


@dataclass
class AbSideRun:
    """What one side was and what it did."""

    study: SideStudy
    #: Every server process's base URL and PID, in process order (engine targets:
    #: :func:`pywebbench.analysis.estimate.target`).
    urls: list[str]
    pids: list[int]
    slices: list[SliceStats] = field(default_factory=list)
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
    pairs: list[RoundPair]
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


#: Seconds of BASE's load that size the slices.
PROBE_S = 1.0


def sized(options: AbOptions, rps: float, connections: int) -> AbOptions:
    """``options`` with the slice and settle times decided."""
    slice_s = options.slice_s if options.slice_s is not None else auto_slice_s(rps, connections)
    settle_s = options.settle_s if options.settle_s is not None else round(slice_s / 5, 3)
    return dataclasses.replace(options, slice_s=slice_s, settle_s=settle_s)


def least_budget_s(
    processes: int,
    warmup_s: float,
    slice_s: float | None = None,
    settle_s: float | None = None,
    sides: int = 2,
) -> float:
    """The shortest ``--budget`` with room for two rounds after the warm-up: every server
    process's warm-up, then two slices of each, the slices as given or, when they are to be
    sized, at their longest (:data:`AUTO_SLICE_S`), with a settle of a fifth of a slice when
    none is given."""
    longest = slice_s if slice_s is not None else AUTO_SLICE_S[1]
    settle = settle_s if settle_s is not None else longest / 5
    return sides * processes * (warmup_s + 2 * (longest + settle))


def rounds_for(options: AbOptions, sides: int = 2) -> int:
    """Rounds that fit the budget after the warm-up (at least 2); the slices sized."""
    assert options.slice_s is not None and options.settle_s is not None
    targets = sides * options.processes
    left = options.budget_s - targets * options.warmup_s
    return max(2, math.floor(left / (targets * (options.slice_s + options.settle_s)) + 1e-9))


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
    pairs: Sequence[RoundPair],
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
    pairs: Sequence[RoundPair], level: float, processes: int
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


def per_cpu_second(slices: Sequence[SliceStats], accounting: CoreAccounting) -> list[SliceStats]:
    """The slices with ``rps`` replaced by requests per CPU-second of their side's server
    tree (tree ``target`` of ``accounting``); slices without a usable CPU figure are left
    out, so their rounds are incomplete."""
    out = []
    for s in slices:
        share = accounting.tree_share(s.target, s.started_at, s.ended_at)
        if share is not None and share >= MIN_CPU_SHARE:
            out.append(s.model_copy(update={"rps": s.rps / share}))
    return out


def run_ab(
    base: SideStudy,
    change: SideStudy,
    options: AbOptions,
    *,
    agent: LoadAgent,
    say: Callable[[str], None] = lambda _: None,
) -> AbOutcome:
    """Start the services the sides' workload needs (redis, PostgreSQL), up for the whole
    run, ``--instructions``' counts included; bring both sides up (SideError naming the side
    when one fails), measure through ``agent``, take everything down."""
    needed = bringup.services_needed(study.cell.workload for study in (base, change))
    if needed:
        say(f"starting services: {', '.join(needed)}")
    with bringup.Services(needed, options.log_dir / "services") as services:
        return _measure(base, change, options, services, agent=agent, say=say)


def _measure(
    base: SideStudy,
    change: SideStudy,
    options: AbOptions,
    services: bringup.Services,
    *,
    agent: LoadAgent,
    say: Callable[[str], None],
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

    with ExitStack() as cleanup:
        pool = cleanup.enter_context(
            bringup.ServerPool(launch, verify_timeout_s=config.timeouts.verify_s)
        )
        runs = []
        for study in sides:
            cell = study.cell
            failure = services.failure_for(cell.workload)
            if failure is not None:
                raise SideError(f"{study.side.flag}: {failure}")
            say(f"{study.side.role}: provisioning {cell.variant.stack.name}")
            try:
                envs.append(bringup.provision(cell.variant.stack, progress=say))
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
            run = AbSideRun(study, [], [])
            for k in range(options.processes):
                say(f"{study.side.role}: starting server process {k + 1} of {options.processes}")
                url, pid = _start_process(pool, study, k, generator_cpus)
                run.urls.append(url)
                run.pids.append(pid)
            runs.append(run)
        load = base.cell.load_spec(
            runs[0].urls[0], config.load, generator_cpus, duration_s=1.0, warmup_s=options.warmup_s
        )
        rps = 0.0  # the probe's: only auto-sized slices need one
        if options.slice_s is None:
            probe = agent.run(load.replace(duration_s=PROBE_S, warmup_s=0.0))
            if probe.interrupted:
                raise KeyboardInterrupt
            rps = probe.rps
            say(f"sizing the slices: BASE served {rps:,.0f} requests/s")
        options = sized(options, rps, base.cell.connections)
        assert options.slice_s is not None and options.settle_s is not None
        plan = SlicePlan(
            load=load,
            targets=[u for pair in zip(runs[0].urls, runs[1].urls, strict=True) for u in pair],
            slice_s=options.slice_s,
            settle_s=options.settle_s,
            rounds=rounds_for(options),
            seed=options.seed,
        )
        accounting = CoreAccounting(
            server_cpus, [p for pair in zip(runs[0].pids, runs[1].pids, strict=True) for p in pair]
        )
        drop = accounting.unequal(options.interference_limit)
        reached = False
        speeds = SliceSpeeds.start(server_cpus) if options.core_speed else None
        if speeds is not None:
            cleanup.callback(speeds.stop)

        def watch(snap: SliceProgress) -> bool:
            nonlocal reached
            accounting.sample()
            judged = at_one_speed(snap.slices, speeds).slices
            if options.figure == FIGURE_CPU:
                judged = per_cpu_second(judged, accounting)
            pairs = pair_rounds(judged, processes=options.processes, drop=drop)
            est = paired_ratio(pairs, level=options.level, processes=options.processes)
            reached = narrow_enough(est, kept_rounds(pairs), options.ci_width)
            return reached

        say(
            f"measuring: {plan.rounds} rounds at most of {options.slice_s:g} s slices "
            f"({options.processes} server processes a side), "
            f"until the {options.level:.0%} CI is within +-{options.ci_width:.1%}"
        )
        preload()  # the first estimate does not hold up the run on its imports
        started = time.monotonic()
        accounting.sample()
        result = agent.run_sliced(plan, watch, interval_s=0.1)
        accounting.sample()
        elapsed = time.monotonic() - started
    speed = at_one_speed(result.slices, speeds)
    k = options.processes

    def paired(slices: Sequence[SliceStats]) -> list[RoundPair]:
        return pair_rounds(slices, processes=k, drop=drop)

    def ratio(pairs: Sequence[RoundPair]) -> RatioEstimate | None:
        return paired_ratio(pairs, level=options.level, processes=k)

    pairs = paired(speed.slices)
    for i, r in enumerate(runs):
        own = [t for t in range(2 * k) if side_process(t)[0] == i]
        r.slices = [s for s in result.slices if s.target in own]
        shares = [accounting.other_share(s.started_at, s.ended_at) for s in r.slices]
        known = [x for x in shares if x is not None]
        r.other_share = median(known) if known else None
        r.requests = sum(result.targets[t].requests for t in own)
        r.errors = sum(result.targets[t].errors for t in own)
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


def _start_process(
    pool: bringup.ServerPool, study: SideStudy, k: int, generator_cpus: Sequence[int]
) -> tuple[str, int]:
    """Start and verify a side's ``k``-th server process in ``pool``; its URL and PID.
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
    return spec.url, server.pid


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
) -> bool:
    """Count up to ``processes`` fresh servers a side, the sides in turn (BASE 1, CHANGE 1,
    BASE 2, ...), into each side's ``instructions``. The counting ends early once ``enough()``
    says so after a round of counts (:func:`counted_enough`: the interval is as narrow as
    asked), and at the first count that fails (the ratio needs every count). False when
    Ctrl-C ended it (the counts made so far are kept)."""
    try:
        for k in range(processes):
            if k and enough():
                return True
            for r, env, launch in zip(runs, envs, launches, strict=True):
                say(
                    f"{r.study.side.role}: counting instructions per request under valgrind "
                    f"(server process {k + 1} of {processes})"
                )
                doc = count_side(r.study, env, launch, generator_cpus, agent)
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
