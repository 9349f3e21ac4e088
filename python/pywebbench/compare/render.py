"""Lay a :class:`~pywebbench.compare.Comparison` out: terminal table, Markdown, JSON.

Every layout shows the same rows (:func:`rows`): per pair the requests/s ratio with its CI,
the p50 and p99 latency ratios, the server's CPU per request ratio, the peak-memory change
and the verdict; then, for pairs that ran a mix, the endpoint whose latency grew most
(:func:`endpoints_text`), the cells set aside (unmatched, incomplete) and the gate's outcome.
The HTML page is in :mod:`pywebbench.compare.html`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pywebbench import formatting as fmt
from pywebbench.analysis.ratio import RatioEstimate
from pywebbench.compare import Comparison
from pywebbench.compare.endpoints import EndpointChange, grew_most, grew_most_doc
from pywebbench.compare.verdict import FASTER, PairComparison
from pywebbench.mdtext import md_text


def fmt_memory(c: PairComparison) -> str:
    """``+12.3 MiB (+8.0%)``; ``–`` when either side has no figure."""
    if c.memory_change_bytes is None or c.memory_ratio is None:
        return fmt.MISSING
    return f"{fmt.size_change(c.memory_change_bytes)} ({fmt.change(c.memory_ratio - 1)})"


def fmt_instructions(c: PairComparison) -> str:
    """``+0.50% [+0.49%, +0.51%]``: NEW/BASE instructions per request and the range of its
    counts; ``–`` without counts on both sides."""
    if c.instructions is None:
        return fmt.MISSING
    ratio, low, high = (fmt.change(x - 1) for x in c.instructions)
    return f"{ratio} [{low}, {high}]"


def counted(result: Comparison) -> bool:
    """True when some pair has instruction counts on both sides (then they are shown)."""
    return any(c.instructions is not None for c in result.comparisons)


def _estimate_doc(est: RatioEstimate | None) -> dict[str, float | None] | None:
    if est is None:
        return None
    return {  # no interval (1 replicate): null bounds, as JSON has no NaN
        "ratio": est.ratio,
        "ci_low": None if math.isnan(est.low) else est.low,
        "ci_high": None if math.isnan(est.high) else est.high,
        "base_median": est.base_median,
        "new_median": est.new_median,
    }


def verdict_class(verdict: str) -> str:
    """A CSS/badge class for a verdict: good, bad or info."""
    if verdict in (FASTER, "recovered"):
        return "good"
    if verdict in ("slower", "failed", "failed in both", "interfered"):
        return "bad"
    return "info"


def rows(result: Comparison) -> list[dict[str, str]]:
    """One row of display strings per pair."""
    out = []
    for c in result.comparisons:
        out.append(
            {
                "cell": c.label,
                "req/s": fmt.estimate(c.rps),
                "p50": fmt.estimate(c.p50),
                "p99": fmt.estimate(c.p99),
                "CPU/req": fmt.estimate(c.cpu),
                "peak RSS": fmt_memory(c),
                "instructions": fmt_instructions(c),
                "verdict": c.verdict,
                "differs": "; ".join(c.pair.differences),
            }
        )
    return out


def grown_text(c: PairComparison) -> str:
    """ "CPU/request 1.10 -> 2.90 ms (2.610×, measured iterations); changed most: fib 2.620×
    (+1.8 ms), ..." (the functions from the sampled windows)"""
    parts = []
    if c.cpu is not None:
        base, new = c.cpu.base_median, c.cpu.new_median
        parts.append(
            f"CPU/request {fmt.latency_ms(base * 1e3)} -> {fmt.latency_ms(new * 1e3)} ms "
            f"({fmt.ratio(c.cpu.ratio)}, measured iterations)"
        )
    moved = []
    for g in c.grown[:3]:
        ratio = fmt.ratio(g.ratio) if g.ratio is not None else "new"
        moved.append(f"{g.function} {ratio} ({g.delta_s * 1e3:+.3g} ms)")
    return "; ".join([*parts, "changed most: " + ", ".join(moved)])


def endpoints_text(changes: list[EndpointChange]) -> str | None:
    """One line naming the endpoint of a mix whose latency grew most, and the others' p50
    ratios: ``endpoint GET /search got slower (its p50 grew most): p50 3.100× [2.900, 3.300],
    p99 2.410× [...]; others' p50: GET / 1.050×, ...``; None without endpoints."""
    if not changes:
        return None
    top = grew_most(changes)
    rest = changes[1:] if top is not None else changes
    others = ", ".join(f"{c.name} {fmt.ratio(c.p50.ratio)}" for c in rest)
    if top is None:
        return f"no endpoint's p50 grew; endpoints' p50: {others}"
    said = "got slower (its p50 grew most)" if top.slower else "grew most (p50)"
    line = f"endpoint {top.name} {said}: p50 {fmt.estimate(top.p50)}, p99 {fmt.estimate(top.p99)}"
    return line + (f"; others' p50: {others}" if others else "")


def notes(result: Comparison) -> list[str]:
    """Lines under the table: method, set-aside cells, gate outcome."""
    lines = [
        f"BASE {result.base.id} ({result.base.status}) vs NEW {result.new.id} "
        f"({result.new.status}); ratios NEW/BASE of medians, "
        f"{result.level * 100:g}% CI over replicates (Welch's t below 10 a side, else "
        "two-level bootstrap); "
        f"verdict needs the CI to exclude 1 and a change of at least "
        f"{result.min_change * 100:g}%"
        + (f"; varying: {', '.join(result.vary)}" if result.vary else "")
    ]
    for c in result.comparisons:
        if c.grown and c.significant:
            lines.append(f"{c.label}: {grown_text(c)}")
        mix = endpoints_text(c.endpoints)
        if mix is not None:
            lines.append(f"{c.label}: {mix}")
    for u in result.unmatched:
        lines.append(f"unmatched {u.side.upper()} cell {u.cell.label}: {u.reason}")
    for fig in result.incomplete:
        side = "BASE" if fig.run_id == result.base.id else "NEW"
        lines.append(f"incomplete {side} cell {fig.label} ({fig.cell.status}): not compared")
    if result.rules:
        rules = ", ".join(r.text for r in result.rules)
        if result.violations:
            for v in result.violations:
                lines.append(f"GATE FAILED [{v.rule}] {v.label}: {v.detail}")
        else:
            lines.append(f"gate passed ({rules})")
    return lines


def to_json(result: Comparison) -> str:
    """The comparison as a JSON document (``format: pywebbench-compare``)."""
    doc: dict[str, Any] = {
        "format": "pywebbench-compare",
        "base": result.base.id,
        "new": result.new.id,
        "vary": result.vary,
        "level": result.level,
        "min_change": result.min_change,
        "cells": [
            {
                "cell": c.label,
                "base_cell": c.pair.base.label,
                "stack": c.pair.new.stack.key,
                "workload": c.pair.new.cell.workload,
                "load_point": c.pair.new.cell.load_point,
                "verdict": c.verdict,
                "differs": c.pair.differences,
                "rps": _estimate_doc(c.rps),
                "p50": _estimate_doc(c.p50),
                "p99": _estimate_doc(c.p99),
                "peak_rss_change_bytes": c.memory_change_bytes,
                "peak_rss_ratio": c.memory_ratio,
                "instructions": (
                    dict(zip(("ratio", "low", "high"), c.instructions, strict=True))
                    if c.instructions is not None
                    else None
                ),
                "errors": {"base": c.pair.base.errors, "new": c.pair.new.errors},
                "cpu_per_request": _estimate_doc(c.cpu),
                "cpu_per_request_s": [c.cpu.base_median, c.cpu.new_median] if c.cpu else None,
                "cpu_at_one_speed": c.cpu_at_one_speed,
                "grown": [
                    {"function": g.function, "base_s": g.base_s, "new_s": g.new_s} for g in c.grown
                ],
                "endpoints": [
                    {"name": e.name, "p50": _estimate_doc(e.p50), "p99": _estimate_doc(e.p99)}
                    for e in c.endpoints
                ],
                "endpoint_grew_most": grew_most_doc(c.endpoints),
            }
            for c in result.comparisons
        ],
        "unmatched": [
            {"side": u.side, "cell": u.cell.label, "reason": u.reason} for u in result.unmatched
        ],
        "incomplete": [
            {"run": f.run_id, "cell": f.label, "status": f.cell.status} for f in result.incomplete
        ],
        "gate": {
            "rules": [r.text for r in result.rules],
            "passed": not result.violations,
            "violations": [
                {"cell": v.label, "rule": v.rule, "detail": v.detail} for v in result.violations
            ],
        },
    }
    return json.dumps(doc, indent=1)


def to_markdown(result: Comparison) -> str:
    """A Markdown table and notes, ready for a pull-request comment."""
    table = rows(result)
    header = ["cell", "req/s", "p50", "p99", "CPU/req", "peak RSS", "verdict"]
    if counted(result):
        header.insert(-1, "instructions")
    lines = [
        f"## pywebbench compare: {result.base.id} → {result.new.id}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 2) + ["---"]) + "|",
    ]
    for row in table:
        cells = [md_text(row[h]) for h in header]
        if row["differs"]:
            cells[0] += f" ({md_text(row['differs'])})"
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {md_text(n)}" for n in notes(result)]
    return "\n".join(lines) + "\n"


def print_table(result: Comparison) -> None:
    """The comparison as a rich table on standard output, notes below it."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if not console.is_terminal:
        console = Console(width=180)
    styles = {"good": "green", "bad": "bold red", "info": ""}
    table = Table(title=f"{result.base.id} -> {result.new.id}", title_justify="left")
    shown = counted(result)
    columns = ["cell", "req/s NEW/BASE", "p50", "p99", "CPU/req", "peak RSS", "verdict"]
    if shown:
        columns.insert(-1, "instructions")
    for col in columns:
        table.add_column(col, justify="left" if col in ("cell", "verdict") else "right")
    for c, row in zip(result.comparisons, rows(result), strict=True):
        cell = Text(row["cell"])
        if row["differs"]:
            cell.append("\n" + row["differs"], style="dim")
        table.add_row(
            cell,
            row["req/s"],
            row["p50"],
            row["p99"],
            row["CPU/req"],
            row["peak RSS"],
            *([row["instructions"]] if shown else []),
            Text(row["verdict"], style=styles[verdict_class(c.verdict)]),
        )
    console.print(table)
    for line in notes(result):
        console.print(Text(line))
