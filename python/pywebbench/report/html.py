"""The HTML report: one self-contained file that works offline.

Layout is a Jinja2 template with autoescaping (every study string is shown as text). The
figures are Plotly specifications from :mod:`pywebbench.report.figures`, embedded as one JSON
document in a ``<script type="application/json">`` element with ``<``, ``>`` and ``&``
escaped as ``\\u003c``..., so no string in the study can close the script element. Plotly's
own JavaScript comes from the ``plotly`` Python package and is embedded too: no CDN.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from pywebbench import formatting as fmt
from pywebbench.meter.flame import CATEGORIES
from pywebbench.report import (
    axes,
    endpoints,
    figures,
    figures_axes,
    figures_warmup,
    flags,
    flame,
    pooled,
    robustness_curve,
    tables,
    versions,
)
from pywebbench.report import history as figures_history
from pywebbench.report.figures_knee import knee_context
from pywebbench.report.instructions import COUNTED_NOTE, instructions_table
from pywebbench.report.view import Ranking, ReportView, StackView

TEMPLATES = Path(__file__).with_name("templates")


class ReportRenderError(RuntimeError):
    """The report cannot be rendered (e.g. Plotly's JavaScript is missing)."""


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The minified plotly.js bundled with the ``plotly`` Python package."""
    try:
        path = resources.files("plotly") / "package_data" / "plotly.min.js"
        js = path.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ReportRenderError(
            "plotly.min.js not found: install the 'plotly' Python package (pip install plotly)"
        ) from exc
    if re.search(r"</script", js, re.IGNORECASE):
        # Cannot happen with the published bundles; refuse rather than emit a broken page.
        raise ReportRenderError("plotly.min.js contains '</script' and cannot be inlined")
    return js


def safe_json(obj: Any) -> str:
    """JSON for a ``<script type="application/json">`` element: no '<', '>' or '&' inside.

    The escapes are valid JSON string escapes, so ``JSON.parse`` returns the original text.
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _slug(s: str) -> str:
    """An HTML id fragment for a name (names may hold any character)."""
    slug = re.sub(r"[^a-zA-Z0-9_-]+", "-", s).strip("-") or "x"
    return slug


def _selection_label(sel: str) -> str:
    return "best load point per stack" if sel == "peak" else sel


def _environment_rows(stack: StackView) -> dict[str, str]:
    settings = ", ".join(f"{k}={v}" for k, v in sorted(stack.settings.items()))
    packages = ", ".join(f"{k}=={v}" for k, v in sorted(stack.packages.items()))
    return {"settings": settings, "packages": packages}


def _warmup_figures(
    view: ReportView, ranking: Ranking, slug: str, figs: dict[str, Any], done: dict[int, str]
) -> list[dict[str, str]]:
    """The warm-up figure of each ranked point, added to ``figs`` once (rankings share
    points; ``done`` maps a point to its figure id); returns the selector's options."""
    options = []
    for row in ranking.ranked:
        p = row.point
        fid = done.get(id(p), "")
        if not fid:
            fig = figures_warmup.point_warmup_figure(view, p)
            if fig is None:
                continue
            fid = done[id(p)] = f"warmup-{slug}-{len(done)}"
            figs[fid] = fig
        verdict = " — not steady (cap)" if any(w.unsettled for w in p.warmups) else ""
        label = f"{row.stack.label} @ {p.load_point}{verdict}"
        options.append({"fig": fid, "stack": row.stack.label, "label": label})
    return options


def build_context(view: ReportView) -> dict[str, Any]:
    """Everything the template needs: tables, headlines and figure ids per workload."""
    figs: dict[str, Any] = {}
    all_keys = [w_p.stack_key for w in view.workloads for w_p in w.points]
    line_keys = sorted(
        {f"{view.stacks[k].interpreter} · {view.stacks[k].framework}" for k in all_keys}
    )
    colours = figures.Colours([view.stacks[k].label for k in dict.fromkeys(all_keys)])
    line_colours = figures.Colours(line_keys)
    used_slugs: set[str] = set()
    workloads = []
    for w in view.workloads:
        slug = _slug(w.name)
        while slug in used_slugs:
            slug += "-x"
        used_slugs.add(slug)
        selections = []
        point_figs: dict[int, str] = {}
        for ranking in w.rankings:
            sel_slug = _slug(ranking.selection)
            fig_ids: dict[str, str | None] = {"ranking": None, "spectrum": None}
            for kind, fig in (
                ("ranking", figures.ranking_figure(view, ranking) if ranking.ranked else None),
                ("spectrum", figures.spectrum_figure(view, ranking, colours)),
            ):
                if fig is not None:
                    fid = f"{kind}-{slug}-{sel_slug}"
                    figs[fid] = fig
                    fig_ids[kind] = fid
            table = tables.ranking_table(ranking, robustness=view.has_robustness)
            selections.append(
                {
                    "warmups": _warmup_figures(view, ranking, slug, figs, point_figs),
                    "memory": tables.memory_table(ranking),
                    "legend": flags.legend([n for row in table.rows for n in row.notes]),
                    "value": sel_slug,
                    "label": _selection_label(ranking.selection),
                    "table": table,
                    "headline": tables.headline(ranking),
                    "method_note": tables.method_note(ranking) if ranking.ranked else None,
                    "group_notes": tables.group_notes(ranking),
                    "figs": fig_ids,
                    "ranked": len(ranking.ranked),
                    "total": len(ranking.rows),
                }
            )
        sweep = figures.sweep_figure(view, w, line_colours)
        sweep_id = None
        if sweep is not None and len(w.load_points) > 1:
            sweep_id = f"sweep-{slug}"
            figs[sweep_id] = sweep
        jit = figures_warmup.jit_effect_figure(view, w)
        jit_id = None
        if jit is not None:
            jit_id = f"jit-{slug}"
            figs[jit_id] = jit
        fault_curve = robustness_curve.curve_figure(view, w)
        fault_curve_id = None
        if fault_curve is not None:
            fault_curve_id = f"faultcurve-{slug}"
            figs[fault_curve_id] = fault_curve
        history = figures_history.history_figure(view, w, w.history, colours)
        history_id = None
        if history is not None:
            history_id = f"history-{slug}"
            figs[history_id] = history
        workloads.append(
            {
                "history": history_id,
                "jit": jit_id,
                "robustness": tables.robustness_table(view, w),
                "fault_mix": tables.fault_mixes(w),
                "fault_curve": fault_curve_id,
                "breaking": robustness_curve.breaking_table(view, w),
                "findings": tables.findings_table(view, w),
                "view": w,
                "slug": slug,
                "ws_note": tables.WS_NOTE if tables.is_websocket(w.name) else None,
                "params": ", ".join(f"{k}={v}" for k, v in sorted(w.params.items())),
                "selections": selections,
                "sweep": sweep_id,
                "single_load": w.load_points[0] if len(w.load_points) == 1 else None,
            }
        )
    cells = []
    for c in view.cells:
        fid = f"cell-{c.id}"
        figs[fid] = figures.cell_figure(view, c)
        stack = view.stacks[c.stack_key]
        cells.append(
            {
                "fig": fid,
                "stack": stack.label,
                "label": f"{stack.label} — {c.workload} @ {c.load_point} — replicate "
                f"{c.replicate + 1}",
            }
        )
    axes_figs = {
        "syscalls-fig": figures_axes.syscalls_figure(view),
        "recycling-fig": figures_axes.recycling_figure(view),
    }
    figs.update({k: v for k, v in axes_figs.items() if v is not None})
    by_version = versions.versions_figures(view)
    figs.update({f"versions-fig-{n}": fig for n, fig in enumerate(by_version.values())})
    study_axes = {
        "syscalls": axes.syscalls_table(view),
        "instructions": instructions_table(view),
        "counted_note": COUNTED_NOTE,
        "connection": axes.connection_table(view),
        "protocol": axes.protocol_table(view),
        "recycling": axes.recycling_table(view),
        "figs": {k: k in figs for k in axes_figs},
        "versions": [(w, f"versions-fig-{n}") for n, w in enumerate(by_version)],
        "traced_note": axes.TRACED_NOTE,
        "protocol_note": axes.PROTOCOL_NOTE,
        "connection_note": axes.CONNECTION_NOTE,
        "versions_rps": versions.rps_words(view),
    }
    flames = []
    for i, point in enumerate(view.flames):
        owner = view.stacks.get(point.stack_key)
        name = owner.label if owner else point.stack_key
        label = f"{name} — {point.workload} @ {point.load_point}"
        fig = flame.icicle(point, label)
        if fig is not None:
            figs[f"flame-{i}"] = fig
        flames.append({"fig": f"flame-{i}" if fig is not None else None, "label": label})
    flame_table = flame.breakdown_rows(view, view.flames)
    mixes = endpoints.table_rows(view)
    for i, (mixed, mix) in enumerate(zip(view.mixes, mixes, strict=True)):
        figs[f"mix-{i}"] = endpoints.latency_figure(mixed, mix["title"])
        mix["fig"] = f"mix-{i}"
    stacks_env = [(s, _environment_rows(s)) for s in view.stacks.values()]
    failures = tables.failures_table(view)
    return {
        "view": view,
        "workloads": workloads,
        "cells": cells,
        "failures": failures,
        "axes": study_axes,
        "stacks_env": stacks_env,
        "gen_bound": view.generator_bound_points,
        "knees": knee_context(view.knees, figs),
        "flames": flames,
        "flame_rows": flame_table,
        "flame_columns": CATEGORIES,
        "mixes": mixes,
        "mix_columns": endpoints.COLUMNS,
        "mix_note": endpoints.NOTE,
        "pooled_columns": pooled.COLUMNS,
        "data_json": safe_json({"figures": figs}),
    }


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["rate"] = fmt.rate
    env.filters["mib"] = fmt.mib
    env.filters["seconds"] = fmt.seconds
    env.globals["flag_help"] = flags.flag_help
    env.globals["short_note"] = flags.short_note
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
    return env


def render_html(view: ReportView) -> str:
    """The whole report page as a string."""
    env = _environment()
    template = env.get_template("report.html.j2")
    css = (TEMPLATES / "report.css").read_text(encoding="utf-8")
    js = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    return template.render(
        **build_context(view),
        css=css,
        app_js=js,
        plotly_js=plotly_js(),
    )


def write_html(view: ReportView, path: str | Path) -> Path:
    """Render the report and write it to ``path`` (parent directories are created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(view), encoding="utf-8")
    return out
