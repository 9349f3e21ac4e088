"""Lay an A/B out in ``compare``'s formats: terminal table, Markdown, JSON.

One row: BASE and CHANGE, the requests/s ratio CHANGE/BASE with its CI, the p50 and p99
latency ratios, the verdict; then how the run ended (CI reached or budget), the rounds kept
and dropped and why, and the gate's outcome.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from pywebbench import formatting as fmt
from pywebbench.ab.session import (
    FIGURE_CPU,
    FIGURE_INSTRUCTIONS,
    FIGURE_RPS,
    STOPPED_BUDGET,
    STOPPED_CI,
    STOPPED_INTERRUPTED,
    AbOutcome,
)
from pywebbench.analysis.estimate import half_width, kept_rounds, processes_kept, side_process
from pywebbench.analysis.ratio import RatioEstimate
from pywebbench.compare.endpoints import grew_most_doc
from pywebbench.compare.gate import Violation
from pywebbench.compare.render import endpoints_text
from pywebbench.mdtext import md_text

#: What the judged ratio is a ratio of, in a gate's reason.
FIGURE_UNITS = {
    FIGURE_RPS: "requests/s",
    FIGURE_CPU: "requests per server CPU-second",
    FIGURE_INSTRUCTIONS: "requests per instruction",
}
FIGURE_NAMES = {
    FIGURE_RPS: "requests/s (--figure rps)",
    FIGURE_CPU: "requests per server CPU-second (--figure cpu)",
    FIGURE_INSTRUCTIONS: "instructions per request, counted under valgrind (--figure "
    "instructions): slower when CHANGE runs more",
}


def fmt_instructions(o: AbOutcome) -> str:
    """CHANGE/BASE instructions per request as a change: ``+0.46% (474,767 -> 476,937 per
    request)`` with one count a side, ``+3.1% [+2.9%, +3.3%] (474,767 -> 489,485 per
    request, medians of 4 counts a side)`` with several; the reason when a side was not
    counted; ``–`` without ``--instructions``."""
    for role, side in (("BASE", o.base), ("CHANGE", o.change)):
        for doc in side.instructions:
            if doc.get("per_request") is None:
                return f"not counted: {role}: {doc.get('error') or 'no count'}"
    est = o.instructions
    if est is None:
        return fmt.MISSING
    medians = f"{fmt.count(est.base_median)} -> {fmt.count(est.new_median)} per request"
    n = (len(o.base.instructions), len(o.change.instructions))
    if not math.isfinite(est.low):  # one count on a side
        return f"{fmt.change(est.change)} ({medians})"
    many = f"{n[0]} counts a side" if n[0] == n[1] else f"{n[0]} and {n[1]} counts"
    return (
        f"{fmt.change(est.change)} [{fmt.change(est.low - 1)}, {fmt.change(est.high - 1)}] "
        f"({medians}, medians of {many})"
    )


def stop_note(o: AbOutcome) -> str:
    """Why the timed run stopped, in words (its CI: the time figure the stop rule judged)."""
    width = half_width(o.timed) if o.timed is not None else None
    reached = fmt.half_width(width) if width is not None else "no CI (fewer than 2 rounds kept)"
    if o.stopped == STOPPED_CI:
        return f"stopped: the CI reached {reached} (asked {fmt.half_width(o.options.ci_width)})"
    if o.stopped == STOPPED_BUDGET:
        return (
            f"stopped: the time budget ({o.options.budget_s:g} s) ended; CI {reached}, "
            f"wider than asked ({fmt.half_width(o.options.ci_width)})"
        )
    return f"stopped: interrupted; CI {reached}"


#: Fewer responses per connection in a slice than this, and the output says to raise --slice.
FEW_RESPONSES = 5.0


def responses_per_connection(o: AbOutcome) -> float | None:
    """The median slice's responses per connection (None without slices)."""
    counts = sorted(s.requests for s in (*o.base.slices, *o.change.slices))
    if not counts:
        return None
    return counts[len(counts) // 2] / max(1, o.base.study.cell.connections)


def speed_line(o: AbOutcome) -> str:
    """How the slices were judged: at one core speed (how far the core strayed, the
    elasticity, the ratio as measured) or as measured."""
    span = o.speed.span()
    if span is None:
        why = "--no-core-speed" if not o.options.core_speed else "a slice had no reading"
        return f"slices as measured ({why})"
    if o.speed.elasticity <= 0:
        return (
            f"slices as measured: the server core ran {fmt.ratio_range(*span)} "
            "the run's median rate, but the slices' requests/s did not follow it (elasticity 0)"
        )
    return (
        f"slices at one core speed: the server core ran {fmt.ratio_range(*span)} the run's "
        f"median rate; elasticity {o.speed.elasticity:.2f}; "
        f"requests/s as measured {fmt.estimate(o.rps_measured)}"
    )


def processes_line(o: AbOutcome) -> str:
    """What the interval is over: the server processes, or the rounds alone."""
    k = o.options.processes
    if k > 1:
        used = processes_kept(o.pairs)
        if used < 2:
            return f"no interval: {used} of {k} server processes a side had a kept pair"
        of = f"{used} of {k}" if used < k else f"{k}"
        return (
            f"interval over {of} server processes a side (t with {2 * used - 2} degrees of "
            "freedom): it holds the difference between two processes of the same app"
        )
    return (
        "interval over rounds, one server process a side (--processes 1): the difference "
        "between two processes of the same app (often 1-2%) is not in it"
    )


def notes(o: AbOutcome, verdict: str, violations: list[Violation]) -> list[str]:
    """The lines under the table."""
    out = [
        stop_note(o),
        f"judged on: {FIGURE_NAMES[o.options.figure]}",
        speed_line(o),
        processes_line(o),
        f"rounds: {o.rounds}, slice pairs {o.kept} kept of {len(o.pairs)}, "
        f"{o.options.slice_s:g} s slices; {o.elapsed_s:.0f} s of load; servers on cores "
        f"{o.server_cpus}, load from {o.generator_cpus}",
    ]
    out += warmup_lines(o)
    counted = counting_line(o)
    if counted is not None:
        out.append(counted)
    for name, share in (("BASE", o.base.other_share), ("CHANGE", o.change.other_share)):
        if share is not None:
            out.append(
                f"{name}: other processes took {fmt.percent(share)} of the server cores (median)"
            )
    for why, n in Counter(_reason(p.dropped) for p in o.pairs if p.dropped).most_common():
        out.append(f"dropped {n} slice pair(s): {why}")
    for side in (o.base, o.change):
        if side.errors:
            out.append(f"{side.label}: {side.errors} errors in {side.requests} responses")
    for w in o.result.warnings:
        out.append(f"engine: {w}")
    held = responses_per_connection(o)
    if held is not None and held < FEW_RESPONSES:
        out.append(
            f"a slice held {held:.1f} responses per connection (median): requests in flight "
            "at a switch weigh on every slice; raise --slice"
        )
    mix = endpoints_text(o.endpoints)
    if mix is not None:
        out.append(mix)
    if violations:
        out += [f"gate FAILED: {v.rule}: {v.detail}" for v in violations]
    return out


def warmup_lines(o: AbOutcome) -> list[str]:
    """The warm-up: each process's first touch, the rounds its warm-up was judged to end at
    (its share of the round stopped moving), and every process that never settled or was
    stopped."""
    starts = [s for side in (o.base, o.change) for s in side.starts if s is not None]
    touch = o.options.warmup_s or 0.0
    line = f"warm-up: {touch:g} s first touch a process, then judged against the round"
    if starts:
        low, high = min(starts), max(starts)
        line += f": measured from round {low}" if low == high else f": from rounds {low}-{high}"
    out = [line]
    for side in (o.base, o.change):
        role = side.study.side.role.upper()
        for k, (unsettled, stopped) in enumerate(zip(side.unsettled, side.stopped, strict=True)):
            if stopped is not None:
                out.append(f"{role} process {k + 1}: stopped ({stopped}); its slices left out")
            elif unsettled:
                out.append(
                    f"{role} process {k + 1}: never settled (its share of the round kept "
                    "moving): measured on its last half of rounds"
                )
    return out


def counting_line(o: AbOutcome) -> str | None:
    """How the instructions were counted (None without ``--instructions``)."""
    docs = [*o.base.instructions, *o.change.instructions]
    if not docs:
        return None
    spent = sum(float(d.get("study_s") or 0.0) for d in docs)
    n = (len(o.base.instructions), len(o.change.instructions))
    if n[0] == n[1]:
        many = f"{n[0]} fresh server process{'es' if n[0] > 1 else ''} a side"
    else:
        many = f"{n[0]} fresh server processes for BASE, {n[1]} for CHANGE"
    interval = ", interval over them" if min(n) > 1 else ""
    failed = any("error" in d for d in docs)
    asked = o.options.processes
    if n[0] == n[1] < asked and not failed and o.stopped != STOPPED_INTERRUPTED:
        within = fmt.half_width(o.options.ci_width)
        interval += f" (of --processes {asked}: the interval was within {within})"
    return f"instructions counted under valgrind on {many}{interval}; {spent:.0f} s"


def _reason(dropped: str) -> str:
    """The kind of a drop reason (its figures left out, so like reasons count together)."""
    return dropped.split(":")[0]


def _est_doc(est: RatioEstimate | None) -> dict[str, float] | None:
    if est is None:
        return None
    return {
        "ratio": est.ratio,
        "ci_low": est.low,
        "ci_high": est.high,
        "base_median": est.base_median,
        "new_median": est.new_median,
    }


def instructions_doc(o: AbOutcome) -> dict[str, Any] | None:
    """Both sides' counts (one document per counted server process), and CHANGE/BASE of
    their medians with its CI; None without ``--instructions``."""
    if not o.base.instructions and not o.change.instructions:
        return None
    est = o.instructions
    return {
        "base": o.base.instructions,
        "change": o.change.instructions,
        "ratio": o.instructions_ratio,
        "ci_low": est.low if est is not None and math.isfinite(est.low) else None,
        "ci_high": est.high if est is not None and math.isfinite(est.high) else None,
    }


def to_doc(o: AbOutcome, verdict: str, violations: list[Violation]) -> dict[str, Any]:
    """The JSON document."""
    return {
        "base": o.base.label,
        "change": o.change.label,
        "verdict": verdict,
        "figure": o.options.figure,
        "rps": _est_doc(o.rps),
        "cpu": _est_doc(o.cpu),
        "p50": _est_doc(o.p50),
        "p99": _est_doc(o.p99),
        "instructions": instructions_doc(o),
        "endpoints": [
            {"name": e.name, "p50": _est_doc(e.p50), "p99": _est_doc(e.p99)} for e in o.endpoints
        ],
        "endpoint_grew_most": grew_most_doc(o.endpoints),
        "core_speed": {
            "reference": o.speed.reference,
            "elasticity": o.speed.elasticity if o.speed.reference is not None else None,
            "span": o.speed.span(),
            "rps_measured": _est_doc(o.rps_measured),
        },
        "level": o.options.level,
        "ci_half_width": o.half_width,
        "timed_ci_half_width": half_width(o.timed) if o.timed is not None else None,
        "ci_width_asked": o.options.ci_width,
        "stopped": o.stopped,
        "elapsed_s": o.elapsed_s,
        "processes": o.options.processes,
        "rounds": o.rounds,
        "rounds_kept": kept_rounds(o.pairs),
        "pairs": len(o.pairs),
        "pairs_kept": o.kept,
        "dropped": [
            {"round": p.round, "process": p.process, "why": p.dropped} for p in o.pairs if p.dropped
        ],
        "slices": [
            {
                "side": side,
                "process": side_process(s.target)[1],
                **s.model_dump(exclude={"latency", "endpoints"}),
            }
            for side, run in (("base", o.base), ("change", o.change))
            for s in run.slices
        ],
        "errors": {"base": o.base.errors, "change": o.change.errors},
        "warmup": {
            "first_touch_s": o.options.warmup_s,
            **{
                side: {"warm_from": run.starts, "unsettled": run.unsettled, "stopped": run.stopped}
                for side, run in (("base", o.base), ("change", o.change))
            },
        },
        "other_share": {"base": o.base.other_share, "change": o.change.other_share},
        "gate": {
            "passed": not violations,
            "violations": [{"rule": v.rule, "detail": v.detail} for v in violations],
        },
        "warnings": list(o.result.warnings),
    }


def to_json(o: AbOutcome, verdict: str, violations: list[Violation]) -> str:
    """JSON text (finite numbers only)."""
    doc = to_doc(o, verdict, violations)
    return json.dumps(doc, indent=2, allow_nan=False, default=_finite)


def _finite(x: object) -> object:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(type(x).__name__)


def to_markdown(o: AbOutcome, verdict: str, violations: list[Violation]) -> str:
    """A Markdown section (for a CI job's summary)."""
    counted = o.options.instructions
    head = ["BASE", "CHANGE", "requests/s", "requests/CPU-s", "p50", "p99"]
    row = [
        md_text(o.base.study.cell.label),
        md_text(o.change.study.cell.label),
        *(fmt.estimate(e) for e in (o.rps, o.cpu, o.p50, o.p99)),
    ]
    if counted:
        head.append("instructions/request")
        row.append(md_text(fmt_instructions(o)))
    lines = [
        "## A/B: CHANGE / BASE",
        "",
        "| " + " | ".join([*head, "verdict"]) + " |",
        "|" + "---|" * (len(head) + 1),
        "| " + " | ".join([*row, f"**{verdict}**"]) + " |",
        "",
    ]
    lines += [f"- {md_text(n)}" for n in notes(o, verdict, violations)]
    return "\n".join(lines) + "\n"


def to_table(o: AbOutcome, verdict: str, violations: list[Violation]) -> str:
    """Plain text for a terminal."""
    rows = [
        ("BASE", o.base.study.cell.label),
        ("CHANGE", o.change.study.cell.label),
        (f"requests/s ({o.options.level:.0%} CI)", fmt.estimate(o.rps)),
        ("requests per server CPU-s", fmt.estimate(o.cpu)),
        ("p50 latency", fmt.estimate(o.p50)),
        ("p99 latency", fmt.estimate(o.p99)),
    ]
    if o.options.instructions:
        rows.append(("instructions/request", fmt_instructions(o)))
    rows.append(("verdict", verdict))
    width = max(len(k) for k, _ in rows)
    out = [f"{k.ljust(width)}  {v}" for k, v in rows]
    return "\n".join(out + [""] + notes(o, verdict, violations)) + "\n"
