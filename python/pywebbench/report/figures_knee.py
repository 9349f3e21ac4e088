"""The throughput-latency curve of a knee search, with the knee marked (docs/slo.md).

x: the offered rate of each probe. Left axis (log): the SLO's latency percentile, one line
per replicate, a filled dot where the probe met the SLO and a cross where it did not; the
target is a dashed horizontal line. Right axis: the achieved rate (it follows the diagonal
while the server keeps up). The median knee is a vertical line, its 95% CI a shaded band.
"""

from __future__ import annotations

import math
from typing import Any

from pywebbench.report.figures import PALETTE, Figure, axis_layout, base_layout, sig_round, text
from pywebbench.report.knee import KneeView

KNEE_COLOUR = "#59a14f"
TARGET_COLOUR = "#e15759"


def _band(x0: float, x1: float, colour: str, dash: str | None = None) -> dict[str, Any]:
    """A vertical band (x0 < x1) or line (x0 == x1) over the whole plot height."""
    shape: dict[str, Any] = {
        "type": "rect" if x1 > x0 else "line",
        "xref": "x",
        "yref": "paper",
        "x0": x0,
        "x1": x1,
        "y0": 0,
        "y1": 1,
        "layer": "below",
    }
    if x1 > x0:
        shape.update(fillcolor=colour, opacity=0.15, line={"width": 0})
    else:
        shape["line"] = {"color": colour, "width": 2, "dash": dash or "solid"}
    return shape


def knee_figure(kv: KneeView) -> Figure:
    """The curve of every replicate of one knee point, the SLO target and the knee."""
    data: list[dict[str, Any]] = []
    reps = sorted({p.replicate for p in kv.probes})
    for rep in reps:
        pts = sorted((p for p in kv.probes if p.replicate == rep), key=lambda p: p.offered)
        colour = PALETTE[rep % len(PALETTE)]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"replicate {rep + 1}: {kv.percentile_label}",
                "x": [sig_round(p.offered) for p in pts],
                "y": [sig_round(max(p.latency_ms, 0.001)) for p in pts],
                "customdata": [
                    [p.verdict, p.samples, p.errors, sig_round(p.achieved)] for p in pts
                ],
                "marker": {
                    "size": 9,
                    "color": colour,
                    "symbol": ["circle" if p.verdict == "pass" else "x-thin-open" for p in pts],
                    "line": {"width": 2, "color": colour},
                },
                "line": {"color": colour, "width": 1.5},
                "hovertemplate": "%{x:,.0f} req/s offered: "
                + kv.percentile_label
                + " %{y:.2f} ms, %{customdata[0]} (%{customdata[1]:,} samples, "
                "%{customdata[2]} errors)<extra></extra>",
                "meta": {"stack": kv.label},
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"replicate {rep + 1}: achieved req/s",
                "x": [sig_round(p.offered) for p in pts],
                "y": [sig_round(p.achieved) for p in pts],
                "yaxis": "y2",
                "marker": {"size": 6, "symbol": "square-open", "color": colour},
                "hovertemplate": "%{x:,.0f} offered: %{y:,.0f} achieved<extra></extra>",
                "meta": {"stack": kv.label},
            }
        )
    shapes = [
        {
            "type": "line",
            "xref": "paper",
            "yref": "y",
            "x0": 0,
            "x1": 1,
            "y0": kv.target_ms,
            "y1": kv.target_ms,
            "line": {"color": TARGET_COLOUR, "width": 1.5, "dash": "dash"},
        }
    ]
    notes = [
        {
            "xref": "paper",
            "yref": "y",
            "x": 0,
            "y": _log10(kv.target_ms),
            "xanchor": "left",
            "yanchor": "bottom",
            "showarrow": False,
            "text": text(f"SLO {kv.slo}"),
            "font": {"size": 11, "color": TARGET_COLOUR},
        }
    ]
    est = kv.estimate
    if kv.knees:
        if est.n >= 2 and est.ci_high > est.ci_low:
            shapes.append(_band(est.ci_low, est.ci_high, KNEE_COLOUR))
        shapes.append(_band(est.median, est.median, KNEE_COLOUR))
        notes.append(
            {
                "xref": "x",
                "yref": "paper",
                "x": est.median,
                "y": 1,
                "yanchor": "bottom",
                "showarrow": False,
                "text": text(f"knee {kv.knee_text}"),
                "font": {"size": 11, "color": KNEE_COLOUR},
            }
        )
    else:
        notes.append(
            {
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 1,
                "yanchor": "bottom",
                "showarrow": False,
                "text": text(kv.knee_text),
                "font": {"size": 12, "color": TARGET_COLOUR},
            }
        )
    top = max([p.offered for p in kv.probes] + [p.achieved for p in kv.probes] + [1.0]) * 1.05
    layout = base_layout(
        height=440,
        shapes=shapes,
        annotations=notes,
        showlegend=True,
        margin={"l": 64, "r": 64, "t": 36, "b": 48},
        legend={"orientation": "h", "x": 0, "y": -0.16, "yanchor": "top", "font": {"size": 11}},
        xaxis=axis_layout("offered rate (requests/s, open loop)", range=[0, top], tickformat="~s"),
        yaxis=axis_layout(f"{kv.percentile_label} latency (ms, log)", type="log"),
        yaxis2=axis_layout(
            "achieved requests/s",
            overlaying="y",
            side="right",
            range=[0, top],  # the same scale as x: a server that keeps up is on the diagonal
            tickmode="auto",
            showgrid=False,
            tickformat="~s",
        ),
    )
    return {"data": data, "layout": layout}


def _log10(v: float) -> float:
    """Plotly places annotations on a log axis by the value's log10."""
    return math.log10(v) if v > 0 else 0.0


def knee_context(views: list[KneeView], figs: dict[str, Any]) -> list[dict[str, Any]]:
    """The template's entries of the knee section; each point's figure goes into ``figs``."""
    out = []
    for i, kv in enumerate(views):
        fid = f"knee-{i}"
        figs[fid] = knee_figure(kv)
        out.append(
            {
                "fig": fid,
                "view": kv,
                "stack": kv.label,
                "label": f"{kv.label} — {kv.workload} @ {kv.load_point}",
            }
        )
    return out
