"""The Markdown summary: per-workload rankings as tables ready to paste into a README or post.

Numbers come from the same :class:`pywebbench.report.tables.Table` objects as the HTML report,
with the same rounding rules (docs/report.md).
"""

from __future__ import annotations

from pathlib import Path

from pywebbench.mdtext import md_code, md_text
from pywebbench.report import (
    ab,
    axes,
    capacity,
    endpoints,
    flags,
    flame,
    nodes,
    pooled,
    robustness_curve,
    tables,
)
from pywebbench.report.instructions import COUNTED_NOTE, instructions_table
from pywebbench.report.knee import markdown_lines
from pywebbench.report.view import ReportView, WorkloadView

# Columns of the ranking in the Markdown table (the HTML adds "vs slowest").
MD_COLUMNS = [
    "rank",
    "stack",
    "load",
    "rps",
    "ci",
    "vs_above",
    "vs_best",
    "p50",
    "p99",
    "rss",
    "per_cpu",
    "errors",
]


def _table(table: tables.Table, keys: list[str]) -> list[str]:
    cols = [c for c in table.columns if c.key in keys]
    lines = [
        "| " + " | ".join(md_text(c.label) for c in cols) + " |",
        "|" + "|".join("---:" if c.numeric else "---" for c in cols) + "|",
    ]
    for row in table.rows:
        lines.append("| " + " | ".join(md_text(row.cells[c.key].text) for c in cols) + " |")
    return lines


def _robustness(view: ReportView, w: WorkloadView) -> list[str]:
    """The workload's robustness table and the malformed requests accepted (docs/faults.md)."""
    table = tables.robustness_table(view, w)
    if table is None:
        return []
    out = [
        f"### {md_text(w.name)}: robustness under faults",
        "",
        f"Fault mix `{tables.fault_mixes(w)}` beside the good clients (docs/faults.md).",
        "",
    ]
    out += _table(table, [c.key for c in table.columns])
    out.append("")
    out += robustness_curve.markdown_lines(view, w)
    findings = tables.findings_table(view, w)
    if findings is None:
        out += ["No malformed request was accepted.", ""]
        return out
    out += ["Malformed requests accepted (answered as valid, or a smuggled request answered):", ""]
    for row in findings.rows:
        c = row.cells
        out.append(
            f"- **{md_text(c['stack'].text)}** ({md_text(c['load'].text)}): "
            f"`{c['kind'].text}` {md_text(c['what'].text)}, {c['count'].text}× status "
            f"{c['status'].text}; sent {md_code(c['request'].text)}, answer "
            f"{md_code(c['response'].text)}"
        )
    out.append("")
    return out


def _memory(w: WorkloadView) -> list[str]:
    """The workload's memory table (each stack at its best load point)."""
    table = tables.memory_table(w.ranking("peak"))
    if table is None:
        return []
    out = [
        f"### {md_text(w.name)}: memory",
        "",
        "RSS of the server's process tree (MiB, medians over replicates) at startup, after the"
        " warm-up and at the end; growth once steady in KiB per 1,000 requests (Theil-Sen,"
        " 95% CI).",
        "",
    ]
    return out + _table(table, [c.key for c in table.columns]) + [""]


def _steady(view: ReportView) -> list[str]:
    """The steady-state method of each run (its fairness manifest entry)."""
    out = []
    for run in view.runs:
        if run.steady:
            items = ", ".join(f"{k} = {v}" for k, v in run.steady)
            out.append(f"Steady state (run `{run.id}`): {md_text(items)}.")
        speed = dict(run.host).get("core speed")
        if speed:
            out.append(f"Core speed (run `{run.id}`): {md_text(speed)}.")
    return out + [""] if out else []


def _axes(view: ReportView) -> list[str]:
    """The study axes: syscalls and instructions per request, keep-alive vs close, HTTP/1.1
    vs h2c, worker recycling."""
    out: list[str] = []
    sections = [
        ("Syscalls per request", axes.syscalls_table(view), axes.TRACED_NOTE),
        ("Instructions per request", instructions_table(view), COUNTED_NOTE),
        (
            "Keep-alive against reconnecting",
            axes.connection_table(view),
            axes.CONNECTION_NOTE,
        ),
        ("HTTP/1.1 against h2c", axes.protocol_table(view), axes.PROTOCOL_NOTE),
        (
            "Worker recycling",
            axes.recycling_table(view),
            "Requests/s and latency against the requests a worker serves before it is "
            "replaced; workers replaced: new processes seen in one measured iteration (at least).",
        ),
    ]
    for title, table, note in sections:
        if table is not None:
            out += [f"## {title}", "", md_text(note), ""]
            out += _table(table, [c.key for c in table.columns]) + [""]
    return out


def render_markdown(view: ReportView) -> str:
    """The whole Markdown summary as a string."""
    out = [f"# {md_text(view.title)}", ""]
    if view.runs:
        run = view.runs[0]
        host = "; ".join(f"{k}: {v}" for k, v in run.host[:4])
        ids = ", ".join(f"`{r.id}`" for r in view.runs)
        out += [f"Runs {ids}. {md_text(host)}.", ""]
    for w in view.workloads:
        ranking = w.ranking("peak")
        out += [f"## {md_text(w.name)}", ""]
        if tables.is_websocket(w.name):
            out += [md_text(tables.WS_NOTE), ""]
        h = tables.headline(ranking)
        if h:
            line = f"**{md_text(h['best'])}** is fastest: **{h['rps']} req/s** at {h['load']}"
            if "second" in h:
                ci = f", {h['vs_second_ci']}" if h["vs_second_ci"] else ""
                tie = "; a tie: the CI contains 1" if h["tied"] else ""
                line += f", {h['vs_second']} the runner-up ({md_text(h['second'])}{ci}{tie})"
            if "worst" in h:
                line += f" and {h['vs_worst']} the slowest ({md_text(h['worst'])})"
            out += [line + ".", ""]
        keys = list(MD_COLUMNS)
        if view.has_robustness:
            keys.append("robustness")
        keys.append("notes")
        table = tables.ranking_table(ranking, robustness=view.has_robustness)
        out += _table(table, keys)
        out.append("")
        if ranking.ranked:
            out += [md_text(tables.method_note(ranking)), ""]
        for g in tables.group_notes(ranking):
            out += [f"- {md_text(g.summary)} {md_text(g.ratios)}"]
        if out[-1] != "":
            out.append("")
        for flag, meaning in flags.legend([n for row in table.rows for n in row.notes]):
            out.append(f"- _{flag}_: {md_text(meaning)}")
        if out[-1] != "":
            out.append("")
        out += _memory(w)
        out += _robustness(view, w)
    out += pooled.markdown_lines(view.pooled, md_text)
    out += markdown_lines(view.knees, md_text)
    out += endpoints.markdown_lines(view)
    out += _axes(view)
    out += nodes.markdown_lines(view.nodes, md_text)
    out += flame.markdown_lines(view, view.flames)
    if view.capacity is not None:
        out += capacity.markdown_lines(view.capacity.target, view.capacity.rows)
    out += ab.markdown_lines(view.ab, md_text)
    if view.failures:
        out += ["## Failures", ""]
        out += _table(
            tables.failures_table(view),
            ["phase", "stack", "workload", "load", "replicate", "reason"],
        )
        out.append("")
    out += [
        "Each stack at its best load point; under each ranking, how its figures were made."
        " Latency in ms, peak RSS in MiB. Rounding rules: docs/report.md.",
        "",
        *_steady(view),
        f"_Generated {view.generated_at} by pywebbench {view.pywebbench_version}._",
        "",
    ]
    return "\n".join(out)


def write_markdown(view: ReportView, path: str | Path) -> Path:
    """Render the summary and write it to ``path``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_markdown(view), encoding="utf-8")
    return out
