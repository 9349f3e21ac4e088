"""Figures per endpoint of a traffic mix (docs/mix.md) in the report: for every point loaded
with a mix, a table (endpoint, weight, share of the requests sent, req/s, errors, p50, p99,
p99.9) in the Markdown summary and the HTML report, and in the HTML a latency chart of each
endpoint (latency by percentile, one line per endpoint).

A point's endpoints are its cells' measured iterations merged
(:func:`pywebbench.store.endpoints.cell_endpoints`): the histograms merged, the requests
summed; an endpoint's req/s is its requests over the iterations' measured seconds.
"""

from __future__ import annotations

from typing import Any

from pywebbench import formatting as fmt
from pywebbench.report.figures import (
    SPECTRUM_QUANTILES,
    Figure,
    sig_round,
    spectrum_layout,
    spectrum_x,
    text,
)
from pywebbench.report.view import MixPoint, ReportView
from pywebbench.store.endpoints import cell_endpoints
from pywebbench.store.model import Iteration, Study

#: The columns of a point's table, in order.
COLUMNS = ("endpoint", "weight", "share sent", "req/s", "errors", "p50 ms", "p99 ms", "p99.9 ms")
NOTE = (
    "Each endpoint of the mix over the point's measured iterations: its weight in the mix and "
    "its share of the requests sent, its requests per second of measured load, its errors "
    "(a status its entries do not expect counts), and its latency percentiles from its merged "
    "HdrHistogram (docs/mix.md)."
)


def mix_points(study: Study) -> list[MixPoint]:
    """Every point of ``study`` whose measured iterations hold a mix's endpoints, in study
    order (cells of several runs with the same point pooled, as the report pools them)."""
    key_of = {s.id: s.key for s in study.stacks if s.id is not None}
    pools: dict[tuple[str, str, str], list[Iteration]] = {}
    of_cell: dict[int | None, list[Iteration]] = {}
    for it in study.iterations:
        of_cell.setdefault(it.cell_id, []).append(it)
    for cell in sorted(study.cells, key=lambda c: (c.run_id, c.ordinal)):
        where = (key_of[cell.stack_id], cell.workload, cell.load_point)
        pools.setdefault(where, []).extend(of_cell.get(cell.id, []))
    out = []
    for where, its in pools.items():
        endpoints = cell_endpoints(its)
        if endpoints:
            out.append(MixPoint(*where, endpoints=endpoints))
    return out


def _ms(us: float) -> float:
    return us / 1000.0


def table_rows(view: ReportView) -> list[dict[str, Any]]:
    """One entry per point of ``view.mixes``: its title (stack, workload, load point) and
    its rows, each cell formatted as the report's other tables format theirs."""

    out = []
    for p in view.mixes:
        rows = [
            {
                "endpoint": e.name,
                "weight": fmt.percent(e.weight_share),
                "share sent": fmt.percent(e.share_sent),
                "req/s": fmt.rate(e.rps),
                "errors": f"{e.errors:,}",
                "p50 ms": fmt.latency_ms(_ms(e.p50_us)),
                "p99 ms": fmt.latency_ms(_ms(e.p99_us)),
                "p99.9 ms": fmt.latency_ms(_ms(e.p999_us)),
            }
            for e in p.endpoints
        ]
        stack = view.stacks.get(p.stack_key)
        name = stack.label if stack is not None else p.stack_key
        title = f"{name} — {p.workload} @ {p.load_point}"
        out.append({"title": title, "rows": rows})
    return out


def markdown_lines(view: ReportView) -> list[str]:
    """The per-endpoint tables as Markdown (the charts are in the HTML report)."""
    from pywebbench.mdtext import md_text

    if not view.mixes:
        return []
    out = ["## Endpoints of the mix", "", md_text(NOTE), ""]
    for t in table_rows(view):
        out += [f"### {md_text(t['title'])}", ""]
        out.append("| " + " | ".join(COLUMNS) + " |")
        out.append("|---|" + "---:|" * (len(COLUMNS) - 1))
        for r in t["rows"]:
            out.append(
                "| " + " | ".join([md_text(r["endpoint"]), *(r[c] for c in COLUMNS[1:])]) + " |"
            )
        out.append("")
    return out


def latency_figure(point: MixPoint, title: str) -> Figure:
    """Latency by percentile (50% to 99.99%, log-scaled tail) of each endpoint of
    ``point``: one line per endpoint, from its merged histogram."""
    from pywebbench.load.histogram import Histogram

    data = []
    for e in point.endpoints:
        values = Histogram(e.hist).quantiles(SPECTRUM_QUANTILES)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": text(e.name),
                "x": [sig_round(spectrum_x(q), 6) for q in SPECTRUM_QUANTILES],
                "y": [sig_round(_ms(v)) for v in values],
                "customdata": [f"{q * 100:.6g}%" for q in SPECTRUM_QUANTILES],
                "hovertemplate": f"<b>{text(e.name)}</b><br>%{{customdata}}: %{{y:.3s}} ms"
                "<extra></extra>",
            }
        )
    title_font = {"text": text(title), "font": {"size": 13}}
    layout = spectrum_layout(len(data), title=title_font)
    layout["margin"]["t"] = 40
    return {"data": data, "layout": layout}
