"""Replay other steady-state rules on the warm-up curves of a stored run: what each would
have cost and where it would have stopped too early.

    python benchmarks/warmup_rules.py STORE [--rule WINDOW_S:CONFIRM:JIT_MIN_REQUESTS ...]

Every replicate stores its warm-up curve (requests/s per 0.25 s bucket) up to where the
run's rule stopped it. A looser rule stops at or before that point, so the stored curve is
enough to replay it (a stricter one would need data the run never took). For each rule:
- the warm-up seconds it would have spent, per interpreter (the stored run's own cap);
- the replicates it would have stopped earlier than the run did;
- **off**: the replicates whose warm-up level at the stop (the median of the last window)
  lies more than 10% from the figure the replicate then measured. Some are noise or the
  reconnect at the start of the measured load (measured/level is ~0.97 at the run's own
  stops); a rule that stops inside a ramp adds to them. The ones a rule adds over the
  first rule given are listed.

The default rules: the one the quick profile uses, then each loosened one step.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from pywebbench.analysis.warmup import SteadyRule, WarmupWatch
from pywebbench.store import Store

DEFAULT_RULES = ["2:3:10000", "2:2:10000", "1.5:3:10000", "2:3:5000"]


@dataclass(frozen=True)
class Warmup:
    """One stored replicate's warm-up and what it then measured."""

    label: str
    jit: bool
    curve: list[tuple[float, float]]
    stopped_s: float
    measured_rps: float


def warmups(store_path: Path) -> list[Warmup]:
    """The replicates of a run that warmed up until steady and measured something."""
    with Store(store_path, create=False) as store:
        study = store.load_study()
    stacks = {s.id: s for s in study.stacks}
    out = []
    for cell in study.cells:
        if cell.id is None:
            continue
        stack = stacks[cell.stack_id]
        measured: dict[int, list[float]] = {}
        for it in study.iterations_of(cell.id):
            measured.setdefault(it.replicate, []).append(it.rps)
        for rep in study.replicates_of(cell.id):
            curve = [(float(t), float(y)) for t, y in rep.warmup_curve]
            if not curve or rep.warmup_s is None or rep.replicate not in measured:
                continue
            out.append(
                Warmup(
                    label=f"{stack.key} {cell.workload} r{rep.replicate}",
                    jit=stack.interpreter_impl == "pypy",
                    curve=curve,
                    stopped_s=float(rep.warmup_s),
                    measured_rps=statistics.median(measured[rep.replicate]),
                )
            )
    return out


def replay(w: Warmup, rule: SteadyRule) -> tuple[float, float]:
    """(where ``rule`` stops this warm-up, the median of its last window there)."""
    watch = WarmupWatch(rule)
    served, last_t, stop = 0.0, 0.0, w.stopped_s
    for t, rps in w.curve:
        served += rps * (t - last_t)
        last_t = t
        verdict = watch.observe(t, int(served))
        if verdict is not None:
            stop = min(stop, verdict.elapsed_s)
            break
    window = [y for t, y in w.curve if stop - rule.window_s - 1e-9 < t <= stop + 1e-9]
    return stop, statistics.median(window or [w.curve[-1][1]])


def parse_rule(text: str) -> tuple[SteadyRule, int]:
    """``WINDOW_S:CONFIRM:JIT_MIN_REQUESTS`` -> (the rule for CPython, PyPy's min requests)."""
    try:
        window, confirm, min_requests = text.split(":")
        rule = replace(SteadyRule(), window_s=float(window), confirm=int(confirm))
        return rule, int(min_requests)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--rule: expected WINDOW_S:CONFIRM:JIT_MIN_REQUESTS, got {text!r}"
        ) from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--rule", action="append", type=parse_rule, help="repeatable")
    ap.add_argument("--off", type=float, default=0.10, help="relative gap called off (0.10)")
    args = ap.parse_args()
    rules = args.rule or [parse_rule(r) for r in DEFAULT_RULES]
    data = warmups(args.store)
    print(f"{len(data)} warm-ups ({sum(w.jit for w in data)} on PyPy) from {args.store}")
    first_off: set[str] | None = None
    for rule, jit_min in rules:
        spent = {"cpython": 0.0, "pypy": 0.0}
        earlier = 0
        off: dict[str, str] = {}
        for w in data:
            cap = max(rule.cap_s, w.stopped_s)
            r = replace(rule, cap_s=cap, min_requests=jit_min if w.jit else 0)
            stop, level = replay(w, r)
            spent["pypy" if w.jit else "cpython"] += stop
            earlier += stop < w.stopped_s - 0.01
            if abs(level / w.measured_rps - 1.0) > args.off:
                off[w.label] = (
                    f"stops at {stop:.2f} s (run: {w.stopped_s:.2f}) at {level:,.0f} req/s, "
                    f"then measured {w.measured_rps:,.0f}"
                )
        print(
            f"\nwindow {rule.window_s:g} s, confirm {rule.confirm}, PyPy min requests "
            f"{jit_min:,}: warm-up CPython {spent['cpython']:.0f} s, PyPy {spent['pypy']:.0f} s;"
            f" {earlier} stop earlier than the run; off {len(off)}"
        )
        if first_off is not None:
            for label in sorted(set(off) - first_off):
                print(f"  + {label}: {off[label]}")
        else:
            first_off = set(off)


if __name__ == "__main__":
    main()
