"""Compare two stored runs cell by cell, and gate CI jobs on regressions.

>>> from pywebbench.compare import compare_runs
>>> with Store(path, create=False) as store:
...     result = compare_runs(store, "20261120", "20261121", vary=["interpreter"])
>>> [(c.label, c.verdict) for c in result.comparisons]

Pipeline: :mod:`~pywebbench.compare.cells` reads each cell's per-replicate values,
:mod:`~pywebbench.compare.match` pairs cells, :mod:`~pywebbench.analysis.ratio` and
:mod:`~pywebbench.compare.verdict` estimate ratios and call verdicts,
:mod:`~pywebbench.compare.gate` applies ``--fail-if`` rules and
:mod:`~pywebbench.compare.render` lays the result out. Method: docs/compare.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pywebbench.compare.cells import CellFigures, cell_figures
from pywebbench.compare.gate import Rule, Violation, evaluate
from pywebbench.compare.match import AXES, Matching, Unmatched, match_cells
from pywebbench.compare.verdict import (
    DEFAULT_LEVEL,
    DEFAULT_MIN_CHANGE,
    PairComparison,
    compare_pairs,
)
from pywebbench.meter.core_speed import study_scaling
from pywebbench.store import Run, Store

__all__ = [
    "AXES",
    "Comparison",
    "PairComparison",
    "compare_runs",
]


@dataclass
class Comparison:
    """Everything ``pywebbench compare`` reports."""

    base: Run
    new: Run
    vary: list[str]
    level: float
    min_change: float
    comparisons: list[PairComparison] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    incomplete: list[CellFigures] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    @property
    def gate_failed(self) -> bool:
        return bool(self.violations)


def compare_runs(
    store: Store,
    base_id: str,
    new_id: str,
    *,
    vary: Iterable[str] = (),
    rules: Sequence[Rule] = (),
    level: float = DEFAULT_LEVEL,
    min_change: float = DEFAULT_MIN_CHANGE,
    accept_interfered: bool = False,
) -> Comparison:
    """Compare run ``new_id`` with ``base_id`` (ids or unique prefixes).

    Raises :class:`pywebbench.store.StoreError` for unknown runs. The result may have no
    pairs (no cell in common): the caller decides whether that is an error.
    ``accept_interfered``: the gate judges interfered cells on their figures instead of
    failing them.
    """
    base_run, new_run = store.run(base_id), store.run(new_id)
    base, new = store.load_study([base_run.id]), store.load_study([new_run.id])
    # Both sides' req/s at one core speed, or both raw (docs/interference.md#core-speed).
    speed = study_scaling(base, new)
    matching: Matching = match_cells(cell_figures(base, speed), cell_figures(new, speed), vary)
    comparisons = compare_pairs(matching.pairs, level=level, min_change=min_change)
    return Comparison(
        base=base_run,
        new=new_run,
        vary=sorted(set(vary)),
        level=level,
        min_change=min_change,
        comparisons=comparisons,
        unmatched=matching.unmatched,
        incomplete=matching.incomplete,
        rules=list(rules),
        violations=evaluate(rules, comparisons, accept_interfered=accept_interfered),
    )
