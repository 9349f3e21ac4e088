"""The tables shared by the HTML and Markdown reports.

Both formats render the same :class:`Table` objects, and every number in them is written by
:mod:`pywebbench.formatting` (its rules are listed in docs/report.md), so a number reads the
same in the report, the console, ``compare`` and ``ab``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pywebbench import formatting as fmt
from pywebbench.analysis.group import APART_P
from pywebbench.analysis.modes import modes, replicate_figures
from pywebbench.analysis.ratio import ratio
from pywebbench.analysis.ties import group_id
from pywebbench.report.flags import flag_notes
from pywebbench.report.view import (
    Estimate,
    Ranking,
    RankingRow,
    ReportView,
    RobustnessView,
    StackView,
    WorkloadView,
)


def rps_interval(est: Estimate | None) -> str:
    """A median's interval, "8,512–8,690 (±1.0%)", "n/a (1 value)" without one."""
    if est is None:
        return fmt.MISSING
    return fmt.rate_interval(est.low, est.high, est.median, est.n)


def fmt_yes(ok: bool) -> str:
    """A yes/no verdict (the bad answer in capitals, to stand out)."""
    return "yes" if ok else "NO"


def _answered_after(r: RobustnessView) -> str:
    """ "yes (1.2 ms)": whether and how soon a fresh request got a 2xx after the faults."""
    text = fmt_yes(r.answered_after)
    if r.answered_after and r.recovery_s is not None:
        x = r.recovery_s
        text += f" ({fmt.latency_ms(x * 1000)} ms)" if x < 1 else f" ({fmt.seconds(x)})"
    return text


def robustness_summary(r: RobustnessView) -> str:
    """One line of the fault phase's figures (the robustness cell's tooltip)."""
    after = _answered_after(r)
    accepted = ", ".join(r.malformed_accepted) or "none"
    return (
        f"score {r.score:.1f} of 100 under fault mix {r.mix!r} · retained "
        f"{fmt.whole(r.retained_pct, '%')} of req/s ({fmt.rate(r.clean_rps)} → "
        f"{fmt.rate(r.faulted_rps)}) · p99 {fmt.latency_ms(r.p99_clean_ms)} → "
        f"{fmt.latency_ms(r.p99_faulted_ms)}"
        f" ms · good-client errors {fmt.percent(r.good_error_rate)} · survived "
        f"{fmt_yes(r.survived)} · answered normally after {after} · malformed accepted: "
        f"{accepted}"
    )


@dataclass
class Column:
    """A table column: ``key`` (stable id), ``label`` (header), ``numeric`` (right-aligned)."""

    key: str
    label: str
    numeric: bool = False
    help: str = ""


@dataclass
class TCell:
    """One table cell: the shown text and the value it sorts by."""

    text: str
    sort: float | str | None = None
    cls: str = ""
    title: str = ""  # tooltip (HTML)


@dataclass
class Row:
    """A table row; ``stack`` lets the HTML add details and the filter box match rows."""

    cells: dict[str, TCell]
    stack: StackView | None = None
    cls: str = ""
    notes: list[str] = field(default_factory=list)
    detail: str | None = None  # long text (a log tail) shown folded under the row


@dataclass
class Table:
    columns: list[Column]
    rows: list[Row]


def _num(text: str, value: float | None) -> TCell:
    return TCell(text, value if value is not None else None)


def ranking_table(ranking: Ranking, *, robustness: bool = False) -> Table:
    """The ranking of one workload: rank, stack, throughput with CI, ratios, latency, memory.
    The help of the figures' columns names the design that produced them (:func:`designs`)."""
    helps = column_help(ranking)
    columns = [
        Column("rank", "#", True),
        Column("stack", "Stack"),
        Column("load", "Load", help="load point: cN = N connections (closed loop), rN = N req/s"),
        Column("rps", "Req/s", True, helps["rps"]),
        Column("ci", "95% CI", True, helps["ci"]),
        Column("vs_above", "Gap above", True, helps["vs_above"]),
        Column("vs_best", "vs best", True, "requests/s relative to the fastest stack"),
        Column("vs_worst", "vs slowest", True, "requests/s relative to the slowest stack"),
        Column("p50", "p50 ms", True, "median latency, merged histogram"),
        Column("p99", "p99 ms", True, "99th percentile latency, merged histogram"),
        Column("rss", "Peak RSS MiB", True, "peak RSS of the server's whole process tree"),
        Column("per_cpu", "Req/CPU-s", True, "requests per second of server CPU time"),
        Column("errors", "Errors", True, "transport errors and non-2xx responses"),
    ]
    if robustness:
        columns.append(
            Column(
                "robustness",
                "Robustness",
                True,
                "robustness score 0-100 under the fault mix (docs/faults.md); hover a value for "
                "retained req/s, p99, survival and malformed requests accepted",
            )
        )
    columns.append(Column("notes", "Notes"))
    rows = [_ranking_row(r, robustness) for r in ranking.rows]
    return Table(columns, rows)


def _ranking_row(r: RankingRow, robustness: bool) -> Row:
    p = r.point
    consistency = modes(replicate_figures(p.rps_by_replicate))
    classes = Counter(w.warmup_class for w in p.warmups if w.warmup_class)
    notes = flag_notes(
        {
            "not_steady": p.not_steady,
            "drift": p.drift,
            "leak": p.leak,
            "leak_bytes_per_1k": (p.leak_kb_per_1k or math.nan) * 1024,
            "interfered": p.interfered,
            "remeasured": p.remeasured,
            "inconsistent": not consistency.consistent,
            "modes": consistency.to_list(),
            "classes": dict(sorted(classes.items())),
            "per_cell": p.per_cell,
        },
        generator_bound=p.generator_bound,
    )
    if r.tied and r.rank:
        notes.append(f"tied with #{r.rank - 1}")
    if p.failure is not None:
        notes.append(f"failed in {p.failure.phase}: {p.failure.reason}")
    rob = p.robustness_detail
    if robustness and rob is not None:
        if not rob.survived:
            notes.append("died under faults")
        if rob.malformed_accepted:
            notes.append("accepted malformed: " + ", ".join(rob.malformed_accepted))
    rps = p.rps
    vs = r.vs_above
    above = fmt.estimate(vs, vs.why) if vs else fmt.MISSING
    cells = {
        "rank": TCell(
            fmt.rank(r.rank, r.tied) if r.rank else fmt.MISSING,
            r.rank if r.rank else 1e9,
            title=f"tied: #{r.rank - 1} is {above}" if r.tied and r.rank else "",
        ),
        "stack": TCell(r.stack.label, r.stack.label),
        "load": TCell(p.load_point, p.load_sort),
        "rps": _num(fmt.rate(rps.median) if rps else fmt.MISSING, rps.median if rps else None),
        "ci": TCell(
            rps_interval(rps),
            (rps.high - rps.low) if rps and rps.n > 1 and not math.isnan(rps.low) else None,
        ),
        "vs_above": TCell(
            above,
            r.vs_above.ratio if r.vs_above else None,
            "tie" if r.tied else "",
        ),
        "vs_best": _num(fmt.ratio(r.vs_best), r.vs_best),
        "vs_worst": _num(fmt.ratio(r.vs_worst), r.vs_worst),
        "p50": _num(fmt.latency_ms(p.p50_ms), p.p50_ms),
        "p99": _num(fmt.latency_ms(p.p99_ms), p.p99_ms),
        "rss": _num(fmt.mib(p.peak_rss_mib), p.peak_rss_mib),
        "per_cpu": _num(fmt.rate(p.rps_per_cpu_s), p.rps_per_cpu_s),
        "errors": _num(fmt.percent(p.error_rate), p.error_rate),
        "notes": TCell("; ".join(notes), "; ".join(notes)),
    }
    if robustness:
        cells["robustness"] = TCell(
            fmt.whole(p.robustness),
            p.robustness,
            title=robustness_summary(rob) if rob is not None else "",
        )
    cls = "failed" if r.rank is None else ("best" if r.rank == 1 else "")
    return Row(cells, r.stack, cls, notes)


def _range(low: str, high: str, negative: bool) -> str:
    """ "4–23", or "-127 to -3.8" when a bound is negative (a dash would read as a minus)."""
    return f"{low} to {high}" if negative else f"{low}–{high}"


def memory_table(ranking: Ranking) -> Table | None:
    """Memory of each ranked stack: startup, after warm-up, end, and the leak slope."""
    columns = [
        Column("stack", "Stack"),
        Column("load", "Load"),
        Column("startup", "Startup MiB", True, "idle RSS of the process tree before any load"),
        Column("warm", "After warm-up MiB", True, "RSS at the end of the warm-up iteration"),
        Column("end", "End MiB", True, "RSS at the end of the last measured iteration"),
        Column("peak", "Peak MiB", True, "highest RSS over every iteration"),
        Column(
            "leak",
            "Growth KiB/1k req",
            True,
            "Theil-Sen slope of RSS on requests served once steady, KiB per 1,000 requests "
            "(median over replicates)",
        ),
        Column("leak_ci", "95% CI", True, "lowest..highest bound of the replicates' Sen CIs"),
        Column("notes", "Notes"),
    ]
    rows = []
    for r in ranking.ranked:
        p, m = r.point, r.point.memory
        ci = m.leak_ci_kb
        notes = ["leak"] if p.leak else []
        cells = {
            "stack": TCell(r.stack.label, r.stack.label),
            "load": TCell(p.load_point, p.load_sort),
            "startup": _num(fmt.mib(m.startup_mib), m.startup_mib),
            "warm": _num(fmt.mib(m.warm_mib), m.warm_mib),
            "end": _num(fmt.mib(m.end_mib), m.end_mib),
            "peak": _num(fmt.mib(p.peak_rss_mib), p.peak_rss_mib),
            "leak": _num(fmt.kib(m.leak_kb_per_1k), m.leak_kb_per_1k),
            "leak_ci": TCell(
                _range(fmt.kib(ci[0]), fmt.kib(ci[1]), ci[0] < 0) if ci else fmt.MISSING,
                (ci[1] - ci[0]) if ci else None,
            ),
            "notes": TCell("; ".join(notes), "; ".join(notes)),
        }
        rows.append(Row(cells, r.stack, "", notes))
    if not any(
        r.point.memory.startup_mib is not None or r.point.memory.end_mib is not None
        for r in ranking.ranked
    ):
        return None
    return Table(columns, rows)


def robustness_table(view: ReportView, workload: WorkloadView) -> Table | None:
    """Every load point of ``workload`` measured under faults, best score first (None if none)."""
    points = [p for p in workload.points if p.robustness_detail is not None]
    if not points:
        return None
    columns = [
        Column("stack", "Stack"),
        Column("load", "Load"),
        Column("score", "Score", True, "robustness score 0-100 (docs/faults.md)"),
        Column("retained", "Retained", True, "good-client req/s under faults / clean req/s"),
        Column("clean_rps", "Clean req/s", True, "good clients alone"),
        Column("faulted_rps", "Faulted req/s", True, "good clients beside the fault clients"),
        Column("p99_clean", "p99 clean ms", True),
        Column("p99_faulted", "p99 faulted ms", True),
        Column("good_errors", "Good errors", True, "good requests failed under faults"),
        Column("survived", "Survived", help="the server process still ran after the faults"),
        Column(
            "answered_after",
            "Answered after",
            help="a fresh GET got a 2xx within 5 s after the faults (time to the first one)",
        ),
        Column("accepted", "Malformed accepted", help="taken for valid requests (findings)"),
    ]
    rows = []
    for p in sorted(points, key=lambda p: -p.robustness_detail.score):  # type: ignore[union-attr]
        r = p.robustness_detail
        assert r is not None
        stack = view.stacks.get(p.stack_key)
        after = _answered_after(r)
        accepted = ", ".join(r.malformed_accepted) or "none"
        cells = {
            "stack": TCell(stack.label if stack else p.stack_key, p.stack_key),
            "load": TCell(p.load_point, p.load_sort),
            "score": TCell(f"{r.score:.1f}", r.score),
            "retained": _num(
                fmt.whole(r.retained_pct, "%") + (" (interfered)" if r.interfered else ""),
                r.retained_pct,
            ),
            "clean_rps": _num(fmt.rate(r.clean_rps), r.clean_rps),
            "faulted_rps": _num(fmt.rate(r.faulted_rps), r.faulted_rps),
            "p99_clean": _num(fmt.latency_ms(r.p99_clean_ms), r.p99_clean_ms),
            "p99_faulted": _num(fmt.latency_ms(r.p99_faulted_ms), r.p99_faulted_ms),
            "good_errors": _num(
                f"{r.good_errors:,} ({fmt.percent(r.good_error_rate)})", r.good_error_rate
            ),
            "survived": TCell(fmt_yes(r.survived), int(r.survived), "" if r.survived else "bad"),
            "answered_after": TCell(
                after, int(r.answered_after), "" if r.answered_after else "bad"
            ),
            "accepted": TCell(accepted, accepted, "bad" if r.malformed_accepted else ""),
        }
        rows.append(Row(cells, stack))
    return Table(columns, rows)


def fault_mixes(workload: WorkloadView) -> str:
    """The fault mixes the workload's points ran under (usually one), for a caption."""
    mixes = {p.robustness_detail.mix for p in workload.points if p.robustness_detail is not None}
    return "; ".join(sorted(mixes))


def findings_table(view: ReportView, workload: WorkloadView) -> Table | None:
    """Malformed requests a stack accepted, and smuggled requests that got their own answer."""
    columns = [
        Column("stack", "Stack"),
        Column("load", "Load"),
        Column("kind", "Fault kind"),
        Column("what", "What happened"),
        Column("count", "Times", True),
        Column("status", "Status", True),
        Column("request", "Request sent"),
        Column("response", "Answer (start)"),
    ]
    rows = []
    for p in workload.points:
        r = p.robustness_detail
        if r is None:
            continue
        stack = view.stacks.get(p.stack_key)
        for f in r.findings:
            what = (
                "hidden request answered (smuggling)"
                if f.what == "smuggled-request-answered"
                else "accepted as valid"
                if f.what == "accepted"
                else f.what
            )
            rows.append(
                Row(
                    {
                        "stack": TCell(stack.label if stack else p.stack_key, p.stack_key),
                        "load": TCell(p.load_point, p.load_sort),
                        "kind": TCell(f.kind, f.kind),
                        "what": TCell(what, what),
                        "count": TCell(f"{f.count:,}", f.count),
                        "status": TCell(str(f.status), f.status),
                        "request": TCell(f.request, f.request),
                        "response": TCell(f.response, f.response),
                    },
                    stack,
                )
            )
    return Table(columns, rows) if rows else None


def failures_table(view: ReportView) -> Table:
    """Every recorded failure with its phase and reason."""
    columns = [
        Column("phase", "Phase"),
        Column("stack", "Stack"),
        Column("workload", "Workload"),
        Column("load", "Load"),
        Column("replicate", "Rep.", True),
        Column("reason", "Reason"),
    ]
    rows = []
    for f in view.failures:
        stack = view.stacks.get(f.stack_key) if f.stack_key else None
        rows.append(
            Row(
                {
                    "phase": TCell(f.phase, f.phase),
                    "stack": TCell(
                        stack.label if stack else fmt.MISSING, stack.label if stack else ""
                    ),
                    "workload": TCell(f.workload or fmt.MISSING, f.workload or ""),
                    "load": TCell(f.load_point or fmt.MISSING, f.load_point or ""),
                    "replicate": TCell(
                        fmt.MISSING if f.replicate is None else str(f.replicate + 1),
                        -1 if f.replicate is None else f.replicate,
                    ),
                    "reason": TCell(f.reason, f.reason),
                },
                stack,
                detail=f.detail,
            )
        )
    return Table(columns, rows)


#: What the figures of a WebSocket workload (ws-echo) are.
WS_NOTE = (
    "A request is one WebSocket message echoed back: req/s are messages/s, and latency is "
    "each message's round trip; each connection upgrades once (docs/websocket.md)."
)


def is_websocket(workload: str) -> bool:
    """True for a WebSocket workload of the catalogue (ws-echo)."""
    from pywebbench.catalogue.workloads import WORKLOADS

    found = WORKLOADS.get(workload)
    return found is not None and found.websocket


#: The two designs a ranking's figures come from (docs/steady-state.md): sequential
#: replicates (fresh server processes one after another) and interleaved groups (every
#: stack's processes up together, loaded in slices of the same rounds). ``ACROSS``: a gap
#: between rows of different groups (or a group's row and one measured on its own), which
#: gets no interval (:func:`pywebbench.analysis.ties.ranked_gaps`).
SEQUENTIAL, INTERLEAVED, ACROSS = "sequential", "interleaved", "across"


def designs(ranking: Ranking) -> set[str]:
    """The designs that produced the ranked rows' req/s and intervals."""
    return {INTERLEAVED if r.point.group else SEQUENTIAL for r in ranking.ranked}


def _group_of(row: RankingRow) -> tuple[str, str] | None:
    return group_id({"group": row.point.group} if row.point.group else {})


def gap_methods(ranking: Ranking) -> set[str]:
    """How the ranked rows' "Gap above" intervals were made: ``INTERLEAVED`` when both rows
    are members of one group (the group's fit), ``SEQUENTIAL`` when both were measured on
    their own (Welch's t over each row's replicates), ``ACROSS`` otherwise (no interval:
    :func:`pywebbench.analysis.ties.ranked_gaps`)."""
    out = set()
    ranked = ranking.ranked
    for upper, lower in zip(ranked, ranked[1:], strict=False):
        a, b = _group_of(upper), _group_of(lower)
        out.add(SEQUENTIAL if a is None and b is None else INTERLEAVED if a == b else ACROSS)
    return out


def groups_note(ranking: Ranking) -> str | None:
    """What a ranking that sets figures from different groups side by side says about them:
    which groups, that they were measured minutes apart, and that no interval joins them;
    None when its ranked rows come from one group, or were all measured on their own."""
    groups: dict[tuple[str, str], str] = {}
    alone = 0
    for r in ranking.ranked:
        g = _group_of(r)
        if g is None:
            alone += 1
        else:
            groups.setdefault(g, g[0])
    if not groups or (len(groups) == 1 and not alone):
        return None
    names = "; ".join(groups.values())
    lone = ""
    if alone:
        lone = f", and {alone} row{'s' if alone > 1 else ''} measured on "
        lone += "their own" if alone > 1 else "its own"
    return (
        f"Different groups: these rows were measured in {len(groups)} interleaved "
        f"group{'s' if len(groups) > 1 else ''} ({names}){lone}, minutes apart, not in the "
        "same rounds. Ranks, 'vs best' and 'vs slowest' between stacks of different groups "
        "compare figures from different rounds, and no tie or gap interval is given between "
        "them ('CI n/a: different groups'); each group's ratios below, with their intervals, "
        "compare its stacks within the same rounds."
    )


def column_help(ranking: Ranking) -> dict[str, str]:
    """The help of the ranking's figure columns, for the designs that made its figures."""
    made = designs(ranking) or {SEQUENTIAL}
    rps, ci = [], []
    if SEQUENTIAL in made:
        rps.append("median of the replicates' figures (each the median of its measured iterations)")
        ci.append("95% CI over the replicates (Student's t; a bootstrap from 10 replicates)")
    if INTERLEAVED in made:
        rps.append("level at the interleaved group's average round, from one fit over the slices")
        ci.append("95% CI of the ratio to the group's reference, over its server processes")
    gaps = []
    for method in sorted(gap_methods(ranking) or {SEQUENTIAL}):
        if method == INTERLEAVED:
            gaps.append("within a group, from the group's fit over the server processes")
        elif method == SEQUENTIAL:
            gaps.append("over replicates: Welch's t, a bootstrap from 10 a side")
        else:
            gaps.append("none between different groups: measured minutes apart")
    return {
        "rps": "requests/s: " + "; ".join(rps),
        "ci": "; ".join(ci),
        "vs_above": "the stack ranked above is this many times faster, with the 95% CI of the "
        "ratio (" + "; ".join(gaps) + "); '=' before a rank: the CI contains 1, a tie",
    }


def method_note(ranking: Ranking) -> str:
    """The footnote under a ranking: how its req/s, intervals and ties were made, naming
    only the designs that made them, and, when it sets different groups side by side, that
    no interval joins them (:func:`groups_note`)."""
    made = designs(ranking) or {SEQUENTIAL}
    out = []
    if INTERLEAVED in made:
        lead = "In an interleaved group, req/s" if SEQUENTIAL in made else "Req/s"
        out.append(
            f"{lead} is each stack's level at its group's average round, from one fit over the "
            "slices of the same rounds; its 95% CI is that of its ratio to the group's "
            "reference (by default the geometric mean of the group's stacks on its "
            "interpreter), over the group's server processes (Student's t; each interpreter "
            "its own process variance)."
        )
    if SEQUENTIAL in made:
        lead = "Measured on its own, req/s" if INTERLEAVED in made else "Req/s"
        out.append(
            f"{lead} is the median of the replicates' figures (each the median of its "
            "measured iterations), its 95% CI over the replicates (Student's t; a bootstrap "
            "from 10 replicates)."
        )
    gaps = gap_methods(ranking)
    if gaps - {ACROSS}:
        how = []
        if INTERLEAVED in gaps:
            how.append(
                "between two stacks of one group, from the group's fit: slices of the same "
                "rounds, an interval over its server processes"
            )
        if SEQUENTIAL in gaps:
            whom = "between two stacks measured on their own, " if INTERLEAVED in made else ""
            how.append(f"{whom}Welch's t over replicates, a bootstrap from 10 a side")
        out.append(
            "Gap above: how many times faster the stack above is, with the 95% CI of that ratio ("
            + "; ".join(how)
            + '); "=" before a rank: that CI contains 1, a tie.'
        )
    across = groups_note(ranking)
    if across is not None:
        out.append(across)
    out.append(
        "Latency from the merged HdrHistograms; peak RSS over the server's whole process tree."
    )
    return " ".join(out)


@dataclass
class GroupNote:
    """One interleaved group of a ranking: a line (who was up together, when) and the
    members' ratios to the group's reference, shown on demand."""

    summary: str
    ratios: str


def group_notes(ranking: Ranking) -> list[GroupNote]:
    """How an interleaved ranking was measured, one note per group (none when no row was
    measured in an interleaved group): the stacks and processes up together, the time span,
    the reference and every stack's ratio to it with its interval."""
    by_group: dict[tuple[str, str], list[RankingRow]] = {}
    for r in ranking.ranked:
        g = r.point.group
        if g:
            by_group.setdefault((str(g.get("group")), str(g.get("span"))), []).append(r)
    notes = []
    for rows in by_group.values():
        g = rows[0].point.group
        assert g is not None
        start, end = (str(t)[11:16] for t in g.get("span", ["", ""]))
        figures = open_loop_latency(rows) if g.get("latency") else _ratios(rows)
        idle = g.get("idle_cpu_share")
        idle_text = (
            f" The idle processes took {idle['median']:.1%} of the server cores during "
            f"others' slices (median; 90th percentile {idle['p90']:.1%})."
            if isinstance(idle, dict)
            else ""
        )
        wide = g.get("wide_because")
        notes.append(
            GroupNote(
                summary=(
                    f"Interleaved group {g.get('group')}: {g.get('stacks')} stacks x "
                    f"{_processes(rows)}, {g.get('rounds')} rounds, "
                    f"{start}-{end} UTC ({g.get('df')} degrees of freedom)."
                    + "".join(
                        f" {grew['stack']} got {grew['added']} more processes, as {grew['why']}."
                        for grew in g.get("grown") or []
                    )
                    + "".join(
                        f" {stack}'s idle processes took {share:.1%} of a core each during "
                        "the others' slices, which the other stacks' figures lack."
                        for stack, share in (g.get("idle_burn") or {}).items()
                    )
                    + "".join(
                        f" {stack}'s processes spread apart from the other stacks' (an F test"
                        f" at {APART_P:.0%}): its intervals carry its own spread."
                        for stack in g.get("apart") or []
                    )
                    + (f" Its intervals stayed wide: {wide}." if wide else "")
                ),
                ratios=figures + idle_text,
            )
        )
    return notes


def _ratios(rows: Sequence[RankingRow]) -> str:
    """A closed-loop group's figures: every stack's ratio to the group's reference with its
    interval."""
    g = rows[0].point.group or {}
    ratios = []
    for r in rows:
        pg = r.point.group or {}
        ci = (
            f" [{pg['low']:.3f}, {pg['high']:.3f}]"
            if pg.get("low") is not None and pg.get("high") is not None
            else ""
        )
        ratios.append(f"{r.stack.label} {pg.get('ratio', math.nan):.3f}{ci}")
    return f"Ratio to the {g.get('reference')}: " + "; ".join(ratios) + "."


def open_loop_latency(rows: Sequence[RankingRow]) -> str:
    """An open-loop group's figures (``flags["group"]["latency"]``), lowest p99 first:
    every stack offered the same rate, its p50 and p99 with their 95% intervals over its
    server processes, the req/s it achieved and the sends dropped unsent."""

    def ms(lat: Mapping[str, Any], name: str) -> str:
        value, low, high = (lat.get(f"{name}_{k}") for k in ("us", "low", "high"))
        if value is None:
            return f"{name} n/a"
        ci = ""
        if low is not None and high is not None:
            ci = f" [{low / 1000:.3f}, {high / 1000:.3f}]"
        return f"{name} {value / 1000:.3f} ms{ci}"

    def p99(r: RankingRow) -> float:
        value = ((r.point.group or {}).get("latency") or {}).get("p99_us")
        return float(value) if value is not None else math.inf

    parts = []
    for r in sorted(rows, key=lambda r: (p99(r), r.stack.label)):
        pg = r.point.group or {}
        lat = pg.get("latency") or {}
        offered, unsent = lat.get("offered") or 0, lat.get("unsent") or 0
        dropped = f", {unsent / offered:.2%} unsent" if offered and unsent else ""
        parts.append(
            f"{r.stack.label} {ms(lat, 'p50')}, {ms(lat, 'p99')}, "
            f"{fmt.rate(pg.get('rps') or 0.0)} req/s{dropped}"
        )
    rate = (rows[0].point.group or {}).get("latency", {}).get("rate")
    offered = f" at {rate:g} req/s offered" if rate is not None else ""
    return (
        f"Open loop{offered}, each stack at the same rate, lowest p99 first (latency from "
        "the intended send time; 95% CIs over the server processes): " + "; ".join(parts) + "."
    )


def _processes(rows: Sequence[RankingRow]) -> str:
    """How many server processes each stack of a group got: "3 server processes", with an
    interpreter whose stacks got another count ("4 server processes (pypy: 3)",
    ``jit_replicates``), and a stack given more where its processes disagreed
    ("3 server processes (b: 5)")."""
    counts = {r.stack.label: (r.point.group or {}).get("processes") for r in rows}
    family = {r.stack.label: getattr(r.stack, "interpreter", "") for r in rows}

    def usual_of(labels: Sequence[str]) -> object:
        return Counter(counts[label] for label in labels).most_common(1)[0][0]

    usual = usual_of(list(counts))
    own = {f: usual_of([x for x in counts if family[x] == f]) for f in set(family.values())}
    more = [f"{f}: {k}" for f, k in sorted(own.items()) if k != usual]
    more += [f"{label}: {k}" for label, k in counts.items() if k != own[family[label]]]
    return f"{usual} server processes" + (f" ({', '.join(more)})" if more else "")


def headline(ranking: Ranking) -> dict[str, str] | None:
    """The first-screen answer for a workload: who is fastest, and by how much.

    Returns the parts as plain text (the renderers escape them), or None when nothing ran.
    """
    ranked = ranking.ranked
    if not ranked:
        return None
    best = ranked[0]
    assert best.point.rps is not None
    parts = {
        "best": best.stack.label,
        "rps": fmt.rate(best.point.rps.median),
        "load": best.point.load_point,
        "p99": fmt.latency_ms(best.point.p99_ms),
    }
    if len(ranked) > 1:
        second, worst = ranked[1], ranked[-1]
        assert second.point.rps is not None and worst.point.rps is not None
        parts["second"] = second.stack.label
        parts["vs_second"] = fmt.ratio(ratio(best.point.rps.median, second.point.rps.median))
        vs = second.vs_above
        interval = fmt.ratio_interval(vs.low, vs.high, vs.why) if vs else ""
        parts["vs_second_ci"] = f"95% CI {interval}" if vs and vs.low is not None else interval
        parts["tied"] = "yes" if second.tied else ""
        if len(ranked) > 2:  # with two stacks the runner-up is the slowest: say it once
            parts["worst"] = worst.stack.label
            parts["vs_worst"] = fmt.ratio(ratio(best.point.rps.median, worst.point.rps.median))
    return parts
