"""The CI gate: ``--fail-if slower>5%`` and friends, judged on the pair comparisons.

A rule trips on a cell only when the cell is *significantly* worse than the threshold:

- ``slower>X%``: the upper end of the CI of NEW/BASE requests/s is below ``1 - X``;
- ``p50>X%``, ``p99>X%``: the lower end of the CI of NEW/BASE latency is above ``1 + X``;
- ``memory>X%``: NEW's peak RSS exceeds BASE's by more than X (one peak per cell, no CI);
- ``instructions>X%``: every NEW count of instructions per request (``--instructions``)
  exceeds every BASE count by more than X (counts agree to 0.03-0.4%, docs/instructions.md);
- ``errors>N`` / ``errors>X%``: NEW's measured iterations had more than N errors (transport
  errors + non-2xx), or an error rate above X;
- and with any rule, a cell that worked in BASE and failed in NEW trips the gate, and so does
  a cell interfered on either side (docs/interference.md) trips its timed rules
  (:data:`TIMED_METRICS`) unless ``accept_interfered`` (``--accept-interfered``): then they
  are judged on its figures as they are. ``instructions`` and ``memory`` are judged either way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pywebbench import formatting as fmt
from pywebbench.analysis.ratio import RatioEstimate
from pywebbench.compare.verdict import FAILED, INTERFERED, PairComparison

METRICS = ("slower", "p50", "p99", "memory", "instructions", "errors")
#: The rules whose figures other processes' CPU moves (throughput, latency, timeouts); an
#: interfered cell trips these as "interfered". Instruction counts and peak RSS are judged
#: as they are: a neighbour does not change how much work a request takes or how much it
#: keeps.
TIMED_METRICS = frozenset({"slower", "p50", "p99", "errors"})
_RULE = re.compile(r"^\s*([a-z0-9]+)\s*>\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(%?)\s*$")


class GateSyntaxError(ValueError):
    """A ``--fail-if`` rule that does not parse."""


@dataclass(frozen=True)
class Rule:
    """One ``--fail-if`` rule."""

    metric: str  # METRICS
    limit: float  # a fraction when percent, else a count
    percent: bool
    text: str


@dataclass(frozen=True)
class Violation:
    """A cell that trips a rule, and by how much."""

    label: str
    rule: str
    detail: str


def parse_rule(text: str) -> Rule:
    """``"slower>5%"`` -> Rule("slower", 0.05, True, ...); GateSyntaxError when it does not
    parse."""
    m = _RULE.match(text.lower())
    if not m:
        raise GateSyntaxError(
            f"cannot parse {text!r}: expected METRIC>NUMBER[%], METRIC one of " + ", ".join(METRICS)
        )
    metric, number, pct = m.group(1), float(m.group(2)), bool(m.group(3))
    if metric not in METRICS:
        raise GateSyntaxError(f"unknown metric {metric!r} in {text!r}; use " + ", ".join(METRICS))
    if metric != "errors" and not pct:
        raise GateSyntaxError(f"{text!r}: a {metric} threshold is a percentage, e.g. {metric}>5%")
    return Rule(metric, number / 100.0 if pct else number, pct, text.strip())


def parse_rules(texts: Iterable[str]) -> list[Rule]:
    """Every rule of repeated and comma-separated ``--fail-if`` values."""
    return [parse_rule(t) for text in texts for t in text.split(",") if t.strip()]


def estimate_violation(
    rule: Rule,
    rps: RatioEstimate | None,
    p50: RatioEstimate | None,
    p99: RatioEstimate | None,
    *,
    figure: str = "requests/s",
) -> str | None:
    """Why the NEW/BASE estimates trip a ``slower``, ``p50`` or ``p99`` rule, or None (also
    for the other metrics). ``rps`` is the throughput figure ``slower`` judges, named
    ``figure`` in the reason."""
    if rule.metric == "slower":
        if rps is not None and rps.high < 1.0 - rule.limit:
            return (
                f"{figure} {fmt.change(rps.change)} "
                f"(CI {fmt.change(rps.low - 1)} .. {fmt.change(rps.high - 1)})"
            )
        return None
    if rule.metric in ("p50", "p99"):
        est = p50 if rule.metric == "p50" else p99
        if est is not None and est.low > 1.0 + rule.limit:
            return (
                f"{rule.metric} latency {fmt.change(est.change)} "
                f"(CI {fmt.change(est.low - 1)} .. {fmt.change(est.high - 1)})"
            )
    return None


def instructions_violation(
    rule: Rule, instructions: tuple[float, float, float] | None
) -> str | None:
    """Why NEW/BASE instructions per request (median ratio, and the lowest and highest
    ratio of any NEW count to any BASE count) trip an ``instructions`` rule: every NEW
    count exceeds every BASE count by more than the limit. None otherwise."""
    if instructions is None or instructions[1] <= 1.0 + rule.limit:
        return None
    ratio, low, high = ((x - 1) * 100 for x in instructions)
    if low == high:  # one count a side
        return f"instructions/request {ratio:+.2f}%"
    return f"instructions/request {ratio:+.2f}% (counts {low:+.2f}% .. {high:+.2f}%)"


def _violation(rule: Rule, c: PairComparison) -> str | None:
    """Why ``c`` trips ``rule``, or None."""
    if rule.metric in ("slower", "p50", "p99"):
        return estimate_violation(rule, c.rps, c.p50, c.p99)
    if rule.metric == "instructions":
        return instructions_violation(rule, c.instructions)
    if rule.metric == "memory":
        if c.memory_ratio is not None and c.memory_ratio > 1.0 + rule.limit:
            return f"peak RSS {fmt.change(c.memory_ratio - 1)}"
        return None
    new = c.pair.new
    if rule.percent and new.error_rate > rule.limit:
        return f"error rate {new.error_rate * 100:.2f}% ({new.errors} errors)"
    if not rule.percent and new.errors > rule.limit:
        return f"{new.errors} errors in {new.requests + new.errors} requests"
    return None


def evaluate(
    rules: Sequence[Rule],
    comparisons: Sequence[PairComparison],
    *,
    accept_interfered: bool = False,
) -> list[Violation]:
    """Every (cell, rule) that trips; empty when the gate passes."""
    out = []
    for c in comparisons:
        if rules and c.verdict == FAILED:
            reason = c.pair.new.cell.failure_reason or "no reason recorded"
            out.append(Violation(c.label, "failed", f"failed in NEW: {reason}"))
            continue
        judged = rules
        timed = [r for r in rules if r.metric in TIMED_METRICS]
        if timed and c.verdict == INTERFERED and not accept_interfered:
            sides = [n for n, f in (("BASE", c.pair.base), ("NEW", c.pair.new)) if f.interfered]
            out.append(
                Violation(
                    c.label,
                    "interfered",
                    f"other processes took CPU from its cores in {' and '.join(sides)}: "
                    "measure again on a quiet machine (pywebbench preflight), or pass "
                    "--accept-interfered",
                )
            )
            judged = [r for r in rules if r.metric not in TIMED_METRICS]
        for rule in judged:
            detail = _violation(rule, c)
            if detail is not None:
                out.append(Violation(c.label, rule.text, detail))
    return out
