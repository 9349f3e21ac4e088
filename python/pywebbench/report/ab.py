"""The A/B section of a report: each ``pywebbench ab`` run's paired ratio (docs/ab.md).

An A/B run's two sides are cells like any run's and are drawn as such; what only the pairing
gives (the ratio CHANGE/BASE with its CI, the verdict, how the run stopped) is in this
section. Studies without an A/B run have none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pywebbench import formatting as fmt
from pywebbench.analysis.group import Interval
from pywebbench.store.model import Cell, Study


@dataclass(frozen=True)
class AbRow:
    """One A/B run as the report shows it."""

    run_id: str
    base: str
    change: str
    ratio: str  # "0.970x [0.962, 0.978]" or "–"
    verdict: str
    stopped: str  # "CI reached +-0.84% (asked +-1.00%)" / "budget ended at +-1.6%"
    rounds: str  # "42 of 44 kept"
    #: ``--instructions``: "+0.46%" CHANGE/BASE per request, the reason a side was not
    #: counted, or "–" when the run did not count.
    instructions: str = "–"


def instructions_change(summary_json: str | None) -> str:
    """The A/B row's instructions cell from the stored JSON document: CHANGE/BASE as a
    change ("+0.46%"; "+3.1% [+2.9%, +3.3%]" with the CI of several counts a side), why a
    side was not counted, or "–" when the run did not count."""
    doc = (json.loads(summary_json) if summary_json else {}).get("instructions")
    if not doc:
        return fmt.MISSING
    if doc.get("ratio") is not None:
        change = fmt.change(doc["ratio"] - 1)
        low, high = doc.get("ci_low"), doc.get("ci_high")
        if low is not None and high is not None:
            change += f" [{fmt.change(low - 1)}, {fmt.change(high - 1)}]"
        return change
    for role in ("base", "change"):
        counts = doc.get(role) or [{}]
        for side in counts if isinstance(counts, list) else [counts]:
            if side.get("per_request") is None:
                return f"not counted ({role.upper()}: {side.get('error') or 'no count'})"
    return "–"


def _timed_half_width(summary_json: str | None) -> float | None:
    """The half-width of the time ratio the stop rule judged (the stored ratio may be the
    instructions figure's), from the stored JSON document."""
    doc = json.loads(summary_json) if summary_json else {}
    half = doc.get("timed_ci_half_width")
    return float(half) if half is not None else None


def _label(cell: Cell | None, stacks: dict[int | None, str]) -> str:
    if cell is None:
        return "?"
    return f"{stacks.get(cell.stack_id, '?')} {cell.workload} {cell.load_point}"


def ab_rows(study: Study) -> list[AbRow]:
    """The A/B rows of ``study`` (empty without an A/B run)."""
    cells = {c.id: c for c in study.cells}
    stacks: dict[int | None, str] = {s.id: s.key for s in study.stacks}
    out = []
    for row in study.ab_comparisons:
        base, change = cells.get(row.base_cell_id), cells.get(row.change_cell_id)
        half = _timed_half_width(row.summary_json)
        if half is None and row.ratio and row.ci_low is not None and row.ci_high is not None:
            # stored before the document said: the judged figure was the timed one
            half = Interval(row.ratio, row.ci_low, row.ci_high).half_width
        width = fmt.half_width(half) if half is not None else "no CI"
        stopped = {
            "ci": f"CI reached {width} (asked {fmt.half_width(row.ci_width_asked)})",
            "budget": f"budget ended at {width} (asked {fmt.half_width(row.ci_width_asked)})",
        }.get(row.stopped, f"interrupted at {width}")
        out.append(
            AbRow(
                run_id=row.run_id,
                base=_label(base, stacks),
                change=_label(change, stacks),
                ratio=fmt.ratio_ci(row.ratio, row.ci_low, row.ci_high, "no interval"),
                verdict=row.verdict,
                stopped=stopped,
                rounds=f"{row.rounds_kept} of {row.rounds} kept",
                instructions=instructions_change(row.summary_json),
            )
        )
    return out


def markdown_lines(rows: list[AbRow], text: Callable[[str], str]) -> list[str]:
    """The Markdown section (``text`` escapes a table cell); none without A/B runs."""
    if not rows:
        return []
    out = [
        "## A/B",
        "",
        "Interleaved A/B runs (`pywebbench ab`, docs/ab.md): CHANGE/BASE of the judged figure "
        "(requests/s, or per server CPU-second with --figure cpu, from slices paired within "
        "rounds; requests per instruction with --figure instructions, from the counts), "
        "with its CI; instructions/request CHANGE/BASE where the run counted them "
        "(--instructions). The stopped column is the timed run's.",
        "",
        "| run | BASE | CHANGE | ratio | instructions/request | verdict | stopped | rounds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r.run_id, r.base, r.change, r.ratio, r.instructions, r.verdict, r.stopped]
        cells.append(r.rounds)
        out.append("| " + " | ".join(text(c) for c in cells) + " |")
    return out + [""]
