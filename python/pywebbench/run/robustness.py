"""The fault phase of a cell: its last measured iteration again, under the fault mix.

See docs/faults.md. The result is stored in the cell's flags as ``robustness``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pywebbench.load import LoadAgent, spec_for_request
from pywebbench.load.result import LoadResult
from pywebbench.run.config import StudyConfig
from pywebbench.run.matrix import CellPlan


def fault_phase(
    cell: CellPlan,
    base_url: str,
    alive: Callable[[], bool],
    clean_result: LoadResult,
    *,
    config: StudyConfig,
    agent: LoadAgent,
    generator_cpus: Sequence[int],
    progress: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Measure ``cell`` on the running server under ``config.load.faults``; its robustness."""
    from pywebbench.faults import measure_of, measure_robustness, parse_mix

    cfg = config.load
    if cfg.faults is None:
        raise ValueError("the study has no fault mix")
    spec = spec_for_request(
        base_url,
        cell.request,
        connections=cell.connections,
        duration_s=cfg.duration_s,
        timeout_s=cfg.timeout_s,
        cpus=generator_cpus,
        rate=cell.rate,
        io=cfg.io,
    )
    run = measure_robustness(
        base_url.rstrip("/") + cell.request.path,
        parse_mix(cfg.faults),
        lambda: agent.run(spec, progress=progress),
        alive=alive,
        clean_result=clean_result,
    )
    return {
        "mix": cfg.faults,
        **run.robustness.to_dict(),
        "clean_rps": measure_of(run.clean).rps,
        "faulted_rps": measure_of(run.faulted).rps,
        "recovery_s": run.recovery_s,
        "report": run.report.to_dict(),
    }
