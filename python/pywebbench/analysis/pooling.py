"""The runs of one study pooled: a ratio that tomorrow's run and another machine should
reproduce, and how sure that is (docs/pooling.md).

A run (a day, a machine, a fresh set of processes) is the independent unit: its ratios move
from run to run by more than their within-run intervals say, and that between-run spread
can only be read from several runs (Kalibera & Jones 2013; Georges et al. 2007). Each
matched cell (stack, workload, load point, and what the ratio is to) is pooled over the
runs that measured it with a random-effects model on the log ratio, from
:func:`statsmodels.stats.meta_analysis.combine_effects`:

- each run's estimate is its log ratio with the variance its stored 95% interval implies
  (the interval is ``exp(log ratio +- t(0.975, df) * se)``: :mod:`pywebbench.analysis.group`);
- the between-run variance tau² by Paule-Mandel (``method_re="pm"``);
- the interval of the pooled ratio is Hartung-Knapp-Sidik-Jonkman's (the WLS scale, Student's
  t with runs - 1 degrees of freedom), never narrower than the random-effects one with the
  scale fixed at 1: the "modified" HKSJ (Röver, Knapp & Friede 2015), which differs only
  where tau² is estimated at 0, where plain HKSJ can be too narrow (IntHout et al. 2014);
- the 95% prediction interval for one more run's ratio is Higgins, Thompson & Spiegelhalter's
  (2009), ``mu +- t(0.975, runs - 2) * sqrt(tau² + se(mu)² + v)``, with ``v`` the new run's
  own within-run variance (the median of the pooled runs' when it is not known yet): the
  interval holds the ratio the next run will *report*, not its true ratio. It needs 3 runs.

With one run there is nothing to pool: its interval is within-run only (no tau, no
prediction interval). Runs that lack a stack pool what they have (:attr:`Pooled.runs` says
how many). Ratios to different references are different quantities: a named reference is
matched by name, the geometric mean of a group by the stacks it is over (a run that lacks a
stack has another geometric mean), so they pool apart; the ratios between two stacks
(:func:`pair_estimates`) do not depend on the reference and pool across them.

:func:`leave_one_out` is the check that the prediction intervals hold: each run's ratio
against the interval pooled from the other runs.
"""

from __future__ import annotations

import functools
import math
import statistics
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pywebbench.analysis.group import GEOMETRIC_MEAN

#: The level of every interval here.
LEVEL = 0.95


@dataclass(frozen=True, order=True)
class CellKey:
    """What a pooled ratio is: ``stack`` at ``workload`` and ``load_point``, over
    ``versus`` (a stack key, or :data:`GEOMETRIC_MEAN` over the stacks in ``basis``)."""

    workload: str
    load_point: str
    stack: str
    versus: str
    #: The stacks the geometric mean is over (empty for a named reference or a pair).
    basis: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``stack / versus @ workload load point`` as people read it."""
        over = f"geometric mean of {len(self.basis)}" if self.basis else self.versus
        return f"{self.stack} / {over} @ {self.workload} {self.load_point}"


@dataclass(frozen=True)
class RunEstimate:
    """One run's ratio of one cell, with its within-run 95% interval (None: it has none)."""

    run: str
    host: str  # what tells the run's machine apart (its CPU model)
    key: CellKey
    ratio: float
    low: float | None
    high: float | None
    df: int  # the degrees of freedom of its interval (Student's t)

    @property
    def log_ratio(self) -> float:
        return math.log(self.ratio)

    @property
    def variance(self) -> float | None:
        """The within-run variance of the log ratio its interval implies; None without a
        usable interval."""
        if self.low is None or self.high is None or self.df < 1:
            return None
        if not (0 < self.low < self.high and math.isfinite(self.high)):
            return None
        half = (math.log(self.high) - math.log(self.low)) / 2.0
        return (half / _t(self.df)) ** 2


@dataclass(frozen=True)
class Pooled:
    """One matched cell pooled over the runs that measured it (module doc)."""

    key: CellKey
    ratio: float
    #: The 95% interval of the pooled ratio (HKSJ); with one run, that run's within-run one.
    low: float | None
    high: float | None
    #: Between-run standard deviation of the log ratio (0.03: runs spread about 3%); None
    #: with one run.
    tau: float | None
    #: The 95% prediction interval for one more run's ratio; None below 3 runs.
    pred_low: float | None
    pred_high: float | None
    run_ids: tuple[str, ...]
    hosts: tuple[str, ...]
    #: Runs of this cell left out for want of a within-run interval.
    without_interval: int = 0

    @property
    def runs(self) -> int:
        return len(self.run_ids)

    @property
    def within_only(self) -> bool:
        """One run: its interval says how sure that run is, not where the next will land."""
        return self.runs == 1

    @property
    def tau_pct(self) -> float | None:
        """tau as the relative spread of a run's ratio (``exp(tau) - 1``, 0.031: 3.1%)."""
        return math.expm1(self.tau) if self.tau is not None else None

    def holds(self, ratio: float) -> bool | None:
        """Whether ``ratio`` falls inside the prediction interval; None without one."""
        if self.pred_low is None or self.pred_high is None:
            return None
        return self.pred_low <= ratio <= self.pred_high


def reference_estimate(
    run: str, host: str, stack: str, workload: str, load_point: str, group: Mapping[str, Any]
) -> RunEstimate | None:
    """A cell's ratio to its group's reference from its ``flags["group"]`` (written by
    ``run/interleaved.py``); None for the reference itself (exactly 1, no interval) or
    flags without a ratio."""
    reference = str(group.get("reference") or GEOMETRIC_MEAN)
    ratio = group.get("ratio")
    if reference == stack or not isinstance(ratio, int | float) or not ratio > 0:
        return None
    basis: tuple[str, ...] = ()
    if reference == GEOMETRIC_MEAN:
        # the stacks its geometric mean is over (stored since a group held several
        # interpreters: each interpreter's own); before, every stack of the group
        given = group.get("basis")
        basis = tuple(sorted(given if given else {stack, *(group.get("vs") or {})}))
    return RunEstimate(
        run=run,
        host=host,
        key=CellKey(workload, load_point, stack, reference, basis),
        ratio=float(ratio),
        low=_bound(group.get("low")),
        high=_bound(group.get("high")),
        df=int(group.get("df") or 0),
    )


def pair_estimates(
    run: str, host: str, stack: str, workload: str, load_point: str, group: Mapping[str, Any]
) -> list[RunEstimate]:
    """A cell's ratios to every other stack of its group (``flags["group"]["vs"]``): the
    ranked gaps, which do not depend on the group's reference."""
    out = []
    df = int(group.get("df") or 0)
    for other, triple in sorted((group.get("vs") or {}).items()):
        ratio, low, high = (list(triple) + [None, None, None])[:3]
        if not isinstance(ratio, int | float) or not ratio > 0:
            continue
        key = CellKey(workload, load_point, stack, str(other))
        out.append(RunEstimate(run, host, key, float(ratio), _bound(low), _bound(high), df))
    return out


@functools.lru_cache(maxsize=256)
def _t(df: int) -> float:
    """The two-sided :data:`LEVEL` quantile of Student's t with ``df`` degrees of freedom."""
    from pywebbench.analysis.stats import t_quantile

    return t_quantile(0.5 + LEVEL / 2.0, df)


def _bound(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def pool_cell(
    estimates: Sequence[RunEstimate], *, new_variance: float | None = None
) -> Pooled | None:
    """The runs' estimates of one cell pooled (module doc); None when none has a ratio.

    ``new_variance``: the within-run variance (log scale) of the run the prediction interval
    is for; default the median of the pooled runs'."""
    if not estimates:
        return None
    key = estimates[0].key
    usable = [(e, v) for e in estimates if (v := e.variance) is not None and v > 0]
    lacking = len(estimates) - len(usable)
    if len(usable) < 2:
        one = usable[0][0] if usable else estimates[0]
        return Pooled(
            key=key,
            ratio=one.ratio,
            low=one.low if usable else None,
            high=one.high if usable else None,
            tau=None,
            pred_low=None,
            pred_high=None,
            run_ids=(one.run,),
            hosts=(one.host,),
            without_interval=lacking,
        )
    import numpy as np
    from statsmodels.stats.meta_analysis import combine_effects

    y = np.array([e.log_ratio for e, _ in usable])
    variances = [v for _, v in usable]
    with warnings.catch_warnings():  # tau² = 0 divides by zero in unused statistics
        warnings.simplefilter("ignore", RuntimeWarning)
        res = combine_effects(y, np.array(variances), method_re="pm", use_t=True, alpha=1.0 - LEVEL)
        _, ci_re, _, ci_hksj = res.conf_int(alpha=1.0 - LEVEL, use_t=True)
    mu = float(res.mean_effect_re)
    low = min(float(ci_re[0]), float(ci_hksj[0]))  # the modified HKSJ (module doc)
    high = max(float(ci_re[1]), float(ci_hksj[1]))
    tau2 = max(0.0, float(res.tau2))
    pred: tuple[float | None, float | None] = (None, None)
    k = len(usable)
    if k >= 3:
        se2 = max(float(res.var_hksj_re), float(res.var_eff_w_re))
        within = new_variance if new_variance is not None else statistics.median(variances)
        half = _t(k - 2) * math.sqrt(tau2 + se2 + within)
        pred = (math.exp(mu - half), math.exp(mu + half))
    return Pooled(
        key=key,
        ratio=math.exp(mu),
        low=math.exp(low),
        high=math.exp(high),
        tau=math.sqrt(tau2),
        pred_low=pred[0],
        pred_high=pred[1],
        run_ids=tuple(e.run for e, _ in usable),
        hosts=tuple(sorted({e.host for e, _ in usable})),
        without_interval=lacking,
    )


def matched(estimates: Iterable[RunEstimate]) -> dict[CellKey, list[RunEstimate]]:
    """The estimates by the cell they are of, one per run (a run's first), in key order."""
    out: dict[CellKey, dict[str, RunEstimate]] = {}
    for e in estimates:
        out.setdefault(e.key, {}).setdefault(e.run, e)
    return {k: list(out[k].values()) for k in sorted(out)}


def pool(estimates: Iterable[RunEstimate]) -> list[Pooled]:
    """Every matched cell of ``estimates`` pooled over its runs, in key order."""
    out = []
    for group in matched(estimates).values():
        pooled = pool_cell(group)
        if pooled is not None:
            out.append(pooled)
    return out


def most_runs(pooled: Iterable[Pooled]) -> tuple[list[Pooled], int]:
    """For each stack at each workload and load point, the pooled cell over the most runs
    (ratios to another reference, such as the geometric mean of a run that lacks a stack,
    pool apart: module doc), in ``pooled``'s order; and how many run figures those set
    apart hold."""
    chosen: dict[tuple[str, str, str], Pooled] = {}
    apart = 0
    for p in pooled:
        where = (p.key.workload, p.key.load_point, p.key.stack)
        best = chosen.get(where)
        if best is None or p.runs > best.runs:
            apart += best.runs if best is not None else 0
            chosen[where] = p
        else:
            apart += p.runs
    return list(chosen.values()), apart


@dataclass(frozen=True)
class Miss:
    """A run's ratio outside the prediction interval pooled from the other runs."""

    run: str
    key: CellKey
    ratio: float
    pred_low: float
    pred_high: float

    @property
    def off(self) -> float:
        """How far outside, relative to the nearer bound (+0.04: 4% above the interval)."""
        if self.ratio > self.pred_high:
            return self.ratio / self.pred_high - 1.0
        return self.ratio / self.pred_low - 1.0


@dataclass(frozen=True)
class Coverage:
    """The leave-one-out check: how many runs' ratios fell inside the prediction interval
    pooled from the other runs of their cell."""

    checked: int
    inside: int
    misses: list[Miss] = field(default_factory=list)

    @property
    def share(self) -> float | None:
        """inside / checked (None when nothing could be checked)."""
        return self.inside / self.checked if self.checked else None


def leave_one_out(estimates: Iterable[RunEstimate], *, min_others: int = 3) -> Coverage:
    """Each run's ratio of each cell against the prediction interval pooled from the
    cell's other runs (at least ``min_others`` of them with an interval: a prediction
    interval needs 3), with the left-out run's own within-run variance: the acceptance
    check of docs/pooling.md. Cells with fewer runs are not checked."""
    checked = inside = 0
    misses: list[Miss] = []
    for group in matched(estimates).values():
        usable = [e for e in group if e.variance is not None and e.variance > 0]
        if len(usable) < min_others + 1:
            continue
        for i, e in enumerate(usable):
            others = usable[:i] + usable[i + 1 :]
            pooled = pool_cell(others, new_variance=e.variance)
            if pooled is None or pooled.pred_low is None or pooled.pred_high is None:
                continue
            checked += 1
            miss = _outside(pooled, e)
            inside += miss is None
            misses += [miss] if miss is not None else []
    return Coverage(checked, inside, misses)


def _outside(p: Pooled, e: RunEstimate) -> Miss | None:
    """``e``'s ratio against ``p``'s prediction interval: None inside (or without one)."""
    if p.pred_low is None or p.pred_high is None or p.holds(e.ratio):
        return None
    return Miss(e.run, e.key, e.ratio, p.pred_low, p.pred_high)


@dataclass(frozen=True)
class RunCheck:
    """One run held against a table pooled from other runs (:func:`check_run`)."""

    #: Ratios of the run whose cell has a prediction interval in the table.
    checked: int
    inside: int
    #: The ratios outside their prediction interval.
    misses: list[Miss] = field(default_factory=list)
    #: Ratios to another reference than the table's for that stack (the run lacks, or has
    #: more, stacks in its group, so its geometric mean is over other stacks).
    other_reference: int = 0
    #: Ratios of cells the table has no prediction interval for (fewer than 3 runs).
    without_interval: int = 0
    #: Ratios of cells the table does not have at all.
    not_in_table: int = 0
    #: The table's cells (stack, workload, load point) the run did not measure.
    lacking: list[CellKey] = field(default_factory=list)


def check_run(table: Sequence[Pooled], run: Iterable[RunEstimate]) -> RunCheck:
    """Each of ``run``'s ratios against the prediction interval of the same cell of
    ``table`` (cells pooled from other runs, as :func:`most_runs` chose them): how many
    fall inside, which fall outside and by how much, and what could not be compared."""
    rows = {p.key: p for p in table}
    places = {(p.key.workload, p.key.load_point, p.key.stack) for p in table}
    checked = inside = other = without = absent = 0
    misses: list[Miss] = []
    seen: set[tuple[str, str, str]] = set()
    for e in run:
        place = (e.key.workload, e.key.load_point, e.key.stack)
        seen.add(place)
        row = rows.get(e.key)
        if row is None:
            if place in places:
                other += 1
            else:
                absent += 1
            continue
        if row.pred_low is None or row.pred_high is None:
            without += 1
            continue
        checked += 1
        miss = _outside(row, e)
        inside += miss is None
        misses += [miss] if miss is not None else []
    lacking = sorted(p.key for p in table if (p.key.workload, p.key.load_point, p.key.stack)
                     not in seen)  # fmt: skip
    return RunCheck(checked, inside, misses, other, without, absent, lacking)


def rebased(estimates: Iterable[RunEstimate], basis: Sequence[str]) -> list[RunEstimate]:
    """The ratios to the geometric mean of a wider group, re-expressed over the geometric
    mean of ``basis`` (a run that lacks a stack has its mean over fewer): for each run whose
    group holds every stack of ``basis``, each such stack's log ratio less the mean of those
    stacks' log ratios. The point estimates are exact; each keeps its own within-run
    interval's width, an approximation (the ratio to a mean over fewer stacks is a little
    less sure), small beside the spread between runs that the pooling adds."""
    want = tuple(sorted(basis))
    groups: dict[tuple[str, str, str, tuple[str, ...]], dict[str, RunEstimate]] = {}
    for e in estimates:
        if e.key.versus != GEOMETRIC_MEAN or not set(want) < set(e.key.basis):
            continue
        where = (e.run, e.key.workload, e.key.load_point, e.key.basis)
        groups.setdefault(where, {})[e.key.stack] = e
    out = []
    for (_, workload, load_point, _), cells in sorted(groups.items()):
        if not all(s in cells for s in want):
            continue
        shift = statistics.fmean(cells[s].log_ratio for s in want)
        factor = math.exp(-shift)
        for s in want:
            e = cells[s]
            out.append(
                RunEstimate(
                    e.run,
                    e.host,
                    CellKey(workload, load_point, s, GEOMETRIC_MEAN, want),
                    e.ratio * factor,
                    e.low * factor if e.low is not None else None,
                    e.high * factor if e.high is not None else None,
                    e.df,
                )
            )
    return out
