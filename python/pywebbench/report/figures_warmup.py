"""Warm-up figures: one point's warm-up curves with the steady start marked, and the
workload's "JIT effect" view (PyPy beside CPython on the same stack, over time).

Curves are requests/s per 0.25 s bucket since the warm-up began, then the measured
iterations' per-second requests/s on the same clock (:mod:`pywebbench.report.warmup`).
"""

from __future__ import annotations

from typing import Any

from pywebbench.report.figures import (
    FAMILY_COLOURS,
    PALETTE,
    Figure,
    axis_layout,
    base_layout,
    facet_grid,
    panel_rps_axis,
    panel_title,
    sig_round,
    text,
)
from pywebbench.report.view import PointView, ReportView, StackView, WarmupCurve, WorkloadView

WARMUP_SHADE = "#f5f7fa"


def _xy(points: list[tuple[float, float]]) -> tuple[list[float | None], list[float | None]]:
    return [sig_round(t, 5) for t, _ in points], [sig_round(v, 5) for _, v in points]


def _verdict(w: WarmupCurve) -> str:
    """How the warm-up ended, after the replicate's class when it has one."""
    kind = f"{w.warmup_class} · " if w.warmup_class else ""
    if w.unsettled:
        return kind + "not steady (cap)"
    if w.end == "cap":
        return kind + "capped, settled when measured"
    if w.end == "steady" and w.steady_start_s is not None:
        return kind + f"steady from {w.steady_start_s:.2f} s"
    return kind + "fixed warm-up"


def _vline(x: float, colour: str, dash: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"color": colour, "width": 2, "dash": dash},
    }


def point_warmup_figure(view: ReportView, point: PointView) -> Figure | None:
    """One line per replicate: its warm-up curve (solid), then its measured per-second
    requests/s (dotted); a dashed vertical line where the steady state was found to start,
    "not steady (cap)" where the warm-up ended at its cap and the replicate's class is not a
    steady state ("cap" where it is: :func:`pywebbench.analysis.warmup_class.unsettled`). Each
    replicate's legend entry
    starts with its class (flat, warm-up, slowdown, no steady state)."""
    curves = [w for w in point.warmups if w.curve or w.measured]
    if not curves:
        return None
    label = view.stacks[point.stack_key].label
    data: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    notes: list[tuple[float, str, str]] = []
    warm_end = max((w.warmup_s or 0.0) for w in curves)
    if warm_end > 0:
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": 0,
                "x1": warm_end,
                "y0": 0,
                "y1": 1,
                "fillcolor": WARMUP_SHADE,
                "line": {"width": 0},
                "layer": "below",
            }
        )
    for w in curves:
        colour = PALETTE[w.replicate % len(PALETTE)]
        name = f"replicate {w.replicate + 1}: {_verdict(w)}"
        for part, points, dash in (("warm-up", w.curve, "solid"), ("measured", w.measured, "dot")):
            if not points:
                continue
            x, y = _xy(points)
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers" if part == "measured" else "lines",
                    "name": text(name),
                    "legendgroup": f"r{w.replicate}",
                    "showlegend": part == "warm-up" or not w.curve,
                    "x": x,
                    "y": y,
                    "line": {"color": colour, "width": 2, "dash": dash},
                    "marker": {"size": 5},
                    "hovertemplate": f"replicate {w.replicate + 1} {part}: t=%{{x:.2f}} s, "
                    "%{y:,.0f} req/s<extra></extra>",
                    "meta": {"stack": label},
                }
            )
        if w.end == "steady" and w.steady_start_s is not None:
            shapes.append(_vline(w.steady_start_s, colour, "dash"))
            notes.append((w.steady_start_s, f"steady r{w.replicate + 1}", colour))
        elif w.end == "cap" and w.warmup_s:
            # a cap the measured series showed settled is drawn, not as a warning
            line, mark = ("#e15759", "#c23b3d") if w.unsettled else ("#9a9a9a", "#7a7a7a")
            shapes.append(_vline(w.warmup_s, line, "dot"))
            verdict = "not steady (cap)" if w.unsettled else "cap"
            notes.append((w.warmup_s, f"r{w.replicate + 1}: {verdict}", mark))
    annotations = [
        {
            "text": text(note),
            "xref": "x",
            "yref": "paper",
            "x": x,
            "y": 1,
            "yshift": 16 * k,  # above the plot area, one line per marker: never over data
            "xanchor": "left",
            "yanchor": "bottom",
            "showarrow": False,
            "font": {"size": 11, "color": colour},
        }
        for k, (x, note, colour) in enumerate(notes)
    ]
    return {
        "data": data,
        "layout": base_layout(
            height=330 + 16 * len(notes),
            shapes=shapes,
            annotations=annotations,
            showlegend=True,
            legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top"},
            margin={"l": 64, "r": 16, "t": 20 + 16 * len(notes), "b": 48},
            xaxis=axis_layout("seconds since the warm-up began", rangemode="tozero"),
            yaxis=axis_layout("requests/s", rangemode="tozero", tickformat="~s"),
        ),
    }


def _family(stack: StackView) -> str:
    name = stack.interpreter.lower()
    return "pypy" if name.startswith("pypy") else "cpython" if name.startswith("cpython") else ""


def jit_pairs(view: ReportView, workload: WorkloadView) -> list[tuple[str, list[PointView]]]:
    """Stacks that ran on both PyPy and CPython: (panel title, their points at the highest
    load point they share), one entry per server · framework (· workers)."""
    groups: dict[tuple[str, str, int, int], dict[str, list[PointView]]] = {}
    for p in workload.points:
        st = view.stacks[p.stack_key]
        fam = _family(st)
        if fam and p.warmups:
            key = (st.server, st.framework, st.workers, st.threads)
            groups.setdefault(key, {}).setdefault(p.load_point, []).append(p)
    out = []
    for (server, framework, workers, threads), by_load in sorted(groups.items()):
        shared = [
            pts
            for pts in by_load.values()
            if {_family(view.stacks[p.stack_key]) for p in pts} >= {"pypy", "cpython"}
        ]
        if not shared:
            continue
        pts = max(shared, key=lambda ps: ps[0].load_sort)
        title = f"{server} · {framework}"
        if (workers, threads) != (1, 1):
            title += f" · {workers}w×{threads}t"
        out.append((f"{title} @ {pts[0].load_point}", pts))
    return out


def jit_effect_figure(view: ReportView, workload: WorkloadView) -> Figure | None:
    """Side by side per stack: PyPy's and CPython's requests/s over time since the warm-up
    began, every replicate a line (a JIT rises, an interpreter stays flat)."""
    pairs = jit_pairs(view, workload)
    if not pairs:
        return None
    ncols, nrows, cells = facet_grid(len(pairs))
    layout = base_layout(
        height=90 + 250 * nrows,
        margin={"l": 64, "r": 16, "t": 48, "b": 44},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
    )
    data: list[dict[str, Any]] = []
    annotations = []
    shown: set[str] = set()
    for i, (title, pts) in enumerate(pairs):
        x0, x1, y0, y1 = cells[i]
        suffix = "" if i == 0 else str(i + 1)
        last_row = i // ncols == nrows - 1
        layout[f"xaxis{suffix}"] = axis_layout(
            "seconds since the warm-up began" if last_row else "",
            domain=[x0, x1],
            anchor=f"y{suffix}",
            rangemode="tozero",
        )
        layout[f"yaxis{suffix}"] = panel_rps_axis(suffix, [y0, y1 - 0.07], first=i % ncols == 0)
        annotations.append(panel_title(title, x0, y1 - 0.06))
        for p in sorted(pts, key=lambda p: view.stacks[p.stack_key].label):
            st = view.stacks[p.stack_key]
            for w in p.warmups:
                x, y = _xy(w.curve + w.measured)
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "name": text(st.interpreter),
                        "legendgroup": text(st.interpreter),
                        "showlegend": st.interpreter not in shown,
                        "xaxis": f"x{suffix}",
                        "yaxis": f"y{suffix}",
                        "x": x,
                        "y": y,
                        "opacity": 0.85,
                        "line": {"color": FAMILY_COLOURS[_family(st)], "width": 1.6},
                        "hovertemplate": f"<b>{text(st.label)}</b> r{w.replicate + 1} "
                        f"({text(_verdict(w))})<br>t=%{{x:.2f}} s: %{{y:,.0f}} req/s"
                        "<extra></extra>",
                        "meta": {"stack": st.label},
                    }
                )
                shown.add(st.interpreter)
    layout["annotations"] = annotations
    return {"data": data, "layout": layout}
