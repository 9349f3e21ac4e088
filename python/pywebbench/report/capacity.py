"""Capacity and cost: what each stack would take to serve a target load (docs/capacity.md).

This module holds the target, the rows and their Markdown; :mod:`pywebbench.report.sizing`
computes the rows from a report's view.

For a target (requests/s, optionally a latency SLO such as ``p99=50ms`` and prices per
core-hour and per GiB-hour), each stack's row says how many copies of the measured setup
(its server cores and workers) the target needs, their cores, workers and memory, and the
cost per hour and per million requests:

    per copy    = the knee under an SLO at least as strict as the target's, where the study
                  searched one; else the best closed-loop requests/s (caveat: closed-loop
                  latency is latency under overload, so no latency target was checked)
    copies      = ceil(target rps / per copy)
    cores       = copies x the server cores of the study (workers likewise)
    memory      = copies x the peak RSS of the server's process tree (GiB)
    cost / hour = cores x price per core-hour + memory x price per GiB-hour
    per million = cost per hour / (target rps x 3600) x 1,000,000

The assumption behind ``copies``: throughput scales linearly with copies of the setup (more
processes or machines of the same shape). It is printed beside the figures; where the study
measured several worker counts of a stack, each count has its own row, so the scaling it saw
can be read off them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pywebbench import formatting as fmt
from pywebbench.mdtext import md_text
from pywebbench.store.model import Study
from pywebbench.study.slo import Slo, SloError, parse_slo

MIB_PER_GIB = 1024.0


@dataclass(frozen=True)
class CapacityTarget:
    """The load to plan for, and the prices (None: no cost figures)."""

    rps: float
    slo: Slo | None = None
    core_hour: float | None = None
    gib_hour: float | None = None

    def __post_init__(self) -> None:
        if not (self.rps > 0 and math.isfinite(self.rps)):
            raise ValueError("rps: the target must be a positive number of requests/s")
        for name in ("core_hour", "gib_hour"):
            price = getattr(self, name)
            if price is not None and not (price >= 0 and math.isfinite(price)):
                raise ValueError(f"{name}: a price must be a number >= 0")

    @property
    def label(self) -> str:
        """ "10,000 req/s at p99=50ms" """
        return f"{fmt.rate(self.rps)} req/s" + (f" at {self.slo}" if self.slo else "")


def parse_target(text: str) -> CapacityTarget:
    """``rps=10000,slo=p99=50ms,core_hour=0.04,gib_hour=0.005`` (only ``rps`` required).
    Raises ValueError naming the key."""
    values: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or key not in ("rps", "slo", "core_hour", "gib_hour"):
            raise ValueError(
                f"{part!r}: expected key=value with key rps, slo, core_hour or gib_hour"
            )
        values[key] = value
    if "rps" not in values:
        raise ValueError("rps: the target needs requests/s (rps=10000)")

    def number(key: str) -> float | None:
        if key not in values:
            return None
        try:
            return float(values[key])
        except ValueError:
            raise ValueError(f"{key}: {values[key]!r} is not a number") from None

    try:
        slo = parse_slo(values["slo"]) if "slo" in values else None
    except SloError as exc:
        raise ValueError(f"slo: {exc}") from None
    rps = number("rps")
    assert rps is not None
    return CapacityTarget(rps, slo, number("core_hour"), number("gib_hour"))


def server_cores(study: Study) -> int:
    """The server cores of the study's setup (the most any of its runs pinned)."""
    return max((len(r.server_cpus) for r in study.runs), default=1) or 1


@dataclass(frozen=True)
class CapacityView:
    """The capacity section of a report."""

    target: CapacityTarget
    rows: list[CapacityRow]

    @property
    def assumptions(self) -> list[str]:
        return assumptions(self.target, self.rows)


@dataclass(frozen=True)
class CapacityRow:
    """One stack's needs for the target, on one workload."""

    stack_key: str
    label: str
    workload: str
    basis: str  # "knee p99=20ms" or "closed loop c64"
    slo_checked: bool  # False: closed-loop figure, no latency target measured
    per_copy_rps: float
    copy_cores: int
    copy_workers: int
    copies: int
    cores: int
    workers: int
    memory_gib: float | None
    cost_per_hour: float | None
    cost_per_million: float | None


def cost_per_hour(target: CapacityTarget, cores: int, memory_gib: float | None) -> float | None:
    if target.core_hour is None and target.gib_hour is None:
        return None
    cost = cores * (target.core_hour or 0.0)
    if target.gib_hour:
        if memory_gib is None:
            return None  # memory was not metered: the cost cannot be told
        cost += memory_gib * target.gib_hour
    return cost


def assumptions(target: CapacityTarget, rows: Sequence[CapacityRow]) -> list[str]:
    """The assumptions behind the figures, one sentence each, printed beside them."""
    out = [
        "Copies of the measured setup (its server cores and workers) scale linearly: "
        "an assumption, not a measurement.",
        "Memory is the peak RSS of one copy's whole server process tree.",
    ]
    if any(not r.slo_checked for r in rows):
        out.append(
            "Rows based on a closed-loop figure checked no latency target: closed-loop p99 "
            "is latency under overload. Run the study with `--slo "
            + (str(target.slo) if target.slo else "p99=50ms")
            + "` to size on the knee instead."
        )
    if target.core_hour is not None or target.gib_hour is not None:
        out.append(
            f"Prices: {target.core_hour or 0:g} per core-hour, {target.gib_hour or 0:g} per "
            "GiB-hour; cost per million requests at the target rate, running all hour."
        )
    return out


def markdown_lines(target: CapacityTarget, rows: Sequence[CapacityRow]) -> list[str]:
    """The capacity section as Markdown: a table per workload, then the assumptions."""
    out = [f"## Capacity for {md_text(target.label)}", ""]
    if not rows:
        return [*out, "No stack has a figure to size on.", ""]
    cost = any(r.cost_per_hour is not None for r in rows)
    head = list(COLUMNS if cost else COLUMNS[:-2])
    for workload in dict.fromkeys(r.workload for r in rows):
        out += [f"### {md_text(workload)}", ""]
        out.append("| " + " | ".join(head) + " |")
        out.append("|---|---|" + "---:|" * (len(head) - 2))
        for r in (r for r in rows if r.workload == workload):
            cells = row_cells(r, priced=cost)
            cells[:2] = [md_text(cells[0]), md_text(cells[1])]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += [f"- {md_text(a)}" for a in assumptions(target, rows)]
    return [*out, ""]


#: The columns of a capacity table, in order (the last two only with prices).
COLUMNS = (
    "stack",
    "based on",
    "per copy req/s",
    "copies",
    "cores",
    "workers",
    "memory GiB",
    "cost/hour",
    "cost per 1M req",
)


def row_cells(r: CapacityRow, *, priced: bool) -> list[str]:
    """A row as the text of :data:`COLUMNS` (without the costs unless ``priced``)."""
    cells = [
        r.label,
        r.basis + ("" if r.slo_checked else " (no SLO checked)"),
        fmt.rate(r.per_copy_rps),
        f"{r.copies:,}",
        f"{r.cores:,}",
        f"{r.workers:,}",
        f"{r.memory_gib:,.2f}" if r.memory_gib is not None else "–",
    ]
    return cells + ([money(r.cost_per_hour), money(r.cost_per_million, 4)] if priced else [])


def money(x: float | None, digits: int = 2) -> str:
    """A cost with ``digits`` decimals, or a dash where it cannot be told."""
    return f"{x:,.{digits}f}" if x is not None else "–"
