"""What the runner tells the terminal while it works, and how a study ended."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pywebbench.store import RunStatus
from pywebbench.study.matrix import CellPlan


def _ignore(*_args: object) -> None:
    return None


@dataclass
class Events:
    """Callbacks the terminal display hooks into (all optional)."""

    phase: Callable[[str], None] = _ignore  # "provisioning ...", "starting ..."
    cell_start: Callable[[CellPlan, int], None] = _ignore  # cell, iterations to run
    iteration_start: Callable[[CellPlan, str], None] = _ignore  # cell, kind
    iteration_done: Callable[[CellPlan, str, float], None] = _ignore  # cell, kind, req/s
    cell_done: Callable[[CellPlan, str, str | None], None] = _ignore  # cell, status, why
    live_rps: Callable[[float], None] = _ignore
    knee: Callable[[CellPlan, str], None] = _ignore  # cell, a step of its knee search


@dataclass
class Outcome:
    """How a study ended."""

    run_id: str
    status: RunStatus
    cells_ok: int = 0
    cells_failed: int = 0
    cells_skipped: int = 0  # already done before --resume
    wall_s: float = 0.0
    measured_s: float = 0.0  # sum of the load windows (warm-up + measured)
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (what, phase, reason)
