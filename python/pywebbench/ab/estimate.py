"""The paired ratio of an interleaved run: slices paired within rounds, log-ratio t interval.

Each round has one slice of BASE and one of CHANGE, a second or so apart, in random order.
Pairing them cancels the machine's slow drift, which is most of the noise on a shared
machine (docs/ab.md). The estimate is the geometric mean of CHANGE/BASE over the kept
rounds; its interval is Student's t interval of the mean log ratio, exponentiated. Rounds
are close to independent once paired: what is left is the fast noise within a round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pywebbench.compare.ratio import RatioEstimate
from pywebbench.load.sliced import SliceStats
from pywebbench.stats import median, t_interval

#: Fewest kept rounds before a CI is trusted to stop a run.
MIN_ROUNDS = 8

#: Why a round's pair is left out (None: kept). Gets (base slice, change slice).
DropRule = Callable[[SliceStats, SliceStats], str | None]


@dataclass(frozen=True)
class RoundPair:
    """The BASE and CHANGE slices of one round, and why the pair was dropped (None: kept)."""

    round: int
    base: SliceStats
    change: SliceStats
    dropped: str | None = None

    @property
    def log_ratio(self) -> float:
        """log(CHANGE/BASE) of the two slices' requests/s."""
        return math.log(self.change.rps / self.base.rps)


def pair_rounds(
    slices: Sequence[SliceStats], *, base: int = 0, change: int = 1, drop: DropRule | None = None
) -> list[RoundPair]:
    """The complete rounds' pairs of targets ``base`` and ``change``, in round order."""
    by_round: dict[int, dict[int, SliceStats]] = {}
    for s in slices:
        by_round.setdefault(s.round, {})[s.target] = s
    out = []
    for r in sorted(by_round):
        got = by_round[r]
        if base not in got or change not in got:
            continue
        b, c = got[base], got[change]
        why: str | None
        if b.requests == 0 or c.requests == 0:
            why = "a slice completed no request"
        else:
            why = drop(b, c) if drop is not None else None
        out.append(RoundPair(r, b, c, why))
    return out


def paired_ratio(pairs: Sequence[RoundPair], *, level: float = 0.95) -> RatioEstimate | None:
    """CHANGE/BASE requests/s from the kept pairs, with its ``level`` CI (None: fewer than 2)."""
    kept = [p for p in pairs if p.dropped is None]
    if len(kept) < 2:
        return None
    logs = [p.log_ratio for p in kept]
    # Student's t on the log scale: t_interval takes the ratios and gives the interval of
    # their geometric mean (exp of the mean log-ratio)
    low, high = t_interval([math.exp(x) for x in logs], level=level)
    mean = sum(logs) / len(logs)
    return RatioEstimate(
        ratio=math.exp(mean),
        low=low,
        high=high,
        base_median=median([p.base.rps for p in kept]),
        new_median=median([p.change.rps for p in kept]),
    )


def half_width(est: RatioEstimate) -> float:
    """The CI's larger side, relative to the ratio: 0.02 = the interval lies within +-2%."""
    return max(est.high / est.ratio - 1.0, 1.0 - est.low / est.ratio)


def narrow_enough(est: RatioEstimate | None, kept: int, ci_width: float) -> bool:
    """True once at least :data:`MIN_ROUNDS` pairs are kept and the CI is within
    +-``ci_width``."""
    return est is not None and kept >= MIN_ROUNDS and half_width(est) <= ci_width
