"""Exports in other tools' formats: pyperf's JSON and HdrHistogram interval logs.

pyperf (``python -m pyperf compare_to a.json b.json``, ``python -m pyperf stats``): one
benchmark per cell, one pyperf *run* per replicate (a fresh server process), its values
the measured iterations and its warm-ups the warm-up iterations. pyperf reads every value as
"lower is faster", so throughput is written as its inverse, the seconds per request
(1 / requests/s): pyperf's "faster" then means more requests/s. Latency metrics are the
iterations' p50/p99/mean in seconds. Format reference: pyperf's docs, "JSON format".

HdrHistogram (``.hlog``): one interval log per cell, one interval per measured iteration,
holding that iteration's latency histogram (microseconds) exactly as the load engine
encoded it (compressed V2, base64) - the encoding HdrHistogram's log readers expect.
Interval timestamps are seconds since the run started; ``Interval_Max`` is in
milliseconds (the microsecond values / 1000).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from pywebbench.store.model import Cell, Iteration, Run, StackRow, Study

PYPERF_METRICS = ("rps", "p50", "p99", "mean")
_LATENCY_ATTR = {"p50": "latency_p50_us", "p99": "latency_p99_us", "mean": "latency_mean_us"}


class InteropError(ValueError):
    """The runs cannot be written in the asked format (e.g. two runs in one pyperf file)."""


def cell_name(stack: StackRow, cell: Cell) -> str:
    """The name of a cell in exports: ``<stack key> <workload>@<load point>``."""
    return f"{stack.key} {cell.workload}@{cell.load_point}"


def _iteration_value(it: Iteration, metric: str) -> float | None:
    if metric == "rps":
        return 1.0 / it.rps if it.rps > 0 else None
    us = getattr(it, _LATENCY_ATTR[metric])
    return us / 1e6 if us and us > 0 else None


def _date(iso: str) -> str:
    return iso[:19].replace("T", " ")


def _by_replicate(study: Study, cell: Cell) -> dict[int, list[Iteration]]:
    assert cell.id is not None
    groups: dict[int, list[Iteration]] = {}
    for it in study.iterations_of(cell.id, kind=None):
        if not it.interrupted:
            groups.setdefault(it.replicate, []).append(it)
    return groups


def _pyperf_runs(study: Study, cell: Cell, metric: str) -> list[dict[str, Any]]:
    runs = []
    for rep, its in sorted(_by_replicate(study, cell).items()):
        values = [_iteration_value(i, metric) for i in its if i.kind == "measured"]
        warmups = [_iteration_value(i, metric) for i in its if i.kind == "warmup"]
        measured = [v for v in values if v is not None]
        if not measured:
            continue
        run: dict[str, Any] = {
            "metadata": {"date": _date(its[0].started_at), "replicate": rep},
            "values": measured,
        }
        warm = [[1, v] for v in warmups if v is not None]
        if warm:
            run["warmups"] = warm
        runs.append(run)
    return runs


def pyperf_document(study: Study, metric: str = "rps") -> dict[str, Any]:
    """One run of ``study`` as a pyperf JSON document (format version 1.0)."""
    if metric not in PYPERF_METRICS:
        raise InteropError(f"unknown metric {metric!r}; choose one of {', '.join(PYPERF_METRICS)}")
    if len(study.runs) != 1:
        raise InteropError(
            f"pyperf holds one run per file, got {len(study.runs)}: export them one at a time"
        )
    run: Run = study.runs[0]
    benchmarks = []
    for cell in sorted(study.cells, key=lambda c: c.ordinal):
        stack = study.stack(cell.stack_id)
        runs = _pyperf_runs(study, cell, metric)
        if not runs:
            continue
        what = "seconds per request (1 / requests/s)" if metric == "rps" else f"{metric} latency"
        meta: dict[str, Any] = {
            "name": cell_name(stack, cell),
            "unit": "second",
            "loops": 1,
            "description": f"pywebbench {what}, one pyperf run per replicate",
            "python_implementation": stack.interpreter_impl,
            "python_version": stack.interpreter_version,
            "pywebbench_stack": stack.key,
            "pywebbench_workload": cell.workload,
            "pywebbench_load_point": cell.load_point,
            "pywebbench_metric": metric,
        }
        if stack.packages:
            meta["pywebbench_packages"] = ", ".join(
                f"{k}=={v}" for k, v in sorted(stack.packages.items())
            )
        if cell.flags.get("interfered"):  # other processes disturbed it (docs/interference.md)
            meta["pywebbench_interfered"] = "yes"
        if cell.flags.get("remeasured"):
            meta["pywebbench_remeasured"] = int(cell.flags["remeasured"])
        benchmarks.append({"metadata": meta, "runs": runs})
    return {
        "version": "1.0",
        "metadata": {
            "hostname": run.hostname,
            "cpu_count": run.cpu_count,
            "cpu_model_name": run.cpu_model,
            "platform": f"{run.os}, Linux {run.kernel}",
            "pywebbench_run": run.id,
            "pywebbench_version": run.pywebbench_version,
        },
        "benchmarks": benchmarks,
    }


def export_pyperf(study: Study, metric: str = "rps") -> str:
    """:func:`pyperf_document` as JSON text."""
    return json.dumps(pyperf_document(study, metric), indent=1) + "\n"


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
        f"#[StartTime: {start:.3f} (seconds since epoch), {_date(run.created_at)} UTC]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    intervals = 0
    for _, its in sorted(_by_replicate(study, cell).items()):
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


def write_files(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write ``files`` into ``directory`` (created); returns the paths in order."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        out.append(path)
    return out
