"""The fault phase of a cell: its load again, clean and under the fault mix; with an intensity
sweep, once per attack size, each on a server not attacked before.

See docs/faults.md. The result, a :class:`~pywebbench.faults.outcome.CellRobustness`, is
stored in the cell's flags as ``robustness`` (the largest size's measurement; with a sweep its
``curve`` lists every size and the breaking point).

The interference guard covers the phase as it covers measured iterations
(docs/interference.md): each window of good clients, clean and under attack, records what
other processes took from the pinned cores; a measurement with a window above
``load.interference_max`` is made again (on a fresh server in a sweep; on the cell's server
only while it survived), up to ``load.interference_retries`` times, and one still above it
is stored flagged ``interfered``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pywebbench.bringup import StackFailure
from pywebbench.faults.outcome import CellRobustness, CurvePoint, RobustnessCurve
from pywebbench.load import LoadAgent, LoadSpec
from pywebbench.load.agent import ProgressFn
from pywebbench.load.result import LoadResult, iteration_figures
from pywebbench.meter.interference import InterferenceWindow
from pywebbench.meter.sampler import pin_this_thread, trees_cpu_s
from pywebbench.run.seams import FaultClients, Seams, Window
from pywebbench.study.config import StudyConfig
from pywebbench.study.matrix import CellPlan

if TYPE_CHECKING:
    from pywebbench.faults import FaultSpec
    from pywebbench.faults.plan import FaultPlan


@dataclass(frozen=True)
class FaultTarget:
    """A server the fault phase attacks: its base URL, whether it still runs, and its PID
    (its process tree's CPU time is the server's in the interference guard)."""

    url: str
    alive: Callable[[], bool]
    pid: int


#: A fresh server for one sweep size, stopped on exit.
FreshServer = Callable[[], AbstractContextManager[FaultTarget]]

#: Retained throughput below this share of the clean run: the attack broke the stack.
BROKEN_BELOW_PCT = 50.0


def fault_phase(
    cell: CellPlan,
    target: FaultTarget,
    clean_result: LoadResult | None,
    *,
    config: StudyConfig,
    agent: LoadAgent,
    server_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    progress: Callable[[Any], None] | None = None,
    fresh_server: FreshServer | None = None,
    phase: Callable[[str], None] = lambda _: None,
    seams: Seams | None = None,
) -> CellRobustness:
    """Measure ``cell`` on the running server ``target`` under ``config.load.faults``; its
    robustness. ``server_cpus``: the server's cores (its neighbours there are the
    interference guard's business; :mod:`pywebbench.meter.interference`); ``phase`` says
    what is re-measured and why.

    The good clients run the cell's load with the plan's share of arriving (fresh)
    connections, clean and then ``lead_s`` after the attack started; with a traffic mix they
    draw from it, and the fault clients and the recovery check use its
    :func:`fault_url`. With a sweep, every size
    runs on its own ``fresh_server()``, warmed up with the same good stream first, so all
    sizes are measured alike (without ``fresh_server``, one after the other on the cell's
    server). ``clean_result`` is used only for a single mix without fresh connections (then
    the good stream is the measured one). ``seams``: the fault clients and the interference
    window (the real ones unless given: run/seams.py).
    """
    from pywebbench.faults.plan import parse_plan

    cfg = config.load
    if cfg.faults is None:
        raise ValueError("the study has no fault mix")
    plan = parse_plan(cfg.faults)
    world = seams or Seams()

    def spec_at(url: str) -> LoadSpec:
        """The cell's load on the server at ``url``, with the plan's arriving clients (a
        share of fresh connections) where the cell reuses connections in a closed loop."""
        spec = cell.load_spec(url, cfg, generator_cpus, duration_s=cfg.duration_s)
        if plan.fresh_share > 0 and spec.mode == "closed":
            spec = spec.replace(fresh_share=plan.fresh_share)
        return spec

    spec = spec_at(target.url)
    reuse = clean_result if spec.fresh_share == 0 else None
    fresh = plan.is_sweep and fresh_server is not None

    def measure(on: FaultTarget, specs: list[FaultSpec], clean: LoadResult | None) -> Measured:
        guarded = GuardedAgent(
            agent, on, server_cpus, generator_cpus,
            window=world.interference_window, cpu_s=world.trees_cpu_s,
        )  # fmt: skip
        # this thread, and the fault clients' thread it starts, off the server's cores (as
        # the sampler does for an iteration): their CPU is pywebbench's, not a neighbour's
        away = sorted(set(generator_cpus) - set(server_cpus)) if guarded.apart else []
        before = pin_this_thread(away)
        try:
            point = _measure(
                spec_at(on.url), specs, plan, guarded, progress, on.alive, clean,
                world.fault_clients,
            )  # fmt: skip
        finally:
            if before is not None:
                pin_this_thread(before)
        return Measured(point, guarded.worst_share(), guarded.interrupted)

    def attempt(specs: list[FaultSpec]) -> Measured:
        if not fresh:
            return measure(target, specs, reuse)
        assert fresh_server is not None
        with fresh_server() as on:
            agent.run(spec_at(on.url), progress=progress)  # its warm-up (not stored)
            return measure(on, specs, None)  # another process: its own clean baseline

    cfg_max, retries = cfg.interference_max, cfg.interference_retries
    points: list[tuple[int | None, CellRobustness]] = []
    for size, specs in plan.points():
        got = attempt(specs)
        point, share, again = got.point, got.share, 0
        # again (on a fresh server in a sweep, else on the cell's server) while others took
        # too much, the server survived and answered, and nobody pressed Ctrl-C
        while (
            share is not None
            and share > cfg_max
            and again < retries
            and point.survived
            and point.answered_after
            and not got.interrupted
        ):
            phase(
                f"re-measuring faults of {cell.variant.key}"
                + (f" at {size:,}" if size is not None else "")
                + f": other processes took {share:.0%} of a core from its cores"
            )
            try:
                got = attempt(specs)
            except StackFailure:  # a fresh server that did not start: keep what was measured
                break
            point, share, again = got.point, got.share, again + 1
        guard = {
            "others_share": round(share, 4) if share is not None else None,
            "interfered": share is not None and share > cfg_max,
            "remeasured": again,
        }
        points.append((size, point.model_copy(update=guard)))
    last = points[-1][1]
    return last.model_copy(update={"curve": curve_of(plan, points)}) if plan.is_sweep else last


@dataclass(frozen=True)
class Measured:
    """One measurement of a point, the largest share of a core others took over its windows
    (None: not known), and whether Ctrl-C cut a window short."""

    point: CellRobustness
    share: float | None
    interrupted: bool


class GuardedAgent:
    """A load agent whose every run records what other processes took from the pinned
    cores over it (:class:`~pywebbench.meter.interference.InterferenceWindow`, the server
    tree's CPU time from ``server_pid``, read by ``cpu_s``; ``window`` makes one): the
    interference guard of the fault phase. The fault clients run in this process, so their
    CPU is pywebbench's own."""

    def __init__(
        self,
        agent: LoadAgent,
        server: FaultTarget,
        server_cpus: Sequence[int],
        generator_cpus: Sequence[int],
        *,
        window: Callable[[Sequence[int], Sequence[int]], Window] = InterferenceWindow,
        cpu_s: Callable[[Sequence[int]], float] = trees_cpu_s,
    ) -> None:
        self.agent = agent
        self._window = window
        self._cpu_s = cpu_s
        self.server = server
        #: the server's cores and the generator's are apart: each side accounted on its own
        self.apart = bool(server_cpus) and not set(server_cpus) & set(generator_cpus)
        self.server_cpus = list(server_cpus) if self.apart else []
        self.cpus = sorted({*server_cpus, *generator_cpus})
        self.shares: list[float] = []
        self.interrupted = False

    def run(self, spec: LoadSpec, progress: ProgressFn | None = None) -> LoadResult:
        """``agent.run``, its window's interference recorded (none when the server died
        meanwhile: a dead tree's CPU time reads 0)."""
        window = self._window(self.cpus, self.server_cpus) if self.cpus else None
        before = self._cpu_s([self.server.pid])
        result = self.agent.run(spec, progress=progress)
        self.interrupted = self.interrupted or result.interrupted
        used = self._cpu_s([self.server.pid]) - before
        if window is None or used < 0 or not self.server.alive():
            return result
        got = window.close(used)
        if got is not None and getattr(self.agent, "name", "local") != "local":
            # load agents in their own processes: their CPU is the generator's
            got = got.without(float(iteration_figures(result)["generator_cpu_s"] or 0.0))
        if got is not None:
            self.shares.append(got.share)
        return result

    def worst_share(self) -> float | None:
        """The largest share over the runs (None: none was known)."""
        return max(self.shares) if self.shares else None


def _measure(
    spec: LoadSpec,
    specs: list[FaultSpec],
    plan: FaultPlan,
    agent: GuardedAgent,
    progress: Callable[[Any], None] | None,
    alive: Callable[[], bool],
    clean_result: LoadResult | None,
    fault_clients: FaultClients,
) -> CellRobustness:
    """One measurement: clean (unless given), under ``specs``, then the recovery check."""
    from pywebbench.faults import measure_of

    run = fault_clients(
        fault_url(spec),
        specs,
        lambda: agent.run(spec, progress=progress),
        alive=alive,
        clean_result=clean_result,
        settle_s=plan.lead_s,
    )
    faulted = measure_of(run.faulted)
    return CellRobustness(
        mix=plan.mix_at(specs) if plan.is_sweep else plan.text,
        **run.robustness.to_dict(),
        clean_rps=measure_of(run.clean).rps,
        faulted_rps=faulted.rps,
        good_unanswered=faulted.unanswered,
        fresh_share=spec.fresh_share,
        lead_s=plan.lead_s,
        recovery_s=run.recovery_s,
        report=run.report.to_dict(),
    )


def fault_url(spec: LoadSpec) -> str:
    """Where the fault clients aim and the recovery check asks: the good clients' URL, or
    with a mix (whose URL gives host and port only) the path of its
    :func:`~pywebbench.load.mix.fault_entry` on the same host."""
    from urllib.parse import urlsplit, urlunsplit

    from pywebbench.load.mix import fault_entry

    entry = fault_entry(spec.mix) if spec.mix else None
    if entry is None:
        return spec.url
    path, _, query = entry.path.partition("?")
    parts = urlsplit(spec.url)
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def curve_of(plan: FaultPlan, points: list[tuple[int | None, CellRobustness]]) -> RobustnessCurve:
    """The sweep as stored: per size the retained throughput, p99 and score, and the
    breaking point (the smallest size whose retained throughput fell under 50 %)."""
    rows = [
        CurvePoint(
            size=size or 0,  # a sweep's points all have their size
            retained_pct=p.retained_pct,
            p99_faulted_ms=p.p99_faulted_ms,
            p99_clean_ms=p.p99_clean_ms,
            clean_rps=p.clean_rps,
            faulted_rps=p.faulted_rps,
            good_errors=p.good_errors,
            good_error_rate=p.good_error_rate,
            survived=p.survived,
            score=p.score,
            others_share=p.others_share,
            interfered=p.interfered,
            remeasured=p.remeasured,
        )
        for size, p in points
    ]
    broken = [r.size for r in rows if r.retained_pct < BROKEN_BELOW_PCT]
    return RobustnessCurve(
        kind=plan.kind,
        sizes=list(plan.sizes),
        points=rows,
        breaking_point=min(broken) if broken else None,
        fresh_share=plan.fresh_share,
        lead_s=plan.lead_s,
    )
