"""The fault phase of a cell: its load again, clean and under the fault mix; with an intensity
sweep, once per attack size, each on a server not attacked before.

See docs/faults.md. The result, a :class:`~pywebbench.faults.outcome.CellRobustness`, is
stored in the cell's flags as ``robustness`` (the largest size's measurement; with a sweep its
``curve`` lists every size and the breaking point).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from pywebbench.faults.outcome import CellRobustness, CurvePoint, RobustnessCurve
from pywebbench.load import LoadAgent, LoadSpec
from pywebbench.load.result import LoadResult
from pywebbench.run.config import StudyConfig
from pywebbench.run.matrix import CellPlan

if TYPE_CHECKING:
    from pywebbench.faults import FaultSpec
    from pywebbench.faults.plan import FaultPlan

#: A fresh server for one sweep size: (base URL, is-alive), stopped on exit.
FreshServer = Callable[[], AbstractContextManager[tuple[str, Callable[[], bool]]]]

#: Retained throughput below this share of the clean run: the attack broke the stack.
BROKEN_BELOW_PCT = 50.0


def fault_phase(
    cell: CellPlan,
    base_url: str,
    alive: Callable[[], bool],
    clean_result: LoadResult | None,
    *,
    config: StudyConfig,
    agent: LoadAgent,
    generator_cpus: Sequence[int],
    progress: Callable[[Any], None] | None = None,
    fresh_server: FreshServer | None = None,
) -> CellRobustness:
    """Measure ``cell`` on the running server under ``config.load.faults``; its robustness.

    The good clients run the cell's load with the plan's share of arriving (fresh)
    connections, clean and then ``lead_s`` after the attack started. With a sweep, every size
    runs on its own ``fresh_server()``, warmed up with the same good stream first, so all
    sizes are measured alike (without ``fresh_server``, one after the other on the cell's
    server). ``clean_result`` is used only for a single mix without fresh connections (then
    the good stream is the measured one).
    """
    from pywebbench.faults.plan import parse_plan

    cfg = config.load
    if cfg.faults is None:
        raise ValueError("the study has no fault mix")
    plan = parse_plan(cfg.faults)

    def spec_at(url: str) -> LoadSpec:
        """The cell's load on the server at ``url``, with the plan's arriving clients (a
        share of fresh connections) where the cell reuses connections in a closed loop."""
        spec = cell.load_spec(url, cfg, generator_cpus, duration_s=cfg.duration_s)
        if plan.fresh_share > 0 and spec.mode == "closed":
            spec = spec.replace(fresh_share=plan.fresh_share)
        return spec

    spec = spec_at(base_url)
    reuse = clean_result if spec.fresh_share == 0 else None

    def measure(url: str, is_alive: Callable[[], bool], specs: list[FaultSpec]) -> CellRobustness:
        return _measure(spec_at(url), specs, plan, agent, progress, is_alive, reuse)

    points: list[tuple[int | None, CellRobustness]] = []
    for size, specs in plan.points():
        if not plan.is_sweep or fresh_server is None:
            points.append((size, measure(base_url, alive, specs)))
            continue
        with fresh_server() as (url, is_alive):
            agent.run(spec_at(url), progress=progress)  # the fresh server's warm-up (not stored)
            reuse = None  # another process: its own clean baseline
            points.append((size, measure(url, is_alive, specs)))
    last = points[-1][1]
    return last.model_copy(update={"curve": curve_of(plan, points)}) if plan.is_sweep else last


def _measure(
    spec: LoadSpec,
    specs: list[FaultSpec],
    plan: FaultPlan,
    agent: LoadAgent,
    progress: Callable[[Any], None] | None,
    alive: Callable[[], bool],
    clean_result: LoadResult | None,
) -> CellRobustness:
    """One measurement: clean (unless given), under ``specs``, then the recovery check."""
    from pywebbench.faults import measure_of, measure_robustness

    run = measure_robustness(
        spec.url,
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
