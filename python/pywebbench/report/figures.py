"""Plotly figure specifications (plain dicts) built from the report's view model.

Each figure is ``{"data": [...], "layout": {...}}`` as ``Plotly.newPlot`` takes it. Plotly
draws trace names, tick labels and hover text as SVG and interprets a few HTML tags and
entities in them, so every string that comes from the study goes through :func:`text`, which
escapes ``&``, ``<`` and ``>``: Plotly shows the characters, never markup. Traces carry the
raw stack labels in ``meta`` so the page's filter box can hide them.
"""

from __future__ import annotations

import math
from typing import Any

from pywebbench import formatting as fmt
from pywebbench.report.tables import INTERLEAVED, SEQUENTIAL, designs
from pywebbench.report.view import (
    CellSeriesView,
    Ranking,
    ReportView,
    StackView,
    WorkloadView,
)

Figure = dict[str, Any]

# A qualitative palette that stays readable on white (Tableau 10, then its lighter tones).
PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#2f4b7c",
    "#d45087",
]
DASHES = ["solid", "dash", "dot", "dashdot"]
# Interpreter families: CPython in blues, PyPy in oranges, anything else grey-green.
FAMILY_COLOURS = {"cpython": "#4e79a7", "pypy": "#f28e2b"}
FONT = "Inter, ui-sans-serif, system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
# Quantiles of the latency spectra: 50% .. 99.99%, denser in the tail.
SPECTRUM_QUANTILES = [
    0.5,
    0.6,
    0.7,
    0.75,
    0.8,
    0.85,
    0.9,
    0.925,
    0.95,
    0.96,
    0.97,
    0.98,
    0.99,
    0.9925,
    0.995,
    0.9975,
    0.999,
    0.99925,
    0.9995,
    0.99975,
    0.9999,
]


def text(s: object) -> str:
    """A study string made safe for Plotly's SVG text (shown literally, never as markup)."""
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def sig_round(x: float | None, digits: int = 4) -> float | None:
    """Round to ``digits`` significant digits to keep the embedded JSON small."""
    if x is None or not math.isfinite(x):
        return None
    if x == 0:
        return 0.0
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def base_layout(**extra: Any) -> dict[str, Any]:
    """Layout defaults shared by every figure: typography, margins, transparent paper."""
    layout: dict[str, Any] = {
        "font": {"family": FONT, "size": 12, "color": "#1f2933"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",
        "margin": {"l": 64, "r": 16, "t": 28, "b": 48},
        "hoverlabel": {"font": {"family": FONT}},
        "legend": {"orientation": "h", "y": -0.2, "x": 0, "font": {"size": 11}},
        "colorway": PALETTE,
    }
    layout.update(extra)
    return layout


def axis_layout(title: str, **extra: Any) -> dict[str, Any]:
    axis: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 11, "color": "#52606d"}},
        "gridcolor": "#e4e7eb",
        "zerolinecolor": "#cbd2d9",
        "linecolor": "#cbd2d9",
        "ticks": "outside",
        "tickcolor": "#cbd2d9",
        "automargin": True,
    }
    axis.update(extra)
    return axis


def ci_bars(estimates: list[Any], **style: Any) -> dict[str, Any]:
    """Plotly error bars from each estimate's median to its CI bounds."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [sig_round(e.high - e.median) for e in estimates],
        "arrayminus": [sig_round(e.median - e.low) for e in estimates],
        **style,
    }


def legend_below() -> dict[str, Any]:
    """A legend under the plot, one entry per line (long stack labels stay readable)."""
    return {
        "orientation": "h",
        "x": 0,
        "y": -0.18,
        "yanchor": "top",
        "font": {"size": 11},
        "entrywidthmode": "fraction",
        "entrywidth": 1.0,
    }


class Colours:
    """Stable colours: the same stack (or line key) has the same colour in every figure."""

    def __init__(self, keys: list[str]) -> None:
        self._index = {k: i for i, k in enumerate(dict.fromkeys(keys))}

    def colour(self, key: str) -> str:
        i = self._index.setdefault(key, len(self._index))
        return PALETTE[i % len(PALETTE)]

    def dash(self, key: str) -> str:
        i = self._index.setdefault(key, len(self._index))
        return DASHES[(i // len(PALETTE)) % len(DASHES)]


def family_colour(stack: StackView) -> str:
    impl = "pypy" if "pypy" in stack.interpreter.lower() else "cpython"
    if "cpython" not in stack.interpreter.lower() and impl == "cpython":
        return "#59a14f"
    return FAMILY_COLOURS[impl]


def rps_axis_title(ranking: Ranking) -> str:
    """The ranking chart's axis: requests/s, named by the method that made them, as the
    footnote under the table names it (:func:`pywebbench.report.tables.method_note`)."""
    made = designs(ranking) or {SEQUENTIAL}
    if made == {INTERLEAVED}:
        return "requests/s (group fit at the average round, 95% CI)"
    if INTERLEAVED in made:
        return "requests/s (group fit, or median of replicates; 95% CI)"
    return "requests/s (median of replicates, 95% CI)"


def ranking_figure(view: ReportView, ranking: Ranking) -> Figure:
    """Horizontal bars of requests/s with 95% CI whiskers, fastest on top: a group's fit
    for an interleaved group's stacks, else the median of the replicates.

    One trace per interpreter so the legend reads "CPython vs PyPy"; generator-bound points
    are hatched.
    """
    by_interp: dict[str, list[Any]] = {}
    for row in ranking.ranked:
        by_interp.setdefault(row.stack.interpreter, []).append(row)
    order = [text(r.stack.label) for r in ranking.ranked]
    data = []
    for interp, rows in by_interp.items():
        est = [r.point.rps for r in rows]
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": text(interp),
                "y": [text(r.stack.label) for r in rows],
                "x": [sig_round(e.median, 6) for e in est],
                "error_x": ci_bars(est, color="#3e4c59", thickness=1.2, width=3),
                "marker": {
                    "color": family_colour(rows[0].stack),
                    "pattern": {
                        "shape": ["/" if r.point.generator_bound else "" for r in rows],
                        "fillmode": "overlay",
                        "fgcolor": "rgba(255,255,255,0.55)",
                        "size": 8,
                    },
                },
                "text": [fmt.rate(e.median) for e in est],
                "textposition": "inside",
                "insidetextanchor": "start",
                "textfont": {"color": "#ffffff"},
                "customdata": [
                    [
                        fmt.rate(r.point.rps.low),
                        fmt.rate(r.point.rps.high),
                        fmt.latency_ms(r.point.p99_ms),
                        text(r.point.load_point),
                        " (generator-bound)" if r.point.generator_bound else "",
                    ]
                    for r in rows
                ],
                "hovertemplate": "<b>%{y}</b><br>%{text} req/s at %{customdata[3]}"
                "%{customdata[4]}<br>95% CI %{customdata[0]}–%{customdata[1]}"
                "<br>p99 %{customdata[2]} ms<extra></extra>",
                "meta": {"stacks": [r.stack.label for r in rows]},
            }
        )
    height = max(160, 40 + 26 * len(order))
    return {
        "data": data,
        "layout": base_layout(
            height=height,
            barmode="overlay",
            bargap=0.25,
            showlegend=len(by_interp) > 1,
            legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
            margin={"l": 8, "r": 16, "t": 28 if len(by_interp) > 1 else 8, "b": 40},
            xaxis=axis_layout(rps_axis_title(ranking), rangemode="tozero", tickformat=",d"),
            yaxis=axis_layout(
                "",
                categoryorder="array",
                categoryarray=order,
                autorange="reversed",
                ticks="",
                gridcolor="rgba(0,0,0,0)",
            ),
        ),
    }


def _facet_key(stack: StackView) -> str:
    suffix = (
        "" if (stack.workers, stack.threads) == (1, 1) else f" ({stack.workers}w×{stack.threads}t)"
    )
    return stack.server + suffix


def _line_key(stack: StackView) -> str:
    return f"{stack.interpreter} · {stack.framework}"


def facet_grid(count: int) -> tuple[int, int, list[tuple[float, float, float, float]]]:
    """Columns, rows and each panel's (x0, x1, y0, y1) paper domain for ``count`` panels,
    at most three to a row."""
    ncols = max(1, min(3, count))
    nrows = max(1, math.ceil(count / ncols))
    gap_x, gap_y = 0.06, 0.12 / max(1, nrows - 1) if nrows > 1 else 0.0
    width = (1 - gap_x * (ncols - 1)) / ncols
    height = (1 - gap_y * (nrows - 1)) / nrows
    cells = []
    for i in range(count):
        row, col = divmod(i, ncols)
        x0 = col * (width + gap_x)
        y1 = 1 - row * (height + gap_y)
        cells.append((x0, x0 + width, y1 - height, y1))
    return ncols, nrows, cells


def panel_rps_axis(suffix: str, domain: list[float], *, first: bool) -> dict[str, Any]:
    """The requests/s axis of one panel of a faceted figure (titled in the first column)."""
    return axis_layout(
        "requests/s" if first else "",
        domain=domain,
        anchor=f"x{suffix}",
        rangemode="tozero",
        tickformat="~s",
    )


def panel_title(title: str, x: float, y: float) -> dict[str, Any]:
    """A panel's bold title (an annotation at paper coordinates, left-aligned at ``x``)."""
    return {
        "text": f"<b>{text(title)}</b>",
        "showarrow": False,
        "xref": "paper",
        "yref": "paper",
        "x": x,
        "xanchor": "left",
        "y": y,
        "yanchor": "bottom",
        "font": {"size": 12},
    }


def sweep_figure(view: ReportView, workload: WorkloadView, colours: Colours) -> Figure | None:
    """Requests/s against load, one facet per server, one line per interpreter · framework."""
    points = [p for p in workload.points if p.ok]
    if not points:
        return None
    facets = sorted({_facet_key(view.stacks[p.stack_key]) for p in points})
    ncols, nrows, cells = facet_grid(len(facets))
    closed = all(p.rate is None for p in points)
    ticks = sorted({p.load_sort for p in points})
    layout = base_layout(
        height=100 + 260 * nrows,
        margin={"l": 64, "r": 16, "t": 56, "b": 40},
        legend={"orientation": "h", "x": 0, "y": 1.03, "yanchor": "bottom", "font": {"size": 11}},
    )
    annotations = []
    data = []
    shown_legend: set[str] = set()
    for i, facet in enumerate(facets):
        row, col = divmod(i, ncols)
        suffix = "" if i == 0 else str(i + 1)
        x0, x1, y0, y1 = cells[i]
        layout[f"xaxis{suffix}"] = axis_layout(
            ("connections" if closed else "load (connections or req/s)")
            if row == nrows - 1
            else "",
            type="log",
            domain=[x0, x1],
            anchor=f"y{suffix}",
            tickvals=ticks,
            ticktext=[f"{v:g}" for v in ticks],
        )
        layout[f"yaxis{suffix}"] = panel_rps_axis(suffix, [y0, y1 - 0.06], first=col == 0)
        annotations.append(panel_title(facet, x0, y1 - 0.05))
        lines: dict[str, list[Any]] = {}
        for p in points:
            st = view.stacks[p.stack_key]
            if _facet_key(st) == facet:
                lines.setdefault(_line_key(st), []).append((p, st))
        for key in sorted(lines):
            pts = sorted(lines[key], key=lambda ps: ps[0].load_sort)
            est = [p.rps for p, _ in pts]
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": text(key),
                    "legendgroup": text(key),
                    "showlegend": key not in shown_legend,
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                    "x": [p.load_sort for p, _ in pts],
                    "y": [sig_round(e.median, 6) for e in est],
                    "error_y": ci_bars(est, thickness=1, width=2),
                    "line": {"color": colours.colour(key), "dash": colours.dash(key), "width": 2},
                    "marker": {
                        "size": [11 if p.generator_bound else 6 for p, _ in pts],
                        "symbol": [
                            "x-thin-open" if p.generator_bound else "circle" for p, _ in pts
                        ],
                        "line": {"width": 2, "color": colours.colour(key)},
                    },
                    "customdata": [
                        [
                            text(p.load_point),
                            fmt.rate(p.rps.median),
                            fmt.latency_ms(p.p99_ms),
                            " · generator-bound" if p.generator_bound else "",
                            text(st.label),
                        ]
                        for p, st in pts
                    ],
                    "hovertemplate": "<b>%{customdata[4]}</b><br>%{customdata[0]}: "
                    "%{customdata[1]} req/s, p99 %{customdata[2]} ms%{customdata[3]}"
                    "<extra></extra>",
                    "meta": {"stack": pts[0][1].label},
                }
            )
            shown_legend.add(key)
    layout["annotations"] = annotations
    return {"data": data, "layout": layout}


def spectrum_x(q: float) -> float:
    """Where quantile ``q`` sits on a latency spectrum's (log) axis: 1/(1-q), 50% at 2 and
    99.99% at 10,000."""
    return 1.0 / (1.0 - q)


SPECTRUM_TICKS = {
    "vals": [2, 10, 100, 1000, 10000],
    "text": ["50%", "90%", "99%", "99.9%", "99.99%"],
}


def spectrum_figure(view: ReportView, ranking: Ranking, colours: Colours) -> Figure | None:
    """Latency by percentile (50% to 99.99%, log-scaled tail) for each stack's ranked point."""
    data = []
    for row in ranking.ranked:
        p = row.point
        if not p.spectrum:
            continue
        label = row.stack.label
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": text(label),
                "x": [sig_round(spectrum_x(q), 6) for q, _ in p.spectrum],
                "y": [sig_round(ms) for _, ms in p.spectrum],
                "customdata": [f"{q * 100:.6g}%" for q, _ in p.spectrum],
                "line": {"color": colours.colour(label), "dash": colours.dash(label), "width": 2},
                "hovertemplate": f"<b>{text(label)}</b><br>%{{customdata}}: %{{y:.3s}} ms"
                f" at {text(p.load_point)}<extra></extra>",
                "meta": {"stack": label},
            }
        )
    if not data:
        return None
    return {"data": data, "layout": spectrum_layout(len(data))}


def spectrum_layout(lines: int, **extra: Any) -> dict[str, Any]:
    """The layout of a latency-by-percentile chart of ``lines`` lines (x from 50% to
    99.99%, log-scaled tail; y in ms, log); ``extra`` as :func:`base_layout`'s."""
    return base_layout(
        height=360 + 18 * lines,
        legend=legend_below(),
        margin={"l": 64, "r": 36, "t": 16, "b": 40},
        xaxis=axis_layout(
            "percentile",
            type="log",
            tickvals=SPECTRUM_TICKS["vals"],
            ticktext=SPECTRUM_TICKS["text"],
            range=[math.log10(2) - 0.02, 4.02],
        ),
        yaxis=axis_layout("latency ms (log)", type="log"),
        **extra,
    )


def cell_figure(view: ReportView, cell: CellSeriesView) -> Figure:
    """Per-second requests/s (top) and the server tree's RSS (bottom) over one replicate."""
    rps_x: list[float | None] = []
    rps_y: list[float | None] = []
    mem_x: list[float | None] = []
    mem_y: list[float | None] = []
    cpu_y: list[float | None] = []
    replaced_x: list[float | None] = []
    replaced_y: list[float | None] = []
    shapes = []
    for it in cell.iterations:
        replaced_x += [sig_round(it.t0_s + it.mem_t[i], 5) for i in it.replaced_at]
        replaced_y += [sig_round(it.rss_mib[i], 5) for i in it.replaced_at]
        rps_x += [sig_round(it.t0_s + t, 5) for t in it.rps_t] + [None]
        rps_y += [sig_round(v, 5) for v in it.rps] + [None]
        mem_x += [sig_round(it.t0_s + t, 5) for t in it.mem_t] + [None]
        mem_y += [sig_round(v, 5) for v in it.rss_mib] + [None]
        cpu_y += [sig_round(v, 4) for v in it.cpu_pct] + [None]
        if it.kind == "warmup":
            shapes.append(
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "paper",
                    "x0": it.t0_s,
                    "x1": it.t0_s + it.duration_s,
                    "y0": 0,
                    "y1": 1,
                    "fillcolor": "#f5f7fa",
                    "line": {"width": 0},
                    "layer": "below",
                }
            )
    label = view.stacks[cell.stack_key].label
    data = [
        {
            "type": "scatter",
            "name": "requests/s",
            "x": rps_x,
            "y": rps_y,
            "mode": "lines+markers",
            "marker": {"size": 5},
            "line": {"color": PALETTE[0], "width": 2},
            "hovertemplate": "t=%{x:.1f} s: %{y:,.0f} req/s<extra></extra>",
            "meta": {"stack": label},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "RSS MiB",
            "x": mem_x,
            "y": mem_y,
            "yaxis": "y2",
            "line": {"color": PALETTE[2], "width": 2},
            "hovertemplate": "t=%{x:.1f} s: %{y:.1f} MiB<extra></extra>",
            "meta": {"stack": label},
        },
    ]
    if replaced_x:  # worker recycling: where the RSS saw-tooth drops
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "worker replaced",
                "x": replaced_x,
                "y": replaced_y,
                "yaxis": "y2",
                "marker": {"symbol": "triangle-down", "size": 8, "color": PALETTE[3]},
                "hovertemplate": "t=%{x:.1f} s: a new worker since the last sample<extra></extra>",
                "meta": {"stack": label},
            }
        )
    if any(v is not None for v in cpu_y):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "server CPU %",
                "x": mem_x,
                "y": cpu_y,
                "yaxis": "y3",
                "line": {"color": PALETTE[4], "width": 1.5},
                "hovertemplate": "t=%{x:.1f} s: %{y:.0f}% CPU<extra></extra>",
                "meta": {"stack": label},
            }
        )
    layout = base_layout(
        height=420,
        shapes=shapes,
        showlegend=True,
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        margin={"l": 64, "r": 16, "t": 24, "b": 44},
        xaxis=axis_layout("seconds since the server started taking load", anchor="y2"),
        yaxis=axis_layout("requests/s", domain=[0.56, 1], rangemode="tozero", tickformat="~s"),
        yaxis2=axis_layout("RSS MiB", domain=[0, 0.44], rangemode="tozero"),
    )
    if any(trace.get("yaxis") == "y3" for trace in data):
        layout["yaxis3"] = axis_layout(
            "CPU %",
            overlaying="y2",
            side="right",
            rangemode="tozero",
            showgrid=False,
            tickformat=".0f",
        )
        layout["margin"]["r"] = 56
    return {"data": data, "layout": layout}
