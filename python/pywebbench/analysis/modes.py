"""Consistency across processes: do a cell's replicates settle at one level or at several?

Barrett et al. (OOPSLA 2017) call a benchmark's process executions *consistent* when they
agree, and *inconsistent* when they do not. A cell whose PyPy replicates measured 2,940,
1,162 and 3,044 req/s has two modes, not one median with a wide interval: a wide interval
says only that something is wrong; the modes say what ("inconsistent: 2 of 3 processes at
~2,990, 1 at ~1,160").

The rule (:func:`modes`): sort the replicates' figures and group them from the lowest up;
a figure joins the current group while it is at most :data:`MODE_GAP` times the group's
lowest, else it starts a new one (no group spans more than the gap: a chain of figures each
within the gap of the next, 1,456, 1,710 and 2,073, spans 1.42x and is two levels, not
one). More than one group: the levels disagree. The gap is the issue's acceptance bound
turned around: a replicate below 0.8x the others is not noise (1/0.8 = 1.25); replicates of
one PyPy stack on this machine spread by up to 1.14-1.25x when they agree.

Pure functions: the runner's replicate budget calls :func:`levels_disagree`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Two figures more than this ratio apart (above over below) belong to different modes: no
#: mode spans more.
MODE_GAP = 1.25


@dataclass(frozen=True)
class Mode:
    """Replicates that settled at one level: their median figure and how many."""

    level: float
    count: int


@dataclass(frozen=True)
class Consistency:
    """A cell's modes, largest first (ties: the higher level first)."""

    modes: tuple[Mode, ...]

    @property
    def consistent(self) -> bool:
        return len(self.modes) <= 1

    @property
    def total(self) -> int:
        return sum(m.count for m in self.modes)

    def describe(self) -> str:
        """``consistent`` or ``inconsistent: 2 of 3 processes at ~2,990, 1 at ~1,160``."""
        if self.consistent:
            return "consistent"
        first, *rest = self.modes
        parts = [f"{first.count} of {self.total} processes at ~{_round3(first.level):,.0f}"]
        parts += [f"{m.count} at ~{_round3(m.level):,.0f}" for m in rest]
        return "inconsistent: " + ", ".join(parts)

    def to_list(self) -> list[list[float]]:
        """``[[level, count], ...]`` (stored in the cell's flags)."""
        return [[round(m.level, 1), m.count] for m in self.modes]


def _round3(x: float) -> float:
    """``x`` to 3 significant digits (1,162 -> 1,160): the modes are approximate."""
    if not x or not math.isfinite(x):
        return x
    digits = 2 - int(math.floor(math.log10(abs(x))))
    return round(x, digits)


def modes(figures: Sequence[float], *, gap: float = MODE_GAP) -> Consistency:
    """The modes of a cell's replicate figures (module doc); NaN figures are left out."""
    ys = sorted(float(y) for y in figures if math.isfinite(y))
    groups: list[list[float]] = []
    for y in ys:
        if groups and groups[-1][0] > 0 and y <= groups[-1][0] * gap:
            groups[-1].append(y)
        else:
            groups.append([y])
    found = [Mode(statistics.median(g), len(g)) for g in groups]
    found.sort(key=lambda m: (-m.count, -m.level))
    return Consistency(tuple(found))


def replicate_figures(rps_by_replicate: Sequence[Sequence[float]]) -> list[float]:
    """Each replicate's figure: the median of its measured iterations' req/s."""
    return [statistics.median(r) for r in rps_by_replicate if r]


def levels_disagree(figures: Sequence[float], *, gap: float = MODE_GAP) -> bool:
    """True when a cell's replicates settled at more than one level (:func:`modes`)."""
    return not modes(figures, gap=gap).consistent
