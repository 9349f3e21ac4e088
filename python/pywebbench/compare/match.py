"""Pair the cells of two runs: same stack, workload and load point (connection mode, bind).

A stack is identified by its interpreter, its server (with workers x threads and worker
recycling), its framework (or app) and the exact versions of its installed packages. ``vary``
names the axes the user expects to differ between the runs (``--vary interpreter``), which
are then left out of the identity: cpython3.11 cells pair with pypy3.9 cells of the same
server and framework. Cells whose measurement was cut short (a run still running, or
interrupted) are set aside, never compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pywebbench.compare.cells import INCOMPLETE_STATUSES, CellFigures

# Axes of a stack's identity that --vary can release.
AXES = ("interpreter", "packages", "server", "framework")

MatchKey = tuple[object, ...]


def _axis_value(fig: CellFigures, axis: str) -> object:
    stack = fig.stack
    if axis == "interpreter":
        return stack.interpreter
    if axis == "packages":
        return tuple(sorted(stack.packages.items()))
    if axis == "server":
        return stack.server
    return stack.framework


def match_key(fig: CellFigures, vary: Iterable[str] = ()) -> MatchKey:
    """What must be equal for two cells to pair, with the ``vary`` axes left out."""
    released = set(vary)
    axes = tuple(_axis_value(fig, a) if a not in released else "*" for a in AXES)
    return (
        *axes,
        fig.stack.workers,
        fig.stack.threads,
        fig.stack.worker_max_requests,
        fig.cell.workload,
        fig.cell.load_point,
        fig.cell.connection_mode,
        fig.cell.bind,
        fig.cell.protocol,
    )


def describe_difference(base: CellFigures, new: CellFigures) -> list[str]:
    """What differs between two paired cells, for people: ``interpreter cpython3.11 -> pypy3.9``."""
    notes = []
    for axis in ("interpreter", "server", "framework"):
        a, b = _axis_value(base, axis), _axis_value(new, axis)
        if a != b:
            notes.append(f"{axis} {a} -> {b}")
    if base.stack.interpreter_version != new.stack.interpreter_version:
        notes.append(
            f"{base.stack.interpreter} {base.stack.interpreter_version} -> "
            f"{new.stack.interpreter_version}"
        )
    old_pkgs, new_pkgs = base.stack.packages, new.stack.packages
    for name in sorted(set(old_pkgs) | set(new_pkgs)):
        if old_pkgs.get(name) != new_pkgs.get(name):
            notes.append(f"{name} {old_pkgs.get(name, '-')} -> {new_pkgs.get(name, '-')}")
    if base.cell.workload_params != new.cell.workload_params:
        notes.append(f"params {base.cell.workload_params} -> {new.cell.workload_params}")
    return notes


@dataclass
class Pair:
    """A BASE cell and the NEW cell it is compared with."""

    base: CellFigures
    new: CellFigures

    @property
    def label(self) -> str:
        """The NEW cell's label (the BASE one's when the stacks differ is in ``differences``)."""
        return self.new.label

    @property
    def differences(self) -> list[str]:
        return describe_difference(self.base, self.new)


@dataclass
class Unmatched:
    """A cell with no partner, and why."""

    side: str  # "base" | "new"
    cell: CellFigures
    reason: str


@dataclass
class Matching:
    """The outcome of pairing two runs' cells."""

    pairs: list[Pair] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    incomplete: list[CellFigures] = field(default_factory=list)  # set aside, with a warning


def _hint(fig: CellFigures, others: Sequence[CellFigures], vary: set[str]) -> str:
    """Why ``fig`` found no partner among ``others``: the axis that differs, if one does."""
    same_place = [
        o
        for o in others
        if (o.cell.workload, o.cell.load_point) == (fig.cell.workload, fig.cell.load_point)
    ]
    for axis in AXES:
        if axis in vary:
            continue
        rest = set(AXES) - {axis} - vary
        for o in same_place:
            if all(_axis_value(o, a) == _axis_value(fig, a) for a in rest) and (
                (o.stack.workers, o.stack.threads) == (fig.stack.workers, fig.stack.threads)
            ):
                return f"{axis} differs from {o.stack.key} (pass --vary {axis} to pair them)"
    return "no cell with the same stack, workload and load point"


def match_cells(
    base: Sequence[CellFigures], new: Sequence[CellFigures], vary: Iterable[str] = ()
) -> Matching:
    """Pair ``base`` and ``new`` cells; incomplete cells are set aside first."""
    released = set(vary)
    out = Matching()
    sides: dict[str, dict[MatchKey, list[CellFigures]]] = {}
    for side, cells in (("base", base), ("new", new)):
        grouped: dict[MatchKey, list[CellFigures]] = defaultdict(list)
        for fig in cells:
            if fig.cell.status in INCOMPLETE_STATUSES:
                out.incomplete.append(fig)
            else:
                grouped[match_key(fig, released)].append(fig)
        sides[side] = grouped
    complete_base = [f for fs in sides["base"].values() for f in fs]
    complete_new = [f for fs in sides["new"].values() for f in fs]
    for key, base_figs in sides["base"].items():
        new_figs = sides["new"].get(key, [])
        if len(base_figs) == 1 and len(new_figs) == 1:
            out.pairs.append(Pair(base_figs[0], new_figs[0]))
            continue
        if not new_figs:
            for fig in base_figs:
                out.unmatched.append(Unmatched("base", fig, _hint(fig, complete_new, released)))
            continue
        for side, figs in (("base", base_figs), ("new", new_figs)):
            for fig in figs:
                reason = f"{len(base_figs)} BASE and {len(new_figs)} NEW cells share its key"
                out.unmatched.append(Unmatched(side, fig, reason + " (ambiguous)"))
    for key, new_figs in sides["new"].items():
        if key not in sides["base"]:
            for fig in new_figs:
                out.unmatched.append(Unmatched("new", fig, _hint(fig, complete_base, released)))
    return out
