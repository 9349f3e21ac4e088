"""The ratio of an interleaved run: slices paired within rounds, with an interval over the
server processes.

Each round has one slice of every server process of both sides (process ``k`` of BASE is
target ``2k``, of CHANGE target ``2k + 1``), a second or so apart, in random order. Pairing
slices of the same round cancels the machine's slow drift, which is most of the noise on a
shared machine (docs/ab.md). Two processes of the same app still differ by a percent or two (memory
layout, hash seeds: Kalibera & Jones put this variance at the level of process executions),
and an interval over rounds alone cannot see it: with several processes per side the
log requests/s of every kept slice is fitted by least squares to a round effect plus a
process effect, the ratio is the exponentiated difference of the two sides' mean process
effects, and its interval is Student's t over the process effects, with ``2(K - 1)``
degrees of freedom (the top level of repetition). With one process per side the interval is
the paired rounds' t interval, and leaves the process-to-process variation out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pywebbench.analysis.group import Interval, Observation, fit_group
from pywebbench.analysis.ratio import RatioEstimate
from pywebbench.analysis.stats import median, t_interval


class Slice(Protocol):
    """What the estimate reads of a slice (the engine's ``SliceStats``): its round, its
    engine target, the requests it completed and its requests/s."""

    @property
    def round(self) -> int: ...
    @property
    def target(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def rps(self) -> float: ...


S = TypeVar("S", bound=Slice)

#: Fewest kept rounds before a CI is trusted to stop a run.
MIN_ROUNDS = 8

#: Why a round's pair is left out (None: kept). Gets (base slice, change slice).
DropRule = Callable[[S, S], str | None]


@dataclass(frozen=True)
class RoundPair(Generic[S]):
    """The slices of BASE's and CHANGE's process ``process`` in one round, and why the pair
    was dropped (None: kept)."""

    round: int
    base: S
    change: S
    dropped: str | None = None
    process: int = 0

    @property
    def log_ratio(self) -> float:
        """log(CHANGE/BASE) of the two slices' requests/s."""
        return math.log(self.change.rps / self.base.rps)


def pair_rounds(
    slices: Sequence[S], *, processes: int = 1, drop: DropRule[S] | None = None
) -> list[RoundPair[S]]:
    """The complete pairs, in round order: BASE's process ``k`` (target ``2k``) with CHANGE's
    process ``k`` (target ``2k + 1``) in each round where both have a slice."""
    by_round: dict[int, dict[int, S]] = {}
    for s in slices:
        by_round.setdefault(s.round, {})[s.target] = s
    out = []
    for r in sorted(by_round):
        got = by_round[r]
        for k in range(processes):
            b, c = got.get(target(0, k)), got.get(target(1, k))
            if b is None or c is None:
                continue
            why: str | None
            if b.requests == 0 or c.requests == 0:
                why = "a slice completed no request"
            else:
                why = drop(b, c) if drop is not None else None
            out.append(RoundPair(r, b, c, why, k))
    return out


def target(side: int, process: int) -> int:
    """The engine target of a side's (0: BASE, 1: CHANGE) server process: the sides
    alternate, so the engine's warm-up (in target order) favours neither."""
    return 2 * process + side


def side_process(target_index: int) -> tuple[int, int]:
    """(side, process) of an engine target: the inverse of :func:`target`."""
    return target_index % 2, target_index // 2


def kept_rounds(pairs: Sequence[RoundPair[S]]) -> int:
    """Rounds with at least one kept pair."""
    return len({p.round for p in pairs if p.dropped is None})


def paired_ratio(
    pairs: Sequence[RoundPair[S]],
    *,
    level: float = 0.95,
    processes: int = 1,
    stopping: bool = False,
) -> RatioEstimate | None:
    """CHANGE/BASE requests/s from the kept pairs, with its ``level`` CI (None: no interval
    can be had): over the processes when each side ran several (:func:`process_fit`; never
    over rounds then, even if the kept pairs come from one process only), else over the
    rounds. ``stopping``: the interval a stop rule judges
    (:meth:`pywebbench.analysis.group.GroupFit.for_stopping`), not the one to report."""
    kept = [p for p in pairs if p.dropped is None]
    if len(kept) < 2:
        return None
    medians = (median([p.base.rps for p in kept]), median([p.change.rps for p in kept]))
    if processes > 1:
        fit = process_fit(kept, level=level, stopping=stopping)
        if fit is None:
            return None
        ratio, low, high = fit
    else:
        logs = [p.log_ratio for p in kept]
        # Student's t on the log scale: t_interval takes the ratios and gives the interval
        # of their geometric mean (exp of the mean log-ratio)
        low, high = t_interval([math.exp(x) for x in logs], level=level)
        ratio = math.exp(sum(logs) / len(logs))
    return RatioEstimate(
        ratio=ratio, low=low, high=high, base_median=medians[0], new_median=medians[1]
    )


def processes_kept(pairs: Sequence[RoundPair[S]]) -> int:
    """Server processes a side with at least one kept pair."""
    return len({p.process for p in pairs if p.dropped is None})


def process_fit(
    kept: Sequence[RoundPair[S]], *, level: float = 0.95, stopping: bool = False
) -> tuple[float, float, float] | None:
    """(ratio, low, high) of CHANGE/BASE from the two-way fit of the kept pairs' slices: an
    interleaved group of two stacks (:func:`pywebbench.analysis.group.fit_group`: log
    requests/s = round effect + process effect; the interval is Student's t with the pooled
    variance of the process effects about their side's mean, 2(K - 1) degrees of freedom
    with K processes a side; ``stopping``: the variance a stop rule judges,
    :meth:`~pywebbench.analysis.group.GroupFit.for_stopping`). None when the fit has no degree
    of freedom, or when the kept pairs fall into groups of processes that share no round."""
    obs = [
        Observation(p.round, target(side, p.process), s.rps)
        for p in kept
        for side, s in ((0, p.base), (1, p.change))
    ]
    stack_of = {o.process: ("base", "change")[side_process(o.process)[0]] for o in obs}
    fit = fit_group(obs, stack_of, level=level)
    if fit is None or len(fit.levels) < 2 or fit.df < 1:
        return None
    est = (fit.for_stopping() if stopping else fit).ratio("change", "base")
    return est.ratio, est.low, est.high


def half_width(est: RatioEstimate) -> float:
    """The CI's larger side, relative to the ratio: 0.02 = the interval lies within +-2%
    (:attr:`pywebbench.analysis.group.Interval.half_width`; NaN without an interval)."""
    return Interval(est.ratio, est.low, est.high).half_width


def narrow_enough(est: RatioEstimate | None, kept: int, ci_width: float) -> bool:
    """True once at least :data:`MIN_ROUNDS` rounds are kept (``kept``:
    :func:`kept_rounds`) and the CI is within +-``ci_width``."""
    return est is not None and kept >= MIN_ROUNDS and half_width(est) <= ci_width
