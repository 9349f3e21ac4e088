"""The version study of a report (``--profile versions``, docs/interpreters.md): requests/s
(95% CI), p99 and peak memory of each server x framework x workload x load point against the
interpreter it ran on, for every such combination measured on two interpreters or more.
A Plotly specification, as in :mod:`pywebbench.report.figures`."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pywebbench.report.figures import Colours, Figure, ci_bars, sig_round, text
from pywebbench.report.figures_axes import panels_layout
from pywebbench.report.view import PointView, ReportView, StackView

#: A combination measured on interpreters: (server, framework, workers x threads, workload,
#: load point) -> (stack, point) per interpreter.
Sweeps = dict[tuple[str, str, str, str, str], list[tuple[StackView, PointView]]]


def interpreter_order(stack: StackView) -> tuple[bool, tuple[int, ...], str]:
    """CPython by language version (a free-threaded build after the GIL build), PyPy last."""
    version = tuple(int(x) for x in stack.interpreter_version.split(".") if x.isdigit())
    return (stack.interpreter.startswith("pypy"), version, stack.interpreter)


def version_sweeps(view: ReportView) -> Sweeps:
    """Every combination with a result on at least two interpreters, interpreters in order."""
    sweeps: Sweeps = defaultdict(list)
    for w in view.workloads:
        for p in w.points:
            s = view.stacks.get(p.stack_key)
            if s is None or p.rps is None:
                continue
            shape = f"{s.workers}w×{s.threads}t"
            sweeps[(s.server, s.framework, shape, w.name, p.load_point)].append((s, p))
    return {
        key: sorted(found, key=lambda sp: interpreter_order(sp[0]))
        for key, found in sweeps.items()
        if len({s.interpreter for s, _ in found}) >= 2
    }


def versions_figures(view: ReportView) -> dict[str, Figure]:
    """:func:`versions_figure` of each workload with a sweep, by workload name (workloads'
    throughputs differ by orders of magnitude: one figure each)."""
    sweeps = version_sweeps(view)
    out = {}
    for workload in dict.fromkeys(key[3] for key in sweeps):
        fig = versions_figure({k: v for k, v in sweeps.items() if k[3] == workload})
        if fig is not None:
            out[workload] = fig
    return out


def versions_figure(sweeps: Sweeps) -> Figure | None:
    """Requests/s (top, 95% CI over replicates), p99 (middle) and peak RSS (bottom) by
    interpreter: one line per server x framework x workload x load point of ``sweeps``."""
    if not sweeps:
        return None
    order = sorted(
        {s.interpreter: s for found in sweeps.values() for s, _ in found}.values(),
        key=interpreter_order,
    )
    categories = [s.interpreter for s in order]
    colours = Colours([" ".join(k) for k in sweeps])
    data: list[dict[str, Any]] = []
    for key, found in sweeps.items():
        server, framework, shape, workload, load_point = key
        label = text(f"{server} · {framework} · {shape} — {workload} @ {load_point}")
        colour = colours.colour(" ".join(key))
        x = [s.interpreter for s, _ in found]
        estimates = [p.rps for _, p in found if p.rps is not None]  # every one: see sweeps
        common = {"type": "scatter", "mode": "lines+markers", "legendgroup": label, "x": x}
        data.append(
            {
                **common,
                "name": label,
                "y": [sig_round(e.median) for e in estimates],
                "error_y": ci_bars(estimates, color=colour, thickness=1.2),
                "line": {"color": colour, "width": 2},
                "hovertemplate": "%{x}: %{y:,.0f} req/s<extra>" + label + "</extra>",
            }
        )
        for axis, values, unit, dash in (
            ("y2", [p.p99_ms for _, p in found], "p99 %{y:.3g} ms", "dot"),
            ("y3", [p.peak_rss_mib for _, p in found], "peak RSS %{y:.3g} MiB", "dash"),
        ):
            data.append(
                {
                    **common,
                    "name": label,
                    "showlegend": False,
                    "y": [sig_round(v) if v is not None else None for v in values],
                    "yaxis": axis,
                    "line": {"color": colour, "width": 2, "dash": dash},
                    "hovertemplate": "%{x}: " + unit + "<extra>" + label + "</extra>",
                }
            )
    panels = [("requests/s", (0.68, 1.0)), ("p99 ms", (0.35, 0.63)), ("peak RSS MiB", (0.0, 0.3))]
    return {"data": data, "layout": panels_layout("interpreter", categories, panels, height=640)}


def rps_words(view: ReportView) -> str:
    """What the by-interpreter figure's requests/s are, for the designs that made them: an
    interleaved group holds every interpreter of its workload and load point, so their
    figures come from the same rounds (a run stored before that held one interpreter a
    group: its interpreters' figures come from different groups, minutes apart)."""
    sweeps = version_sweeps(view)
    grouped = any(p.group for found in sweeps.values() for _, p in found)
    if not grouped:
        return "median with its 95% CI over replicates"
    together = all(
        len({(p.group or {}).get("group") for _, p in found}) == 1
        and all(p.group for _, p in found)
        for found in sweeps.values()
    )
    if together:
        return (
            "every interpreter's from one interleaved group, in slices of the same rounds: a "
            "stack's level at the group's average round with its 95% CI; the ranking gives "
            "the ratios between interpreters with their intervals"
        )
    return (
        "each interpreter's from groups of its own, measured minutes apart, not in the same "
        "rounds: a stack's level at its group's average round with its 95% CI within that "
        "group, or a median over replicates; no interval compares two interpreters"
    )
