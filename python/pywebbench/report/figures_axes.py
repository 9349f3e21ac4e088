"""Figures of the study axes (:mod:`pywebbench.report.axes`): syscalls per request and
requests/s and p99 against the worker recycling setting. Plotly specifications, as in
:mod:`pywebbench.report.figures`."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pywebbench.report.axes import max_requests_label
from pywebbench.report.figures import (
    PALETTE,
    Colours,
    Figure,
    axis_layout,
    base_layout,
    ci_bars,
    legend_below,
    sig_round,
    text,
)
from pywebbench.report.view import RecyclingPoint, ReportView

#: Syscalls drawn: the most frequent over every traced point.
FIGURE_SYSCALLS = 12


def syscalls_figure(view: ReportView) -> Figure | None:
    """Syscalls per request by name: one bar per traced point, the most frequent names."""
    points = [sp for sp in view.axes.syscalls if sp.by_name]
    if not points:
        return None
    weight: dict[str, float] = defaultdict(float)
    for sp in points:
        for name, n in sp.by_name:
            weight[name] += n
    names = sorted(weight, key=lambda k: (-weight[k], k))[:FIGURE_SYSCALLS]
    data = []
    for i, sp in enumerate(points):
        per = dict(sp.by_name)
        stack = view.stacks.get(sp.stack_key)
        label = f"{stack.label if stack else sp.stack_key} — {sp.workload} @ {sp.load_point}"
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": text(label),
                "y": list(reversed(names)),
                "x": [sig_round(per.get(n, 0.0)) for n in reversed(names)],
                "marker": {"color": PALETTE[i % len(PALETTE)]},
                "hovertemplate": "%{y}: %{x:.2f} per request<extra>" + text(label) + "</extra>",
            }
        )
    return {
        "data": data,
        "layout": base_layout(
            height=max(280, 60 + 24 * len(names) + 14 * len(points)),
            barmode="group",
            showlegend=True,
            legend=legend_below(),
            xaxis=axis_layout("syscalls per request (traced window)", rangemode="tozero"),
            yaxis=axis_layout(""),
        ),
    }


def recycling_figure(view: ReportView) -> Figure | None:
    """Requests/s (top, 95% CI) and p99 (bottom) against requests per worker before it is
    recycled: one line per stack x workload x load point of the sweep."""
    sweeps: dict[tuple[str, str, str], list[RecyclingPoint]] = defaultdict(list)
    for r in view.axes.recycling:
        if r.point.rps is not None:
            sweeps[(r.base_key, r.workload, r.load_point)].append(r)
    if not sweeps:
        return None
    colours = Colours([" ".join(k) for k in sweeps])
    # One category per setting, "never" first, then fewer and fewer requests per worker.
    settings = sorted(
        {r.max_requests for rs in sweeps.values() for r in rs}, key=lambda n: -(n or 1e18)
    )
    categories = [max_requests_label(n) for n in settings]
    data: list[dict[str, Any]] = []
    for key, rs in sweeps.items():
        base = view.stacks.get(key[0])
        label = text(f"{base.label if base else key[0]} — {key[1]} @ {key[2]}")
        colour = colours.colour(" ".join(key))
        x = [max_requests_label(r.max_requests) for r in rs]
        estimates = [r.point.rps for r in rs]
        style: dict[str, Any] = {"color": colour, "width": 2}
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": label,
                "legendgroup": label,
                "x": x,
                "y": [sig_round(e.median) if e else None for e in estimates],
                "error_y": ci_bars([e for e in estimates if e], color=colour, thickness=1.2),
                "line": style,
                "hovertemplate": "recycle after %{x}: %{y:,.0f} req/s<extra>" + label + "</extra>",
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": label,
                "legendgroup": label,
                "showlegend": False,
                "x": x,
                "y": [sig_round(r.point.p99_ms) for r in rs],
                "yaxis": "y2",
                "line": {**style, "dash": "dot"},
                "hovertemplate": "recycle after %{x}: p99 %{y:.3g} ms<extra>" + label + "</extra>",
            }
        )
    return {
        "data": data,
        "layout": panels_layout(
            "requests per worker before it is recycled",
            categories,
            [("requests/s", (0.55, 1.0)), ("p99 ms", (0.0, 0.42))],
            height=460,
        ),
    }


def panels_layout(
    x_title: str,
    categories: list[str],
    panels: list[tuple[str, tuple[float, float]]],
    height: int,
) -> dict[str, Any]:
    """Panels stacked over one category x axis (``categories`` in that order), each
    ``(title, (bottom, top))`` from the top down, the first one requests/s (SI ticks); the
    legend below. Traces go to ``y``, ``y2``... in the same order."""
    axes = {
        ("yaxis" if n == 0 else f"yaxis{n + 1}"): axis_layout(
            title,
            domain=list(domain),
            rangemode="tozero",
            **({"tickformat": "~s"} if n == 0 else {}),
        )
        for n, (title, domain) in enumerate(panels)
    }
    bottom = "y" if len(panels) == 1 else f"y{len(panels)}"
    return base_layout(
        height=height,
        showlegend=True,
        legend=legend_below(),
        xaxis=axis_layout(
            x_title, type="category", categoryorder="array", categoryarray=categories, anchor=bottom
        ),
        **axes,
    )
