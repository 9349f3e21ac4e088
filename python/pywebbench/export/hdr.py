"""``pywebbench export --format hdr``: HdrHistogram interval logs (``.hlog``).

One interval log per cell (and one per endpoint of a mix), one interval per measured
iteration, holding that iteration's latency histogram (microseconds) exactly as the load engine
encoded it (compressed V2, base64) - the encoding HdrHistogram's log readers expect.
Interval timestamps are seconds since the run started; ``Interval_Max`` is in
milliseconds (the microsecond values / 1000).
"""

from __future__ import annotations

import re
from datetime import datetime

from pywebbench.export.base import (
    ExportOptions,
    cell_name,
    iterations_by_replicate,
    run_date,
)
from pywebbench.store.db import Store
from pywebbench.store.model import Cell, Iteration, Study


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _endpoint_hist(it: Iteration, endpoint: str) -> str | None:
    from pywebbench.store.endpoints import iteration_endpoints

    for e in iteration_endpoints(it):
        if e["name"] == endpoint:
            return str(e["latency"]["hist"])
    return None


def hlog_text(study: Study, cell: Cell, endpoint: str | None = None) -> str | None:
    """The interval log of one cell (of one ``endpoint`` of its mix when given); None when
    it has no stored histogram."""
    from pywebbench.load.histogram import Histogram

    run = next(r for r in study.runs if r.id == cell.run_id)
    stack = study.stack(cell.stack_id)
    start = _epoch(run.created_at)
    what = cell_name(stack, cell) + (f" endpoint {endpoint}" if endpoint else "")
    lines = [
        "#[Histogram log format version 1.3]",
        f"#[pywebbench run {run.id}: {what}; values in microseconds]",
        f"#[StartTime: {start:.3f} (seconds since epoch), {run_date(run.created_at)} UTC]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    intervals = 0
    for _, its in sorted(iterations_by_replicate(study, cell).items()):
        for it in its:
            hist = it.latency_histogram() if endpoint is None else _endpoint_hist(it, endpoint)
            if it.kind != "measured" or hist is None:
                continue
            max_ms = Histogram(hist).summary().max / 1000.0
            offset = _epoch(it.started_at) - start
            lines.append(f"{offset:.3f},{it.duration_s:.3f},{max_ms:.3f},{hist}")
            intervals += 1
    return "\n".join(lines) + "\n" if intervals else None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", text).strip("_")


def hlog_files(study: Study) -> dict[str, str]:
    """File name -> interval log text, one per cell with histograms (``<run>_<cell>.hlog``)
    and, for a cell loaded with a mix, one per endpoint (``<run>_<cell>_<endpoint>.hlog``)."""
    from pywebbench.store.endpoints import iteration_endpoints

    files: dict[str, str] = {}
    for cell in sorted(study.cells, key=lambda c: (c.run_id, c.ordinal)):
        base = f"{cell.run_id}_{_slug(cell_name(study.stack(cell.stack_id), cell))}"
        text = hlog_text(study, cell)
        if text is not None:
            files[f"{base}.hlog"] = text
        names = {
            str(e["name"]): None
            for it in study.iterations
            if it.cell_id == cell.id
            for e in iteration_endpoints(it)
        }
        for endpoint in names:
            text = hlog_text(study, cell, endpoint)
            if text is not None:
                files[f"{base}_{_slug(endpoint)}.hlog"] = text
    return files


def write(store: Store, options: ExportOptions) -> dict[str, str]:
    """The exporter of the registry (:data:`pywebbench.export.EXPORTERS`): file name ->
    interval log."""
    return hlog_files(store.load_study(options.runs))
