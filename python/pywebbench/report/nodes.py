"""Which node measured which cell (``--executor ray``, docs/scale-out.md), and a warning when
cells that are compared ran on different node types (CPU model, cores).

Cells of one workload are compared (its rankings), so a workload whose cells' replicates ran
on more than one node type gets a warning. Runs of the local executor record no node: then
there is nothing to show.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from pywebbench.store.model import Replicate, Study


@dataclass(frozen=True)
class NodeRow:
    """One cell and the nodes (and node types) its replicates ran on."""

    stack: str
    workload: str
    load_point: str
    nodes: list[str]
    types: list[str]


@dataclass
class NodesView:
    """The nodes of a distributed study, cell by cell, and the warnings."""

    rows: list[NodeRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def node_type(rep: Replicate) -> str:
    """A node's type as people read it: ``CPU model, N cores``."""
    return f"{rep.node_cpu_model or 'unknown CPU'}, {rep.node_cpus or '?'} cores"


def _node(rep: Replicate) -> str:
    return f"{rep.node} #{(rep.node_id or '')[:8]}"


def nodes_view(study: Study) -> NodesView | None:
    """The nodes of ``study``'s cells; None when no replicate records its node."""
    by_cell: dict[int, list[Replicate]] = defaultdict(list)
    for rep in study.replicates:
        if rep.node_id is not None:
            by_cell[rep.cell_id].append(rep)
    if not by_cell:
        return None
    stacks = {s.id: s.key for s in study.stacks}
    view = NodesView()
    types_of: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for cell in sorted(study.cells, key=lambda c: (c.run_id, c.ordinal)):
        reps = by_cell.get(cell.id or -1)
        if not reps:
            continue
        types = sorted({node_type(r) for r in reps})
        stack = stacks.get(cell.stack_id, "?")
        view.rows.append(
            NodeRow(stack, cell.workload, cell.load_point, sorted({_node(r) for r in reps}), types)
        )
        for kind in types:
            types_of[cell.workload][kind].append(f"{stack} {cell.load_point}")
    for workload, cells_by_type in types_of.items():
        if len(cells_by_type) > 1:
            listed = "; ".join(
                f"{kind} ({', '.join(cells)})" for kind, cells in sorted(cells_by_type.items())
            )
            view.warnings.append(
                f"{workload}: the compared cells ran on different node types: {listed}. "
                "Differences between them may be the hardware's."
            )
    return view


def markdown_lines(view: NodesView | None, text: Callable[[str], str]) -> list[str]:
    """The Markdown section (``text`` escapes a table cell); none without nodes."""
    if view is None:
        return []
    out = ["## Nodes", "", "Which node measured which cell (`--executor ray`).", ""]
    out += [f"> **Warning**: {text(w)}" for w in view.warnings]
    if view.warnings:
        out.append("")
    out += ["| stack | workload | load | nodes | node type |", "|---|---|---|---|---|"]
    for r in view.rows:
        cells = [r.stack, r.workload, r.load_point, ", ".join(r.nodes), "; ".join(r.types)]
        out.append("| " + " | ".join(text(c) for c in cells) + " |")
    return out + [""]
