"""What one server process fewer a stack would have given: a stored study refitted.

    python benchmarks/processes_left_out.py RESULTS/pywebbench.sqlite

Every interleaved group of a stored study (``pywebbench run``, the interleaved design) is
fitted again with the group's own fit (:func:`pywebbench.analysis.group.fit_group`, each
interpreter its own process variance) on its measured slices: once with every process, then
with one process of every stack of one interpreter left out (its first, second, ... in
turn). First, per group and interpreter, how far its processes spread against what the
slices' noise alone explains (more rounds narrow the latter only). Per fit it prints the
median and worst CI half-width of the CPython and the PyPy cells' ratios to their
interpreter's geometric mean, and of the ratios between a PyPy stack and the CPython stack
of the same server and framework. How the widths move with one process fewer says where the
variance lives, and what a count per interpreter (``replicates``, ``jit_replicates``) buys
(docs/steady-state.md, issue 63).
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from pywebbench.analysis.group import GroupFit, Observation, fit_group


@dataclass(frozen=True)
class Slice:
    """A measured slice of a group: its stack, the stack's interpreter, its process."""

    stack: str
    family: str  # "cpython", "pypy": what the widths are counted under
    process: int  # cell id * 1000 + replicate
    round: int
    rps: float
    #: The stack's interpreter ("cpython3.13t"), whose processes share a process variance in
    #: the group's fit as in the run's; "": ``family``.
    interpreter: str = ""


def slices(store: Path) -> dict[str, list[Slice]]:
    """Each group (by its time span) -> its measured slices."""
    groups: dict[str, list[Slice]] = defaultdict(list)
    with sqlite3.connect(store) as db:
        cells = {
            cid: (json.loads(flags).get("group"), key, impl)
            for cid, flags, key, impl in db.execute(
                "select c.id, c.flags_json, s.key, s.interpreter_impl from cells c"
                " join stacks s on s.id = c.stack_id"
            )
        }
        rows = db.execute(
            "select cell_id, replicate, result_json from iterations where kind = 'measured'"
        ).fetchall()
    for cid, replicate, result in rows:
        group, key, impl = cells.get(cid, (None, "", ""))
        got = json.loads(result or "{}").get("ab_slice") if isinstance(group, dict) else None
        if not got or got["rps"] <= 0:
            continue
        label = json.dumps(group.get("span"))
        interpreter = key.split("/", 1)[0]
        groups[label].append(
            Slice(key, impl, cid * 1000 + replicate, got["round"], got["rps"], interpreter)
        )
    return groups


def refit(kept: list[Slice]) -> GroupFit | None:
    """The group's own fit of ``kept`` slices, each interpreter its own process variance
    (each CPython version its own, as the run's fit gives them)."""
    return fit_group(
        [Observation(s.round, s.process, s.rps) for s in kept],
        {s.process: s.stack for s in kept},
        families={s.stack: s.interpreter or s.family for s in kept},
    )


def widths(groups: dict[str, list[Slice]], left_out: str | None, k: int) -> dict[str, list[float]]:
    """CI half-widths by kind ("cpython", "pypy", "pypy/cpython") over every group, with the
    ``k``-th process (in turn, modulo its count) of every ``left_out`` stack left out."""
    out: dict[str, list[float]] = defaultdict(list)
    for mine in groups.values():
        processes: dict[str, list[int]] = defaultdict(list)
        for s in mine:
            if s.process not in processes[s.stack]:
                processes[s.stack].append(s.process)
        gone = {
            sorted(ps)[k % len(ps)]
            for stack, ps in processes.items()
            if left_out is not None and any(s.family == left_out for s in mine if s.stack == stack)
        }
        family = {s.stack: s.family for s in mine}
        fit = refit([s for s in mine if s.process not in gone])
        if fit is None:
            continue
        for stack in fit.levels:
            out[family[stack]].append(fit.vs_reference(stack).half_width)
            if family[stack] != "pypy":
                continue
            rest = stack.split("/", 1)[1]
            for other in fit.levels:
                if family[other] == "cpython" and other.split("/", 1)[1] == rest:
                    out["pypy/cpython"].append(fit.ratio(stack, other).half_width)
    return out


def spreads(groups: dict[str, list[Slice]]) -> list[str]:
    """Per group and interpreter: the processes' spread about their stacks' levels and the
    spread the slices' noise alone gives a process's level (standard deviations, from the
    group's own fit), and their ratio of variances: near 1, more rounds would narrow the
    intervals; well above it, only more processes would."""
    out = []
    for span, mine in groups.items():
        fit = refit(mine)
        if fit is None:
            continue
        rounds = len({s.round for s in mine})
        parts = fit.by_pool or {"": (fit.variance, fit.df, fit.slice_noise)}
        for f, (variance, df, noise) in sorted(parts.items()):
            if not (math.isfinite(variance) and noise > 0):
                continue
            out.append(
                f"  group from {json.loads(span)[0]}, {f or 'all'}: processes "
                f"{math.sqrt(variance):.2%} apart (sd, {df} df), the slices' noise "
                f"{math.sqrt(noise):.2%} after {rounds} rounds: {variance / noise:.1f}x"
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a results directory's pywebbench.sqlite")
    args = ap.parse_args()
    groups = slices(args.store)
    if not groups:
        raise SystemExit(f"{args.store}: no interleaved group's measured slices")
    fits: list[tuple[str, str | None, int]] = [("every process", None, 0)]
    for family in ("cpython", "pypy"):
        most = max(
            (len({s.process for s in g if s.stack == x.stack}) for g in groups.values() for x in g
             if x.family == family),
            default=0,
        )  # fmt: skip
        fits += [(f"one {family} process out ({k + 1})", family, k) for k in range(most)]
    print("where the variance lives:")
    print("\n".join(spreads(groups)))
    print("CI half-width, median (worst): CPython cells; PyPy cells; PyPy/CPython ratios")
    for name, left_out, k in fits:
        got = widths(groups, left_out, k)
        said = [
            f"{statistics.median(v):.2%} ({max(v):.2%})" if v and math.isfinite(max(v)) else "-"
            for v in (got["cpython"], got["pypy"], got["pypy/cpython"])
        ]  # "-": none, or a stack left with one process (no spread to read)
        print(f"  {name}: " + "; ".join(said))


if __name__ == "__main__":
    main()
