"""Robustness as a curve: a fault sweep's retained throughput and p99 against attack size, the
breaking point per stack, and the server settings that bear on the verdict (docs/faults.md).

The sweep is stored in a cell's ``flags.robustness.curve`` (``run/robustness.py``).
"""

from __future__ import annotations

from typing import Any

from pywebbench import formatting as fmt
from pywebbench.faults.outcome import CurvePoint, RobustnessCurve
from pywebbench.mdtext import md_text
from pywebbench.report.figures import (
    axis_layout,
    base_layout,
    family_colour,
    panel_title,
    text,
)
from pywebbench.report.tables import Column, Row, Table, TCell
from pywebbench.report.view import PointView, ReportView, StackView, WorkloadView

__all__ = [
    "VERDICT_SETTINGS",
    "breaking_text",
    "breaking_table",
    "curve_figure",
    "interfered_marks",
    "markdown_lines",
    "verdict_settings",
]

#: Manifest settings that decide how a server fares under faults (connection caps, pools,
#: timeouts): shown beside every robustness verdict, not only in the manifest.
VERDICT_SETTINGS = (
    "connection_limit",
    "backlog",
    "workers",
    "threads",
    "keep_alive",
    "timeout",
    "max_requests",
)

Figure = dict[str, Any]


def _curves(workload: WorkloadView) -> list[tuple[PointView, RobustnessCurve]]:
    return [
        (p, p.robustness_curve)
        for p in workload.points
        if p.robustness_curve is not None and p.robustness_curve.points
    ]


def breaking_text(curve: RobustnessCurve) -> str:
    """ "500", or "not broken up to 2,000"."""
    if curve.breaking_point is None:
        return f"not broken up to {curve.largest:,}"
    return f"{curve.breaking_point:,}"


def verdict_settings(stack: StackView | None) -> str:
    """ "connection_limit=1000, backlog=2048, threads=4": the stack's settings that bear on
    how it fares under faults (empty when none is known)."""
    if stack is None:
        return ""
    parts = [f"{k}={stack.settings[k]}" for k in VERDICT_SETTINGS if k in stack.settings]
    return ", ".join(parts)


def _retained(curve: RobustnessCurve) -> str:
    """ "500: 45% · 1,100: 0%"; a point that stayed interfered says so."""
    return " · ".join(
        f"{p.size:,}: {fmt.whole(p.retained_pct, '%')}" + (" (interfered)" if p.interfered else "")
        for p in curve.points
    )


def breaking_table(view: ReportView, workload: WorkloadView) -> Table | None:
    """Per stack and load point with a sweep: the breaking point, the retained throughput at
    every size, and the settings behind it (None without a sweep)."""
    curves = _curves(workload)
    if not curves:
        return None
    columns = [
        Column("stack", "Stack"),
        Column("load", "Load"),
        Column("attack", "Attack"),
        Column(
            "breaking",
            "Breaking point",
            True,
            "the smallest attack size at which the good clients kept under 50% of their "
            "clean throughput",
        ),
        Column("retained", "Retained by size", help="good req/s under attack / clean, per size"),
        Column("settings", "Server settings", help="settings that bear on the verdict"),
    ]
    rows = []
    for p, curve in sorted(curves, key=lambda pc: _sort_key(view, pc[0])):
        stack = view.stacks.get(p.stack_key)
        point = curve.breaking_point
        attack = f"{curve.kind} (fresh {curve.fresh_share:.0%}, lead {curve.lead_s:g} s)"
        rows.append(
            Row(
                {
                    "stack": TCell(stack.label if stack else p.stack_key, p.stack_key),
                    "load": TCell(p.load_point, p.load_sort),
                    "attack": TCell(attack, attack),
                    "breaking": TCell(
                        breaking_text(curve),
                        float(point) if point is not None else float("inf"),
                        "bad" if point is not None else "",
                    ),
                    "retained": TCell(_retained(curve), _retained(curve)),
                    "settings": TCell(verdict_settings(stack), verdict_settings(stack)),
                },
                stack,
            )
        )
    return Table(columns, rows)


def markdown_lines(view: ReportView, workload: WorkloadView) -> list[str]:
    """The sweep's breaking points (when there is a sweep) and, always, the server settings
    behind the robustness verdicts, as Markdown lines."""

    out: list[str] = []
    table = breaking_table(view, workload)
    if table is not None:
        out.append(
            "Robustness as a curve: the attack swept over its sizes, each on a fresh server; "
            "breaking point = the smallest size at which the good clients kept under 50% of "
            "their clean throughput."
        )
        out.append("")
        for row in table.rows:
            c = row.cells
            out.append(
                f"- **{md_text(c['stack'].text)}** ({md_text(c['load'].text)}), "
                f"{md_text(c['attack'].text)}: breaking point **{c['breaking'].text}**; "
                f"retained {md_text(c['retained'].text)}"
            )
        out.append("")
    keys = sorted({p.stack_key for p in workload.points if p.robustness_detail is not None})
    settings = [(view.stacks.get(k), verdict_settings(view.stacks.get(k))) for k in keys]
    settings = [(s, text_) for s, text_ in settings if s is not None and text_]
    if settings:
        out += ["Server settings that bear on these verdicts:", ""]
        for stack, text_ in settings:
            assert stack is not None
            out.append(f"- {md_text(stack.label)}: {md_text(text_)}")
        out.append("")
    return out


def _sort_key(view: ReportView, p: PointView) -> tuple[str, float]:
    stack = view.stacks.get(p.stack_key)
    return (stack.label if stack else p.stack_key, float(p.load_sort))


def interfered_marks(label: str, curve: RobustnessCurve, colour: str) -> dict[str, Any] | None:
    """A cross on every point of the retained-throughput panel that stayed interfered after
    its re-measures (other processes took more than the threshold of a core from the pinned
    cores); None when every point was clean."""
    points = [q for q in curve.points if q.interfered]
    if not points:
        return None

    def took(q: CurvePoint) -> str:
        return (
            ""
            if q.others_share is None
            else f", others took {fmt.percent(q.others_share)} of a core"
        )

    return {
        "type": "scatter",
        "mode": "markers",
        "name": text(f"{label} interfered"),
        "legendgroup": label,
        "showlegend": False,
        "x": [q.size for q in points],
        "y": [q.retained_pct for q in points],
        "marker": {"size": 11, "symbol": "x-thin-open", "line": {"width": 2}, "color": colour},
        "hovertext": [
            text(
                f"{label} at {q.size:,}: {fmt.whole(q.retained_pct, '%')} retained; "
                f"interfered{took(q)}"
            )
            for q in points
        ],
        "hoverinfo": "text",
        "meta": {"interfered": [q.size for q in points], "stack": label},
    }


def curve_figure(view: ReportView, workload: WorkloadView) -> Figure | None:
    """Two panels against attack size (log): retained throughput (%, the 50% line dashed, the
    breaking point ringed, a point that stayed interfered crossed) and the good clients' p99
    (ms, log), one line per stack."""
    curves = _curves(workload)
    if not curves:
        return None
    layout = base_layout(
        height=380,
        margin={"l": 64, "r": 16, "t": 48, "b": 52},
        legend={"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},
    )
    kinds = sorted({c.kind for _, c in curves})
    size_title = f"attack size ({', '.join(kinds)} connections)"
    layout["xaxis"] = axis_layout(size_title, domain=[0.0, 0.46], type="log", anchor="y")
    layout["xaxis2"] = axis_layout(size_title, domain=[0.54, 1.0], type="log", anchor="y2")
    layout["yaxis"] = axis_layout("retained throughput %", anchor="x", rangemode="tozero")
    layout["yaxis2"] = axis_layout("good p99 ms", anchor="x2", type="log")
    layout["annotations"] = [
        panel_title("Retained good throughput", 0.0, 1.02),
        panel_title("Good p99 under attack", 0.54, 1.02),
    ]
    layout["shapes"] = [
        {
            "type": "line",
            "xref": "x domain",
            "yref": "y",
            "x0": 0,
            "x1": 1,
            "y0": 50,
            "y1": 50,
            "line": {"dash": "dash", "width": 1, "color": "#888"},
        }
    ]
    data: list[dict[str, Any]] = []
    for p, curve in sorted(curves, key=lambda pc: _sort_key(view, pc[0])):
        stack = view.stacks.get(p.stack_key)
        label = f"{stack.label if stack else p.stack_key} {p.load_point}"
        colour = family_colour(stack) if stack else "#555"
        sizes = [q.size for q in curve.points]
        common = {"type": "scatter", "mode": "lines+markers", "legendgroup": label}
        data.append(
            {
                **common,
                "name": text(label),
                "x": sizes,
                "y": [q.retained_pct for q in curve.points],
                "line": {"color": colour},
                "hovertemplate": f"<b>{text(label)}</b><br>%{{x:,}} connections: "
                "%{y:.0f}% retained<extra></extra>",
                "meta": {"stack": label, "breaking": curve.breaking_point},
            }
        )
        data.append(
            {
                **common,
                "name": text(label),
                "showlegend": False,
                "xaxis": "x2",
                "yaxis": "y2",
                "x": sizes,
                "y": [q.p99_faulted_ms for q in curve.points],
                "line": {"color": colour},
                "hovertemplate": f"<b>{text(label)}</b><br>%{{x:,}} connections: p99 "
                "%{y:.1f} ms<extra></extra>",
            }
        )
        marks = interfered_marks(label, curve, colour)
        if marks is not None:
            data.append(marks)
        point = curve.breaking_point
        if point is not None:
            at = next(q for q in curve.points if q.size == point)
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": text(f"{label} breaks at {point:,}"),
                    "legendgroup": label,
                    "showlegend": False,
                    "x": [point],
                    "y": [at.retained_pct],
                    "marker": {"size": 16, "symbol": "circle-open", "color": colour},
                    "hovertemplate": f"<b>{text(label)}</b> breaks at {point:,} "
                    f"(p99 {fmt.latency_ms(at.p99_faulted_ms)} ms)<extra></extra>",
                    "meta": {"breaking_point": point, "stack": label},
                }
            )
    return {"data": data, "layout": layout}
