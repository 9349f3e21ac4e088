"""Where the time goes (``run --flamegraph``, docs/flamegraphs.md): per point of the study, a
flame graph of the server tree's CPU time and its breakdown by owner, in the HTML report (an
icicle chart drawn by the embedded Plotly: offline) and the Markdown summary.

A point's windows are its replicates' sampled windows; their stacks are pooled, each weighed
by the CPU seconds it stands for (:func:`pywebbench.meter.breakdown.stack_seconds`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pywebbench import formatting as fmt
from pywebbench.mdtext import md_text
from pywebbench.meter.breakdown import cpu_at_one_speed, merged_seconds, probed, split_frame
from pywebbench.meter.core_speed import SpeedScaling
from pywebbench.meter.flame import CATEGORIES, FlameWindow
from pywebbench.report.figures import Figure, base_layout, text
from pywebbench.report.view import FlamePoint, ReportView
from pywebbench.store.model import Study

#: Frames under this share of the point's CPU are left out of the flame graph (not of the
#: breakdown): they would be slivers no one can read, and they bloat the page.
MIN_SHARE = 0.005


def flame_points(study: Study, speed: SpeedScaling | None = None) -> list[FlamePoint]:
    """Every point with a sampled window (or the reason it has none), in study order.

    With ``speed`` (the study's req/s scaling) and every window's core rate known, the
    windows' CPU times are put at the same core speed as the req/s, each cell's with its
    group's elasticity (docs/flamegraphs.md#compare); otherwise all stay as measured."""
    key_of = {s.id: s.key for s in study.stacks if s.id is not None}
    cells = {c.id: c for c in study.cells}
    points: dict[tuple[str, str, str], FlamePoint] = {}
    found: list[tuple[FlamePoint, int, FlameWindow]] = []
    for rep in sorted(study.replicates, key=lambda r: (r.cell_id, r.replicate)):
        cell = cells.get(rep.cell_id)
        if cell is None or not rep.flame_json:
            continue
        where = (key_of[cell.stack_id], cell.workload, cell.load_point)
        point = points.setdefault(where, FlamePoint(*where))
        doc = rep.flame
        if "error" in doc:
            point.errors.append(str(doc["error"]))
        elif not doc.get("requests"):
            point.errors.append("no request completed in the sampled window")
        else:
            found.append((point, rep.cell_id, FlameWindow.from_dict(doc)))
    reference = speed.reference if speed is not None else None
    scale = reference is not None and probed([w for _, _, w in found])
    for point, cell_id, window in found:
        if scale and speed is not None and reference is not None:
            [window] = cpu_at_one_speed([window], reference, speed.elasticity_of(cell_id))
        point.windows.append(window)
    return list(points.values())


def icicle(point: FlamePoint, title: str) -> Figure | None:
    """The flame graph of ``point`` as a Plotly icicle (root on top, callees below; a box's
    width is the CPU time of the function with everything it called)."""
    # Whole microseconds per stack, summed up the tree exactly: a box is never smaller
    # than its children (Plotly draws nothing for a "total" tree that breaks this).
    nodes = _node_values({k: round(v * 1e6) for k, v in merged_seconds(point.windows).items()})
    return _figure(
        nodes,
        title,
        lambda node: text(split_frame(node.rpartition(";")[2])[1]),
        "%{percentRoot:.1%} of the CPU",
    )


def _figure(
    nodes: dict[str, int],
    title: str,
    hover: Callable[[str], str],
    extra_hover: str = "",
    colour: Callable[[str], float] | None = None,
) -> Figure | None:
    """An icicle of ``nodes`` (stack prefix -> value), boxes under :data:`MIN_SHARE` left out;
    ``colour`` gives each box a value on a diverging scale (a differential)."""
    total = sum(v for k, v in nodes.items() if ";" not in k)
    if total <= 0:
        return None
    kept = sorted(k for k, v in nodes.items() if v >= MIN_SHARE * total)
    trace: dict[str, Any] = {
        "type": "icicle",
        "ids": ["all", *kept],
        "labels": ["all", *(text(split_frame(k.rpartition(";")[2])[0]) for k in kept)],
        "parents": ["", *(k.rpartition(";")[0] or "all" for k in kept)],
        "values": [total, *(nodes[k] for k in kept)],
        "branchvalues": "total",
        "tiling": {"orientation": "v"},
        "customdata": ["whole tree", *(hover(k) for k in kept)],
        "hovertemplate": "<b>%{label}</b><br>%{customdata}"
        + (f"<br>{extra_hover}" if extra_hover else "")
        + "<extra></extra>",
        "maxdepth": 30,
    }
    if colour is not None:
        trace["marker"] = {
            "colors": [0.0, *(colour(k) for k in kept)],
            "colorscale": "RdBu",
            "reversescale": True,
            "cmid": 0,
            "cmin": -2,
            "cmax": 2,
            "showscale": True,
            "colorbar": {"title": {"text": "log2 NEW/BASE"}},
        }
    layout = base_layout(height=520, margin={"l": 8, "r": 8, "t": 40, "b": 8})
    layout["title"] = {"text": text(title), "font": {"size": 13}, "x": 0}
    return {"data": [trace], "layout": layout}


def _node_values(stacks: dict[str, int]) -> dict[str, int]:
    """Every stack prefix (a box of the flame graph) with the sum of the stacks under it."""
    nodes: dict[str, int] = defaultdict(int)
    for stack, value in stacks.items():
        frames = stack.split(";")
        for depth in range(1, len(frames) + 1):
            nodes[";".join(frames[:depth])] += value
    return nodes


def _per_request_nodes(windows: list[FlameWindow]) -> dict[str, int]:
    """Nanoseconds of CPU per request of every stack prefix (a box of the flame graph)."""
    requests = sum(w.requests for w in windows) or 1
    return _node_values({k: round(v * 1e9 / requests) for k, v in merged_seconds(windows).items()})


def diff_icicle(base: list[FlameWindow], new: list[FlameWindow], title: str) -> Figure | None:
    """NEW's flame graph, per request, each box coloured by how its CPU per request changed
    against BASE (red: grew, blue: shrank, white: as before; a box BASE lacks is dark red)."""
    b, n = _per_request_nodes(base), _per_request_nodes(new)

    def change(node: str) -> float:
        before = b.get(node, 0)
        return max(-2.0, min(2.0, math.log2(n[node] / before))) if before > 0 else 2.0

    return _figure(
        n,
        title,
        lambda node: f"{b.get(node, 0) / 1e3:,.1f} → {n[node] / 1e3:,.1f} µs/request",
        colour=change,
    )


def breakdown_rows(view: ReportView, points: list[FlamePoint]) -> list[dict[str, str]]:
    """One row per point: its label, each category's share, the kernel's share and the tree's
    CPU per request (as text)."""
    rows = []
    for p in points:
        stack = view.stacks.get(p.stack_key)
        row = {"stack": stack.label if stack else p.stack_key, "workload": p.workload}
        row["load"] = p.load_point
        if not p.windows:
            row["note"] = "; ".join(dict.fromkeys(p.errors)) or "no samples"
            rows.append(row)
            continue
        b = p.breakdown
        row.update({c: fmt.percent(b.shares.get(c)) for c in CATEGORIES})
        row["kernel"] = fmt.percent(b.kernel)
        cpu = b.cpu_s_per_request
        row["cpu_us"] = fmt.count(cpu * 1e6) if cpu is not None else fmt.MISSING
        row["note"] = f"{len(p.windows)} window(s), {p.requests:,} requests"
        rows.append(row)
    return rows


def markdown_lines(view: ReportView, points: list[FlamePoint]) -> list[str]:
    """The breakdown as a Markdown table (the flame graphs are in the HTML report)."""
    if not points:
        return []
    head = ["stack", "workload", "load", *CATEGORIES, "kernel", "CPU µs/req"]
    out = [
        "## Where the time goes",
        "",
        "Share of the server tree's CPU time in the sampled windows (`--flamegraph`, "
        "docs/flamegraphs.md), by who ran it; *kernel* is the system-time share of the same "
        "CPU and overlaps the others. Flame graphs are in the HTML report.",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|---|" + "---:|" * (len(head) - 3),
    ]
    for row in breakdown_rows(view, points):
        cells = [md_text(row["stack"]), md_text(row["workload"]), md_text(row["load"])]
        if "server" not in row:
            cells += [md_text(row["note"])] + [""] * (len(head) - 4)
        else:
            cells += [row[c] for c in CATEGORIES] + [row["kernel"], row["cpu_us"]]
        out.append("| " + " | ".join(cells) + " |")
    return [*out, ""]
