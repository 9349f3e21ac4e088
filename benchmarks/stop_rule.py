"""The interleaved group's stop rule, simulated: are the twins' intervals honest, and does a 5%
copy rank below them, when the run stops as soon as its intervals look narrow enough?

    python benchmarks/stop_rule.py                      # 2,000 groups each way, seeded
    python benchmarks/stop_rule.py --process-sd 0.012   # processes further apart

No server: each simulated group is what ``benchmarks/twins.py`` runs (``twin-a``, ``twin-b``
and ``burn``, 5% slower; 3 server processes each), on slices drawn from a model measured
there: log req/s = a round effect (the host, 10%) + a process effect (the stack's level plus
``--process-sd``) + slice noise (``--slice-sd``). The defaults are what the twins' stores
read beside the steady neighbour on 2026-12-05 (slices 3.9% about their process and round,
process means 1.5% apart after about 9 rounds, of which 1.3% is slice noise: 0.8% between
processes). After every round from the 8th on, the stop rule of
:func:`pywebbench.analysis.group.widest` (every gap of the ranking and every stack's ratio
to the geometric mean within ``--ci-width``) decides whether the group stops; at the stop,
the twins are *tied* when their ratio's interval holds 1 (a correct 95% interval: 95%), and
the copy is *below* a twin when the interval of twin-a / burn lies above 1.

The rules compared, each on the same seeded groups:

- ``floored``: the stop rule as built (the variance it judges never below the slices' own
  noise, :meth:`~pywebbench.analysis.group.GroupFit.for_stopping`; the plain interval
  reported);
- ``plain``: the same rule judging the plain interval, whose variance comes from a few process
  effects and is noisy: stopping when it happens to be low picks too-narrow intervals. With 3
  processes a stack it reads like ``floored`` (94.2% tied over 2,000 groups, 2026-12-05); with
  2 (``--processes 2``: 3 degrees of freedom) the twins tied in 92.8% against 95.0% floored;
- ``reference``: the rule before 2026-12-05 (every stack's ratio to the geometric mean within
  ``--ci-width``; plain), which stops at a gap about 1.7 times wider than it judges.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace

from pywebbench.analysis.estimate import MIN_ROUNDS
from pywebbench.analysis.group import GroupFit, Observation, fit_group, widest

STACKS = {"twin-a": 0.0, "twin-b": 0.0, "burn": -math.log(1.05)}


def _reference_rule(fit: GroupFit) -> float:
    return max(fit.vs_reference(s).half_width for s in fit.levels)


def _plain_rule(fit: GroupFit) -> float:
    return widest(replace(fit, slice_noise=0.0))  # no floor: for_stopping leaves the variance


RULES: dict[str, Callable[[GroupFit], float]] = {
    "floored": widest,
    "plain": _plain_rule,
    "reference": _reference_rule,
}


@dataclass(frozen=True)
class Outcome:
    """One simulated group at its stop."""

    tied: bool  # twin-a / twin-b's interval holds 1
    below: bool  # twin-a / burn's interval lies above 1
    rounds: int
    half_width: float  # of twin-a / twin-b


def simulate(
    seed: int,
    judge: Callable[[GroupFit], float],
    *,
    slice_sd: float,
    process_sd: float,
    ci_width: float,
    processes: int = 3,
    max_rounds: int = 40,
) -> Outcome:
    """One group (module doc), stopped by ``judge``'s width."""
    rng = random.Random(seed)
    effects: dict[int, float] = {}
    stack_of: dict[int, str] = {}
    for stack, level in STACKS.items():
        for _ in range(processes):
            p = len(effects)
            effects[p], stack_of[p] = level + rng.gauss(0.0, process_sd), stack
    obs: list[Observation] = []
    fit: GroupFit | None = None
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        host = rng.gauss(0.0, 0.1)
        for p, effect in effects.items():
            noise = rng.gauss(0.0, slice_sd)
            obs.append(Observation(rounds, p, math.exp(9.0 + host + effect + noise)))
        if rounds < MIN_ROUNDS:
            continue
        fit = fit_group(obs, stack_of)
        assert fit is not None
        if judge(fit) <= ci_width:
            break
    assert fit is not None
    twins, copy = fit.ratio("twin-a", "twin-b"), fit.ratio("twin-a", "burn")
    return Outcome(twins.tie, copy.low > 1.0, rounds, twins.half_width)


def run(
    rule: str,
    groups: int,
    *,
    slice_sd: float,
    process_sd: float,
    ci_width: float,
    processes: int = 3,
    seed: int = 0,
) -> list[Outcome]:
    """``groups`` seeded groups stopped by ``rule`` (a key of :data:`RULES`)."""
    return [
        simulate(
            seed * 1_000_003 + i,
            RULES[rule],
            slice_sd=slice_sd,
            process_sd=process_sd,
            ci_width=ci_width,
            processes=processes,
        )
        for i in range(groups)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=2000, help="simulated groups per rule")
    ap.add_argument("--slice-sd", type=float, default=0.039, help="slice noise (log scale)")
    ap.add_argument("--process-sd", type=float, default=0.008, help="process-to-process")
    ap.add_argument("--ci-width", type=float, default=0.03, help="the stop rule's +- width")
    ap.add_argument("--processes", type=int, default=3, help="server processes a stack")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(
        f"{args.groups} groups a rule of 3 stacks x {args.processes} processes; slices "
        f"{args.slice_sd:.1%}, processes {args.process_sd:.1%} apart, stop within "
        f"+-{args.ci_width:.1%} from round {MIN_ROUNDS}"
    )
    for rule in RULES:
        out = run(
            rule,
            args.groups,
            slice_sd=args.slice_sd,
            process_sd=args.process_sd,
            ci_width=args.ci_width,
            processes=args.processes,
            seed=args.seed,
        )
        n = len(out)
        print(
            f"{rule:>9}: twins tied {sum(o.tied for o in out) / n:.1%}, "
            f"the 5% copy below {sum(o.below for o in out) / n:.1%}; "
            f"rounds median {statistics.median(o.rounds for o in out):g}, "
            f"twins' half-width median {statistics.median(o.half_width for o in out):.2%}"
        )


if __name__ == "__main__":
    main()
