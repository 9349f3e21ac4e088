"""``pywebbench export --format csv``: one table of the runs; by default (``flat``) one row
per iteration joined with its stack and cell, or the CPU breakdown per sampled window, or one
row per endpoint of a mix per measured iteration (``endpoints``), or one stored table."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Sequence
from typing import Any

from pywebbench.export.base import ExportOptions
from pywebbench.store.db import Store
from pywebbench.store.endpoints import ENDPOINT_COLUMNS, endpoint_rows
from pywebbench.store.model import TABLE_CLASSES, Study

# Columns of the flat "iterations" CSV taken from the cell and the stack of each iteration.
_CELL_COLS = (
    "workload",
    "load_model",
    "connections",
    "rate",
    "load_point",
    "connection_mode",
    "bind",
    "protocol",
    "status",
)
_STACK_COLS = (
    "name",
    "interpreter",
    "interpreter_version",
    "interpreter_free_threaded",
    "interpreter_gil",
    "server",
    "framework",
    "workers",
    "threads",
)
CSV_TABLES = ("flat", "breakdown", "endpoints", *TABLE_CLASSES)


def flat_rows(study: Study) -> list[dict[str, Any]]:
    """One row per iteration with its run, stack and cell columns, and its replicate's
    instructions per request (``--instructions``; empty without); without result_json."""
    rows = []
    cells = {c.id: c for c in study.cells}
    stacks = {s.id: s for s in study.stacks}
    counted = {  # --instructions: the replicate's count (docs/instructions.md)
        (r.cell_id, r.replicate): r.instructions.get("per_request") for r in study.replicates
    }
    for it in study.iterations:
        cell = cells[it.cell_id]
        stack = stacks[cell.stack_id]
        row: dict[str, Any] = {"run_id": cell.run_id}
        row.update({f"stack_{c}" if c == "name" else c: getattr(stack, c) for c in _STACK_COLS})
        row.update({f"cell_{c}" if c == "status" else c: getattr(cell, c) for c in _CELL_COLS})
        row.update({k: v for k, v in dataclasses.asdict(it).items() if k != "result_json"})
        row["instructions_per_request"] = counted.get((it.cell_id, it.replicate))
        rows.append(row)
    return rows


def breakdown_rows(study: Study) -> list[dict[str, Any]]:
    """One row per sampled window (``run --flamegraph``): where the server tree's CPU time
    went, by owner, as fractions (docs/flamegraphs.md)."""
    from pywebbench.meter.breakdown import breakdown
    from pywebbench.meter.flame import CATEGORIES, FlameWindow

    cells = {c.id: c for c in study.cells}
    stacks = {s.id: s for s in study.stacks}
    rows = []
    for rep in study.replicates:
        doc = rep.flame
        cell = cells.get(rep.cell_id)
        if cell is None or not doc or "error" in doc or not doc.get("requests"):
            continue
        window = FlameWindow.from_dict(doc)
        b = breakdown([window])
        rows.append(
            {
                "run_id": cell.run_id,
                "stack": stacks[cell.stack_id].key,
                "workload": cell.workload,
                "load_point": cell.load_point,
                "replicate": rep.replicate,
                "requests": window.requests,
                "cpu_s_per_request": b.cpu_s_per_request,
                **{c: b.shares[c] for c in CATEGORIES},
                "kernel": b.kernel,
            }
        )
    return rows


def export_csv(store: Store, run_ids: Sequence[str] = (), table: str = "flat") -> str:
    """CSV text of one table of the runs; ``flat`` = iterations joined with stack and cell."""
    if table not in CSV_TABLES:
        raise ValueError(f"unknown table {table!r}; choose one of {', '.join(CSV_TABLES)}")
    study = store.load_study(run_ids)
    if table == "flat":
        rows = flat_rows(study)
        header = list(rows[0]) if rows else ["run_id"]
    elif table == "breakdown":
        rows = breakdown_rows(study)
        header = list(rows[0]) if rows else ["run_id"]
    elif table == "endpoints":
        rows = endpoint_rows(study)
        header = list(ENDPOINT_COLUMNS)
    else:
        rows = [dataclasses.asdict(r) for r in getattr(study, table)]
        header = [f.name for f in dataclasses.fields(TABLE_CLASSES[table])]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write(store: Store, options: ExportOptions) -> str:
    """The exporter of the registry (:data:`pywebbench.export.EXPORTERS`)."""
    return export_csv(store, options.runs, options.table)
