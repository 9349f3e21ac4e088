"""The knee under a latency SLO in the report (docs/slo.md): its view, text and Markdown.

A *knee point* is one stack x workload x load point whose replicates ran a knee search
(cells of several runs pool, as everywhere in the report). Its knee is the median of the
replicates' knees with a 95% CI (:func:`pywebbench.analysis.stats.summarize`: Student's t below 10
replicates); only replicates that completed and whose search ended by itself count. Every
stored probe of those replicates is kept for the throughput-latency curve
(:mod:`pywebbench.report.figures_knee`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from pywebbench import formatting as fmt
from pywebbench.analysis.stats import Summary, summarize
from pywebbench.store.model import Cell, Study


@dataclass(frozen=True)
class ProbePoint:
    """One probe on the curve."""

    replicate: int  # numbered across the pooled cells, 0-based
    offered: float
    achieved: float
    latency_ms: float
    verdict: str
    samples: int
    errors: int
    schedule_lag_ms: float | None = None


@dataclass
class KneeView:
    """The knee of one point and the probes behind it."""

    stack_key: str
    label: str
    workload: str
    load_point: str
    slo: str
    percentile_label: str  # "p99"
    target_ms: float
    min_samples: int
    knees: list[float] = field(default_factory=list)  # per replicate whose SLO was met
    not_met: list[float] = field(default_factory=list)  # lowest rate of the others
    ended: list[str] = field(default_factory=list)
    probes: list[ProbePoint] = field(default_factory=list)
    # Per replicate whose edge flipped: the highest rate whose probes disagreed.
    flips: list[float] = field(default_factory=list)
    repeats: int = 1  # probes per rate

    @property
    def estimate(self) -> Summary:
        """Median knee and its 95% CI over the replicates."""
        return summarize(self.knees)

    @property
    def replicates(self) -> int:
        return len(self.knees) + len(self.not_met)

    @property
    def knee_text(self) -> str:
        """``1,950 req/s`` or ``SLO not met at 10 req/s``."""
        if not self.knees:
            return f"SLO not met at {fmt.rate(min(self.not_met))} req/s"
        if self.flips:  # the edge is a range: every probe passed up to the knee, some beyond
            return f"{fmt.rate(self.estimate.median)}–{fmt.rate(max(self.flips))} req/s (flips)"
        return f"{fmt.rate(self.estimate.median)} req/s"

    @property
    def ci_text(self) -> str:
        """The CI, or why there is none (one replicate has no interval)."""
        s = self.estimate
        if s.n < 2 or math.isnan(s.ci_low):
            return f"n/a ({s.n} replicate)" if s.n else "–"
        return fmt.rate_interval(s.ci_low, s.ci_high, s.median, s.n)

    @property
    def notes(self) -> str:
        """How the searches ended, when not all by reaching the tolerance."""
        out = []
        if self.knees and self.not_met:
            out.append(
                f"SLO not met in {len(self.not_met)} of {self.replicates} replicates "
                f"(at {fmt.rate(min(self.not_met))} req/s)"
            )
        if self.flips:
            out.append(
                f"edge flips in {len(self.flips)} of {self.replicates} replicates: some of the "
                f"{self.repeats} probes of a rate met the SLO up to "
                f"{fmt.rate(max(self.flips))} req/s"
            )
        counts = {e: self.ended.count(e) for e in dict.fromkeys(self.ended) if e != "tolerance"}
        out += [f"{n}× ended by {e}" for e, n in counts.items()]
        late = sum(1 for p in self.probes if (p.schedule_lag_ms or 0) > 0.1 * self.target_ms)
        if late:
            out.append(f"{late} probes with the generator late (schedule lag p99 > 10% of target)")
        short = sum(1 for p in self.probes if p.samples < self.min_samples)
        if short:
            out.append(f"{short} probes under {self.min_samples:,} samples")
        return "; ".join(out)


def knee_views(study: Study, stack_labels: dict[int, tuple[str, str]]) -> list[KneeView]:
    """One view per point with knee rows. ``stack_labels``: stack id -> (key, label)."""
    if not study.knees:
        return []
    ok = {(r.cell_id, r.replicate) for r in study.replicates if r.status == "ok"}
    groups: dict[tuple[str, str, str], list[Cell]] = defaultdict(list)
    for c in sorted(study.cells, key=lambda c: (c.run_id, c.ordinal)):
        groups[(stack_labels[c.stack_id][0], c.workload, c.load_point)].append(c)
    views = []
    for (key, workload, load_point), cells in groups.items():
        ids = {c.id for c in cells}
        knees = [k for k in study.knees if k.cell_id in ids and (k.cell_id, k.replicate) in ok]
        if not knees:
            continue
        first = knees[0]
        view = KneeView(
            stack_key=key,
            label=stack_labels[cells[0].stack_id][1],
            workload=workload,
            load_point=load_point,
            slo=first.slo,
            percentile_label=first.slo.split("=")[0],
            target_ms=first.target_us / 1000.0,
            min_samples=first.min_samples,
            repeats=first.repeats,
        )
        number = {(k.cell_id, k.replicate): i for i, k in enumerate(knees)}
        for k in knees:
            if k.knee_rps is not None:
                view.knees.append(k.knee_rps)
            else:
                view.not_met.append(k.lowest_rps)
            view.ended.append(k.ended)
            if k.flip_rps is not None:
                view.flips.append(k.flip_rps)
        for p in study.knee_probes:
            rep = number.get((p.cell_id, p.replicate))
            if rep is not None:
                view.probes.append(
                    ProbePoint(
                        rep,
                        p.rate_offered,
                        p.rate_achieved,
                        p.latency_us / 1000.0,
                        p.verdict,
                        p.samples,
                        p.errors,
                        p.schedule_lag_p99_us / 1000 if p.schedule_lag_p99_us is not None else None,
                    )
                )
        views.append(view)
    return views


def markdown_lines(views: list[KneeView], esc: Callable[[str], str]) -> list[str]:
    """The Markdown section of the knees (``esc`` makes text safe in a table cell)."""
    if not views:
        return []
    slos = ", ".join(dict.fromkeys(v.slo for v in views))
    out = [
        f"## Maximum rate under the latency SLO ({esc(slos)})",
        "",
        "| Stack | Workload | Load | SLO | Knee req/s | 95% CI | Replicates | Probes | Notes |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    for v in views:
        cells = [
            v.label,
            v.workload,
            v.load_point,
            v.slo,
            v.knee_text,
            v.ci_text,
            str(v.replicates),
            str(len(v.probes)),
            v.notes,
        ]
        out.append("| " + " | ".join(esc(c) for c in cells) + " |")
    need = ", ".join(f"{s:,}" for s in dict.fromkeys(v.min_samples for v in views))
    out += [
        "",
        "Knee: the highest open-loop rate (constant arrivals) whose latency percentile, from the"
        " intended send time (coordinated omission corrected), met the SLO with no error in"
        " every probe of that rate; an edge whose probes disagreed is a range, up to the"
        " highest rate some probes passed (flips);"
        f" median over replicates, 95% CI (Student's t). Each probe aimed for {need} samples."
        " Method and limits: docs/slo.md.",
        "",
    ]
    return out
