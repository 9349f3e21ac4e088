"""Elasticity: how far a figure follows the speed of the core it was measured on.

The least-squares slope of log figure on log core rate, over groups of points that each have
their own level (each group centred on its own means: a regression adjustment, as CUPED's),
kept within bounds, and not claimed where the points cannot show one. The core's rate comes
from :mod:`pywebbench.meter.core_speed`, which scales a study's figures with it; an
interleaved run's slices use the same slope (:mod:`pywebbench.meter.slice_speed`).
docs/interference.md#core-speed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

#: Fewest points (measured iterations with a core rate) an elasticity needs; below,
#: or when their rates vary by less than :data:`ELASTICITY_MIN_SPREAD`, it is
#: :data:`UNIDENTIFIED_ELASTICITY`.
ELASTICITY_MIN_POINTS = 8
#: The elasticity of a group whose own figures cannot show it: 0, figures as measured. The
#: probe's reading can be off by a quarter for a whole server process while the server is
#: not (three probes on one core disagreed by more than 8% in 11-13 of 36 windows:
#: benchmarks/probe_agreement.py), so a figure is scaled only as far as its study shows that
#: the server followed.
UNIDENTIFIED_ELASTICITY = 0.0
#: Least standard deviation of the within-cell log core rates that identifies a slope.
ELASTICITY_MIN_SPREAD = 0.03
#: The elasticity is kept within these bounds.
ELASTICITY_BOUNDS = (0.0, 1.5)


def centred_logs(
    groups: Iterable[Sequence[tuple[float, float]]],
) -> tuple[list[float], list[float]]:
    """The log rates and log figures of (core rate, figure) points, each group centred on
    its own means (groups of fewer than two positive points left out)."""
    xs: list[float] = []
    ys: list[float] = []
    for group in groups:
        points = [(math.log(r), math.log(v)) for r, v in group if r > 0 and v > 0]
        if len(points) < 2:
            continue
        mx = statistics.fmean(x for x, _ in points)
        my = statistics.fmean(y for _, y in points)
        xs += [x - mx for x, _ in points]
        ys += [y - my for _, y in points]
    return xs, ys


def pooled_slope(groups: Iterable[Sequence[tuple[float, float]]]) -> float:
    """The elasticity of (core rate, figure) points in groups that each have their own level:
    the least-squares slope of log figure on log rate, each group centred on its own means,
    within :data:`ELASTICITY_BOUNDS`; :data:`UNIDENTIFIED_ELASTICITY` with fewer than
    :data:`ELASTICITY_MIN_POINTS` points or rates whose spread is below
    :data:`ELASTICITY_MIN_SPREAD`."""
    xs, ys = centred_logs(groups)
    if len(xs) < ELASTICITY_MIN_POINTS or statistics.pstdev(xs) < ELASTICITY_MIN_SPREAD:
        return UNIDENTIFIED_ELASTICITY
    slope = sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    low, high = ELASTICITY_BOUNDS
    return min(high, max(low, slope))


def speed_factor(rate: float, reference: float, elasticity: float = 1.0) -> float:
    """What a figure measured on a core running at ``rate`` is multiplied by to read as at
    the ``reference`` rate: ``(reference / rate) ** elasticity``. With elasticity 1, req/s
    measured on a core 10% slower than the reference read 1/0.9 of themselves; a time per
    unit of work (CPU per request) follows the inverse, ``-elasticity``."""
    return float((reference / rate) ** elasticity)


def at_one_speed(
    values: Sequence[float],
    rates: Sequence[float | None],
    reference: float | None,
    elasticity: float = 1.0,
) -> list[float]:
    """``values`` measured at core ``rates``, each times :func:`speed_factor`.

    Unchanged when the reference or any rate is unknown: figures are scaled all together or
    not at all, never some of them."""
    if reference is None or len(rates) != len(values) or any(not r for r in rates):
        return list(values)
    return [
        v * speed_factor(float(r or 1), reference, elasticity)
        for v, r in zip(values, rates, strict=True)
    ]
