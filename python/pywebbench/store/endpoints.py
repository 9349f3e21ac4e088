"""Figures per endpoint of a traffic mix (docs/mix.md), read from what the store holds.

A measured iteration of a cell loaded with a mix keeps, in its ``result_json``, each
endpoint's requests, errors, statuses and latency histogram exactly as the engine gave them:
the run's ``endpoints`` (the per-cell path) or its slice's (``ab_slice.endpoints``, an
interleaved group). No table of its own: :func:`iteration_endpoints` reads them from there,
:func:`cell_endpoints` merges a cell's measured iterations (the histograms merged, never
their percentiles averaged), and :func:`endpoint_rows` flattens them for the exports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pywebbench.store.model import Iteration, Study

__all__ = ["EndpointFigures", "cell_endpoints", "endpoint_rows", "iteration_endpoints"]


def iteration_endpoints(it: Iteration) -> list[dict[str, Any]]:
    """The engine's figures of each endpoint in ``it`` (``EndpointStats`` documents: name,
    weight, weight_share, requests, errors, error_classes, timeouts, status_counts, latency
    with its encoded ``hist``); empty for an iteration without a mix or an unreadable
    document."""
    try:
        doc = it.result
    except ValueError:
        return []
    part = doc.get("ab_slice", doc) if isinstance(doc, dict) else {}
    endpoints = part.get("endpoints") if isinstance(part, dict) else None
    return [e for e in endpoints or [] if isinstance(e, dict) and "name" in e]


@dataclass(frozen=True)
class EndpointFigures:
    """One endpoint over a cell's measured iterations."""

    name: str
    #: The endpoint's share of the mix's weight, and of the requests sent (0..1).
    weight_share: float
    share_sent: float
    requests: int
    errors: int
    #: Its requests per second of measured load (its requests over the iterations' seconds).
    rps: float
    p50_us: float
    p99_us: float
    p999_us: float
    #: The merged latency histogram (encoded as the engine encodes one), for charts.
    hist: str


def _measured(iterations: Sequence[Iteration]) -> list[Iteration]:
    return [i for i in iterations if i.kind == "measured" and not i.interrupted]


def cell_endpoints(iterations: Sequence[Iteration]) -> list[EndpointFigures]:
    """Each endpoint of the mix over the measured, uninterrupted ``iterations`` of one cell,
    in the mix's order; empty without a mix."""
    from pywebbench.load.histogram import Histogram

    measured = _measured(iterations)
    seconds = sum(i.duration_s for i in measured)
    parts: dict[str, list[dict[str, Any]]] = {}
    for it in measured:
        for e in iteration_endpoints(it):
            parts.setdefault(str(e["name"]), []).append(e)
    total = sum(int(e["requests"]) for es in parts.values() for e in es)
    out = []
    for name, es in parts.items():
        requests = sum(int(e["requests"]) for e in es)
        hist = Histogram.merge_all(str(e["latency"]["hist"]) for e in es)
        p50, p99, p999 = hist.quantiles([0.5, 0.99, 0.999])
        out.append(
            EndpointFigures(
                name=name,
                weight_share=float(es[0]["weight_share"]),
                share_sent=requests / total if total else 0.0,
                requests=requests,
                errors=sum(int(e["errors"]) for e in es),
                rps=requests / seconds if seconds > 0 else 0.0,
                p50_us=p50,
                p99_us=p99,
                p999_us=p999,
                hist=hist.encoded,
            )
        )
    return out


#: The columns of :func:`endpoint_rows` (the ``endpoints`` CSV table).
ENDPOINT_COLUMNS = (
    "run_id",
    "cell_id",
    "stack",
    "workload",
    "load_point",
    "iteration_id",
    "replicate",
    "idx",
    "endpoint",
    "weight",
    "weight_share",
    "requests",
    "errors",
    "timeouts",
    "status_counts",
    "latency_p50_us",
    "latency_p99_us",
    "latency_p999_us",
    "latency_hist",
)


def endpoint_rows(study: Study) -> list[dict[str, Any]]:
    """One row per endpoint per measured iteration of every cell with a mix: its counts,
    percentiles and histogram as the engine encoded it (:data:`ENDPOINT_COLUMNS`)."""
    cells = {c.id: c for c in study.cells}
    rows = []
    for it in study.iterations:
        if it.kind != "measured":
            continue
        cell = cells.get(it.cell_id)
        if cell is None:
            continue
        for e in iteration_endpoints(it):
            summary = e["latency"].get("summary", {})
            rows.append(
                {
                    "run_id": cell.run_id,
                    "cell_id": cell.id,
                    "stack": study.stack(cell.stack_id).key,
                    "workload": cell.workload,
                    "load_point": cell.load_point,
                    "iteration_id": it.id,
                    "replicate": it.replicate,
                    "idx": it.idx,
                    "endpoint": e["name"],
                    "weight": e["weight"],
                    "weight_share": e["weight_share"],
                    "requests": e["requests"],
                    "errors": e["errors"],
                    "timeouts": e.get("timeouts", 0),
                    "status_counts": ";".join(
                        f"{k}={v}" for k, v in sorted(e.get("status_counts", {}).items())
                    ),
                    "latency_p50_us": summary.get("p50"),
                    "latency_p99_us": summary.get("p99"),
                    "latency_p999_us": summary.get("p999"),
                    "latency_hist": e["latency"]["hist"],
                }
            )
    return rows
