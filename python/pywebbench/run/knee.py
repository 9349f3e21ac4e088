"""The knee: the highest open-loop rate whose latency percentile meets an SLO (docs/slo.md).

:func:`search_knee` is the search itself, independent of servers and stores: it calls a
``probe(rate, phase)`` that loads the server at that offered rate and says whether the SLO
held. Every rate it tries is probed ``repeats`` times by design (3 by default) and judged
on all of its probes: it *passes* when every probe met the SLO, and a rate whose probes
disagree *flips*. Retrying a failed probe until one passes would select luck (issue 22: a
probe failed twice, passed the third time, and the search went on from there). The search
brackets the knee (from a start rate, doubling while rates pass or halving while they do
not), then bisects the bracket until it is narrower than the tolerance, within a time
budget. The knee is the highest rate that passed every probe; when rates above it flipped,
the edge is reported as a range, up to the highest rate that flipped.
:class:`KneePhase` is the runner's side: it probes a running server through the load
agent (open loop, latency from the intended send time: coordinated-omission corrected) and
stores every probe and the knee.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pywebbench.bringup import StackFailure
from pywebbench.load import LoadAgent, LoadProgress, LoadSpec
from pywebbench.run.measure import Interrupted, log_tail, no_sigint
from pywebbench.store import IterationKind, Phase, StoreWriter, utcnow
from pywebbench.store.knee_rows import Knee, KneeProbe
from pywebbench.study.config import StudyConfig
from pywebbench.study.matrix import CellPlan
from pywebbench.study.slo import Slo, parse_slo

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.load.result import LoadResult

#: Probes are at least this long (after their warm-up), and at most MAX_PROBE_S: a low rate
#: cannot gather the SLO's samples in reasonable time; its probe keeps the samples it got.
MIN_PROBE_S = 1.0
MAX_PROBE_S = 30.0
#: Seconds a probe costs besides its warm-up and window (connecting, storing).
PROBE_OVERHEAD_S = 0.3
#: A probe whose completions fell below this share of the offered rate did not keep up.
RATE_KEPT = 0.9
#: A probe whose generator sent its p99 this share of the SLO target late is flagged: the
#: generator waited for a CPU, and the latency it charged the server is inflated.
LATE_FRACTION = 0.1
#: Probes per rate by design: a rate is judged on all of them (``load.slo_repeats``).
DEFAULT_REPEATS = 3
#: The search goes no lower and no higher than these rates (requests/s).
FLOOR_RPS = 10.0
CEILING_RPS = 1_000_000.0
#: Without a measured closed-loop rate the search starts here (requests/s).
DEFAULT_START_RPS = 100.0


def probe_verdict(
    slo: Slo, *, latency_us: float, errors: int, offered: float, achieved: float
) -> str:
    """``pass``, or why not: ``errors`` (any error or timeout), ``latency`` (the percentile
    above the target), ``rate`` (completions fell short of the offered rate)."""
    if errors:
        return "errors"
    if latency_us > slo.target_us:
        return "latency"
    if achieved < RATE_KEPT * offered:
        return "rate"
    return "pass"


def generator_late(probe: KneeProbe, slo: Slo) -> bool:
    """The generator sent the probe's requests late by more than LATE_FRACTION of the target
    (p99 of its schedule lag): it waited for a CPU, and that wait counts as latency."""
    return (probe.schedule_lag_p99_us or 0.0) > LATE_FRACTION * slo.target_us


@dataclass(frozen=True)
class SearchPlan:
    """What one knee search aims at and may spend."""

    slo: Slo
    start_rps: float
    budget_s: float
    tolerance: float = 0.05
    warmup_s: float = 1.0
    repeats: int = DEFAULT_REPEATS
    floor_rps: float = FLOOR_RPS
    ceiling_rps: float = CEILING_RPS

    def probe_s(self, rate: float) -> float:
        """The measured window at ``rate``: long enough for the SLO's samples, within bounds."""
        return min(MAX_PROBE_S, max(MIN_PROBE_S, self.slo.min_samples / rate))

    def probe_cost_s(self, rate: float) -> float:
        """Wall seconds a probe at ``rate`` takes, warm-up included."""
        return self.warmup_s + self.probe_s(rate) + PROBE_OVERHEAD_S

    def rate_cost_s(self, rate: float) -> float:
        """Wall seconds judging ``rate`` takes: all of its probes."""
        return self.repeats * self.probe_cost_s(rate)


@dataclass
class KneeResult:
    """How a search ended: the knee (highest rate every probe of which passed) or the SLO
    not met; ``flip_rps``: the highest rate whose probes disagreed (the edge is then the
    range ``knee_rps``..``flip_rps``)."""

    status: str  # "found" | "not_met"
    knee_rps: float | None
    fail_rps: float | None  # the lowest rate above the knee that did not pass every probe
    lowest_rps: float
    ended: str  # "tolerance" | "budget" | "ceiling" | "floor"
    search_s: float
    probes: list[KneeProbe] = field(default_factory=list)
    flip_rps: float | None = None
    repeats: int = 1

    def message(self, slo: Slo) -> str:
        """One line for people: ``knee 1,950 req/s (p99 <= 20ms)``, ``knee 1,950-2,300
        req/s ...`` when the edge flips, or ``SLO not met ...``."""
        held = f"({slo.label} <= {slo.target_text})"
        flips = (
            f"; it flips: some probes met it up to {self.flip_rps:,.0f} req/s"
            if self.flip_rps is not None
            else ""
        )
        if self.knee_rps is None:
            why = " (the time budget allowed no lower rate)" if self.ended == "budget" else ""
            return f"SLO {slo} not met at {self.lowest_rps:,.0f} req/s{why}{flips}"
        if self.flip_rps is not None:
            return (
                f"knee {self.knee_rps:,.0f}-{self.flip_rps:,.0f} req/s {held}: every probe "
                f"met it up to {self.knee_rps:,.0f}, some up to {self.flip_rps:,.0f}"
            )
        return f"knee {self.knee_rps:,.0f} req/s {held}"


ProbeFn = Callable[[float, str], KneeProbe]


def search_knee(
    plan: SearchPlan, probe: ProbeFn, clock: Callable[[], float] = time.monotonic
) -> KneeResult:
    """Bracket, then bisect, the highest rate at which every one of ``plan.repeats``
    probes ``probe(rate, phase)`` passes.

    The first rate always runs (as many of its probes as fit in ``plan.budget_s``, at least
    one); each later rate only if all of its probes fit in what is left of it. The knee is
    the highest rate that passed every probe; the true one lies below the lowest rate above
    it that did not (``fail_rps``). A rate whose probes disagree counts as not passing, and
    the highest such rate is ``flip_rps``.
    """
    t0 = clock()
    probes: list[KneeProbe] = []
    flips: list[float] = []
    passed: float | None = None
    failed: float | None = None
    rate = min(max(plan.start_rps, plan.floor_rps), plan.ceiling_rps)
    ended = "tolerance"

    def fits(r: float) -> bool:
        return not probes or clock() - t0 + plan.rate_cost_s(r) <= plan.budget_s

    def judged(r: float, phase: str) -> bool:
        """Whether every probe of ``r`` passed; a rate whose probes disagree flipped. The
        first rate always runs: as many of its probes as the budget holds, at least one."""
        repeats = max(1, plan.repeats)
        if not probes:
            repeats = max(1, min(repeats, int(plan.budget_s // plan.probe_cost_s(r))))
        outcomes = []
        for _ in range(repeats):
            p = probe(r, phase)
            probes.append(p)
            outcomes.append(p.passed)
        if any(outcomes) and not all(outcomes):
            flips.append(r)
        return all(outcomes)

    while passed is None or failed is None:  # bracket
        if not fits(rate):
            ended = "budget"
            break
        if judged(rate, "bracket"):
            passed = rate
            rate *= 2
            if failed is None and rate > plan.ceiling_rps:
                ended = "ceiling"
                break
        else:
            failed = rate
            rate /= 2
            if passed is None and rate < plan.floor_rps:
                ended = "floor"
                break
    while passed is not None and failed is not None and failed / passed - 1 > plan.tolerance:
        mid = (passed + failed) / 2
        if not fits(mid):
            ended = "budget"
            break
        if judged(mid, "bisect"):
            passed = mid
        else:
            failed = mid
    return KneeResult(
        status="found" if passed is not None else "not_met",
        knee_rps=passed,
        fail_rps=failed,
        lowest_rps=min(p.rate_offered for p in probes),
        ended=ended,
        search_s=clock() - t0,
        probes=probes,
        flip_rps=max(flips) if flips else None,
        repeats=max(1, plan.repeats),
    )


def start_rate(measured_rps: list[float]) -> float:
    """Where a search starts: half the median measured rate (closed loop, a stack's
    capacity under overload), else :data:`DEFAULT_START_RPS`."""
    values = sorted(v for v in measured_rps if v > 0 and math.isfinite(v))
    if not values:
        return DEFAULT_START_RPS
    return max(FLOOR_RPS, values[len(values) // 2] / 2)


def closes_connections(settings: Mapping[str, object]) -> bool:
    """Whether a server closes the connection after every response (its manifest's
    ``keep_alive`` is off, as gunicorn's sync worker). Its knee is probed with a new
    connection per request, opened when the request is due, over the cell's connections,
    as a connection-per-request client would: a pool of pre-opened idle connections would
    hold its one-at-a-time workers on connections that carry no request yet (docs/slo.md)."""
    return str(settings.get("keep_alive", "on")).lower().startswith("off")


def measured_rps(store: StoreWriter, cell_id: int, replicate: int) -> list[float]:
    """The req/s of a replicate's measured iterations (where its knee search starts)."""
    return [
        it.rps
        for it in store.iterations(cell_id)
        if it.replicate == replicate and it.kind == IterationKind.MEASURED
    ]


class KneePhase:
    """The knee search of one replicate on its running server, into the store."""

    def __init__(
        self,
        config: StudyConfig,
        store: StoreWriter,
        agent: LoadAgent,
        generator_cpus: list[int],
        *,
        progress: Callable[[LoadProgress], None],
        report: Callable[[CellPlan, str], None],
    ) -> None:
        load = config.load
        assert load.slo is not None  # only built for a study with an SLO
        self.slo = parse_slo(load.slo)
        self.config = config
        self.store = store
        self.agent = agent
        self.generator_cpus = generator_cpus
        self._progress = progress
        self._report = report

    def plan(self, start_rps: float) -> SearchPlan:
        load = self.config.load
        return SearchPlan(
            slo=self.slo,
            start_rps=start_rps,
            budget_s=load.slo_budget_s,
            tolerance=load.slo_tolerance,
            warmup_s=load.slo_warmup_s,
            repeats=load.slo_repeats,
        )

    def run(
        self,
        cell: CellPlan,
        cell_id: int,
        replicate: int,
        server: RunningServer,
        measured_rps: list[float],
    ) -> StackFailure | None:
        """Search, storing each probe as it ends and the knee once the search ends by itself.

        Returns the failure when the server died; raises :class:`Interrupted` on Ctrl-C
        (the probes so far stay stored, no knee is)."""
        plan = self.plan(start_rate(measured_rps))
        count = [0]

        def probe(rate: float, phase: str) -> KneeProbe:
            row = self._probe(cell, cell_id, replicate, server, plan, rate, phase, count[0])
            count[0] += 1
            if not server.alive():
                raise _ServerDied(
                    StackFailure(
                        Phase.MEASURE,
                        f"server process exited during the knee search at {rate:,.0f} req/s",
                        log_tail(server),
                    )
                )
            return row

        self._report(cell, f"knee search {self.slo} from {plan.start_rps:,.0f} req/s")
        try:
            result = search_knee(plan, probe)
        except _ServerDied as exc:
            return exc.failure
        with no_sigint():
            self.store.add_knee(knee_row(cell_id, replicate, self.slo, result))
        self._report(cell, result.message(self.slo) + f" ({len(result.probes)} probes)")
        return None

    def probe_spec(
        self, cell: CellPlan, server: RunningServer, plan: SearchPlan, rate: float
    ) -> LoadSpec:
        """A probe's load: the cell's own (connections, connection mode, I/O backend, bind)
        at ``rate``, with the plan's warm-up before its window; a connection per request to
        a server that closes every connection (:func:`closes_connections`)."""
        per_request: dict[str, object] = {}
        if closes_connections(server.settings) and cell.protocol == "http1":
            per_request = {"keepalive": False, "requests_per_connection": 0}
        return cell.load_spec(
            server.base_url,
            self.config.load,
            self.generator_cpus,
            duration_s=plan.probe_s(rate),
            rate=rate,
            warmup_s=plan.warmup_s,
            **per_request,
        )

    def _probe(
        self,
        cell: CellPlan,
        cell_id: int,
        replicate: int,
        server: RunningServer,
        plan: SearchPlan,
        rate: float,
        phase: str,
        idx: int,
    ) -> KneeProbe:
        spec = self.probe_spec(cell, server, plan, rate)
        started = utcnow()

        def watch(snap: LoadProgress) -> bool:
            self._progress(snap)
            # an error or a timeout already fails the probe: no need to load on
            return snap.phase == "measure" and (snap.errors + snap.timeouts) > 0

        result = self.agent.run(spec, progress=watch)
        if result.interrupted:
            raise Interrupted()
        row = probe_row(result, self.slo, cell_id, replicate, phase, started)
        row.idx = idx
        lag_ms = (row.schedule_lag_p99_us or 0.0) / 1000
        with no_sigint():
            self.store.add_knee_probe(row)
        self._report(
            cell,
            f"probe {row.idx + 1} {phase}: {rate:,.0f} req/s offered, "
            f"{row.rate_achieved:,.0f} achieved, {self.slo.label} "
            f"{row.latency_us / 1000:.2f} ms, errors {row.errors}: {row.verdict}"
            + (f" (generator late: p99 {lag_ms:.1f} ms)" if generator_late(row, self.slo) else ""),
        )
        return row


def probe_row(
    result: LoadResult, slo: Slo, cell_id: int, replicate: int, phase: str, started_at: str
) -> KneeProbe:
    """A probe's row from its load result (``idx`` is filled in by the caller)."""
    offered = float(result.spec.rate or 0.0)
    duration = float(result.duration_s or 0.0)
    if result.open_loop is not None:
        achieved = float(result.open_loop.achieved_rate)
    else:
        achieved = result.requests / duration if duration else 0.0
    hist = result.latency.histogram
    latency_us, p50_us = hist.quantiles([slo.quantile, 0.5]) if hist.count else (0.0, 0.0)
    errors = int(result.errors) + int(result.timeouts)
    return KneeProbe(
        id=None,
        cell_id=cell_id,
        replicate=replicate,
        idx=0,
        phase=phase,
        started_at=started_at,
        rate_offered=offered,
        rate_achieved=achieved,
        duration_s=duration,
        requests=int(result.requests),
        errors=errors,
        latency_us=float(latency_us),
        latency_p50_us=float(p50_us),
        samples=int(result.latency.summary.count),
        verdict=probe_verdict(
            slo, latency_us=latency_us, errors=errors, offered=offered, achieved=achieved
        ),
        schedule_lag_p99_us=(
            float(result.schedule_lag.summary.p99) if result.schedule_lag is not None else None
        ),
    )


class _ServerDied(Exception):
    """The server exited during a probe: the search stops with this failure."""

    def __init__(self, failure: StackFailure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def knee_row(cell_id: int, replicate: int, slo: Slo, result: KneeResult) -> Knee:
    """The ``knees`` row of a finished search."""
    return Knee(
        id=None,
        cell_id=cell_id,
        replicate=replicate,
        slo=str(slo),
        percentile=slo.percentile,
        target_us=slo.target_us,
        status=result.status,
        knee_rps=result.knee_rps,
        fail_rps=result.fail_rps,
        lowest_rps=result.lowest_rps,
        ended=result.ended,
        probes=len(result.probes),
        search_s=round(result.search_s, 3),
        min_samples=slo.min_samples,
        finished_at=utcnow(),
        flip_rps=result.flip_rps,
        repeats=result.repeats,
    )
