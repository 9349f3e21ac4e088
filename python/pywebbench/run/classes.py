"""The classification table of ``pywebbench run --warmup deep`` (docs/steady-state.md#deep).

Barrett et al. (OOPSLA 2017) report, per benchmark, how its process executions were
classified and whether they agree. One row per cell: how many of its replicates were flat,
warm-up, slowdown or had no steady state, the cell's classification (their one class, good or
bad inconsistent: :func:`pywebbench.analysis.warmup_class.cell_class`) and whether their levels are
consistent (:func:`pywebbench.analysis.modes.modes`).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from pywebbench.analysis.modes import modes, replicate_figures
from pywebbench.analysis.warmup_class import WarmupClass, cell_class
from pywebbench.meter.core_speed import study_scaling
from pywebbench.store import Study


def class_rows(study: Study) -> list[dict[str, Any]]:
    """Per cell with replicates: ``stack``, ``cell``, the count of each class (and of the
    replicates left unclassified, ``unclassified``), the cell's ``classification`` ("-"
    when none is classified) and ``consistency`` of the levels in words."""
    out = []
    speed = study_scaling(study)
    for cell in study.cells:
        assert cell.id is not None
        reps = [r for r in study.replicates_of(cell.id) if r.status == "ok"]
        if not reps:
            continue
        counts: dict[str, Any] = {c.value: 0 for c in WarmupClass}
        counts["unclassified"] = 0
        for r in reps:
            counts[r.warmup_class or "unclassified"] += 1
        classes = [r.warmup_class for r in reps if r.warmup_class]
        used = [it for it in study.iterations_of(cell.id) if not it.interrupted]
        by_rep: dict[int, list[float]] = {}
        for it, rps in zip(used, speed.rps(used), strict=True):
            by_rep.setdefault(it.replicate, []).append(rps)
        consistency = modes(replicate_figures([by_rep[k] for k in sorted(by_rep)]))
        out.append(
            {
                "stack": study.stack(cell.stack_id).key,
                "cell": f"{cell.workload} @ {cell.load_point}",
                **counts,
                "classification": cell_class(classes) if classes else "-",
                "consistency": consistency.describe(),
            }
        )
    return out


def class_table(study: Study) -> Table:
    """The classification table (module doc) as a rich table."""
    t = Table(
        title="Barrett classification of each replicate (process execution)",
        title_justify="left",
    )
    columns = [
        "stack",
        "cell",
        *(c.value for c in WarmupClass),
        "unclassified",
        "classification",
        "consistency",
    ]
    for col in columns:
        left = col in ("stack", "cell", "classification", "consistency")
        t.add_column(col, justify="left" if left else "right")
    for row in class_rows(study):
        t.add_row(*(str(row[c]) for c in columns))
    return t
