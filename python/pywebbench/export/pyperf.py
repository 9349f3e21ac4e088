"""``pywebbench export --format pyperf``: pyperf's JSON, read by
``python -m pyperf compare_to a.json b.json`` and ``python -m pyperf stats``.

One benchmark per cell, one pyperf *run* per replicate (a fresh server process), its values
the measured iterations and its warm-ups the warm-up iterations. pyperf reads every value as
"lower is faster", so throughput is written as its inverse, the seconds per request
(1 / requests/s): pyperf's "faster" then means more requests/s. Latency metrics are the
iterations' p50/p99/mean in seconds. Format reference: pyperf's docs, "JSON format".
"""

from __future__ import annotations

import json
from typing import Any

from pywebbench.export.base import (
    ExportError,
    ExportOptions,
    cell_name,
    iterations_by_replicate,
    run_date,
)
from pywebbench.store.db import Store
from pywebbench.store.model import Cell, Iteration, Run, Study

PYPERF_METRICS = ("rps", "p50", "p99", "mean")
_LATENCY_ATTR = {"p50": "latency_p50_us", "p99": "latency_p99_us", "mean": "latency_mean_us"}


def _iteration_value(it: Iteration, metric: str) -> float | None:
    if metric == "rps":
        return 1.0 / it.rps if it.rps > 0 else None
    us = getattr(it, _LATENCY_ATTR[metric])
    return us / 1e6 if us and us > 0 else None


def _pyperf_runs(study: Study, cell: Cell, metric: str) -> list[dict[str, Any]]:
    runs = []
    for rep, its in sorted(iterations_by_replicate(study, cell).items()):
        values = [_iteration_value(i, metric) for i in its if i.kind == "measured"]
        warmups = [_iteration_value(i, metric) for i in its if i.kind == "warmup"]
        measured = [v for v in values if v is not None]
        if not measured:
            continue
        run: dict[str, Any] = {
            "metadata": {"date": run_date(its[0].started_at), "replicate": rep},
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
        raise ExportError(f"unknown metric {metric!r}; choose one of {', '.join(PYPERF_METRICS)}")
    if len(study.runs) != 1:
        raise ExportError(
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


def write(store: Store, options: ExportOptions) -> str:
    """The exporter of the registry (:data:`pywebbench.export.EXPORTERS`)."""
    return export_pyperf(store.load_study(options.runs), options.metric)
