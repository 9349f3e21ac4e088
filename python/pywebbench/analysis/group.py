"""The figures of an interleaved group: every stack's level from slices of the same rounds.

An interleaved group (docs/steady-state.md#the-interleaved-study) keeps several server
processes of every stack up at once on the same cores, and one engine run loads them in
short slices, every process once a round in a random order. Whatever the host does to the
cores within a round (steal, a slower core for a second) hits every process of that round
alike, so it is taken out by comparing slices of the same round.

**The fit.** The log requests/s of every kept slice is fitted by least squares to a round
effect plus a process effect::

    log rps(process p, round r) = a_r + b_p + e

A stack's level is the mean of its processes' effects. The difference of two stacks' levels
is their log ratio; a stack's ratio to the group's *reference* is its level less the
reference's (a named stack), or less the mean of every stack's level (the geometric mean of
the group; with families, of the stack's family). Slices missing from a round (a process
not yet warm, a slice dropped for interference) are simply absent: the fit needs no complete
rounds.

**The interval** is where the variance lives (Kalibera & Jones, ISMM 2013): between server
processes. Two processes of one app differ by a percent or two, and an interval over rounds
alone would not see it. The process effects' spread about their stack's level is pooled over
the group's stacks (``P - S`` degrees of freedom for ``P`` processes of ``S`` stacks), and a
ratio's interval is Student's t with that variance times the ratio's own weights
(``1/K_a + 1/K_b`` for two stacks of ``K`` processes). With two stacks this is exactly the
A/B estimate of :mod:`pywebbench.analysis.estimate`.

**Families.** Processes of different interpreters do not spread alike: PyPy's processes
settle a JIT and a collector each, and sat 5-12% apart where CPython's sat 1-2% apart
(2026-12-06/07). A group that holds both gives each *family* (``families``: a stack's
interpreter) its own pooled process variance; a ratio's variance is then the sum of each
family's variance times that family's part of the ratio's weights, with Welch-Satterthwaite
degrees of freedom. So a CPython pair's interval is what it would be in a group of its own,
and a PyPy/CPython ratio carries both spreads. The geometric-mean reference is then each
family's own (:meth:`GroupFit.basis`): a CPython stack's ratio to it is what it would be
without PyPy in the group.

**Stacks apart.** One process of one stack far from its peers widened every stack of its
family: in the EPYC's first quick study (2026-12-07) one uvicorn process read 22% below its
stack's other three, and the pooled spread put every CPython ratio at +-6.5% where the other
stacks' processes alone gave +-5.2%. A stack whose processes spread more than the family's
other stacks' do, by an F test of its variance against theirs at :data:`APART_P` (Bonferroni
over the stacks tested), gets a variance of its own (:func:`stacks_apart`, the worst first,
as long as two stacks stay pooled). Its intervals then carry its own spread on its own few
degrees of freedom (wide, as they should be), and the others' carry theirs. The *pools*
(:attr:`GroupFit.pools`) are the families with those stacks taken out; the geometric mean
stays the family's.

**What a stop rule judges** (:meth:`GroupFit.for_stopping`, :func:`widest`). A run stops
once its intervals are narrow enough, and it asks after every round. The spread of a few
process effects (6 degrees of freedom for 3 stacks of 3) is itself noisy: stopping at the
first round where it happens to be low picks the rounds where the interval is too narrow,
and the twins benchmark saw 3 of 20 equal stacks ranked apart that way beside a neighbour.
The stop rules therefore judge a variance never below what the slices' own noise gives a
process effect (the fit's residual variance over a process's slices, from hundreds of
degrees of freedom, so steady); the figures keep the plain interval. They judge the gaps of
the ranking (each stack against the one above it, which decide the ties), and every
stack's ratio to the reference.

Each process's warm-up is judged against the round too (its share of each round:
:func:`pywebbench.analysis.warmup.warm_round`); only its slices after it was warm are fitted.

**Open loops.** At a fixed offered rate every stack serves that rate: its req/s says
nothing, its latency does. A process's p50 and p99 are read from the histogram of its
measured slices merged, and each percentile is fitted as above with one observation per
process (:func:`fit_percentile`): a stack's figure is the geometric mean of its processes',
its interval (:meth:`GroupFit.level_interval`) Student's t over the processes' spread about
their stacks' levels, pooled over the stacks (per family with families). What a stop rule
judges is again never below the slices' own noise: the spread of the slices' own
percentiles, the round taken out, over a process's slices (:class:`LatencyFit`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

#: The group's reference when no stack is named: the geometric mean of every stack's level.
GEOMETRIC_MEAN = "geometric mean"
#: The F test's level, over the stacks tested, at which a stack's processes spread apart
#: from its family's others (module doc, "Stacks apart").
APART_P = 0.05


@dataclass(frozen=True)
class Observation:
    """One kept slice: its round, the server process that served it, its requests/s."""

    round: int
    process: int
    rps: float


@dataclass(frozen=True)
class Interval:
    """A ratio with its confidence interval (NaN bounds: no interval can be had)."""

    ratio: float
    low: float
    high: float
    #: Its degrees of freedom (fractional: Welch-Satterthwaite's across families); NaN:
    #: not given.
    df: float = math.nan

    @property
    def tie(self) -> bool:
        """The interval holds 1 (or there is none): not significantly different."""
        return not (self.low > 1.0 or self.high < 1.0)

    @property
    def half_width(self) -> float:
        """The interval's larger side relative to the ratio (0.02: within +-2%); NaN without
        an interval."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return math.nan
        return max(self.high / self.ratio - 1.0, 1.0 - self.low / self.ratio)

    def bounds_for(self, figure: float) -> tuple[float | None, float | None]:
        """The interval carried over to ``figure`` (the numerator's own value, e.g. a
        stack's req/s): ``figure`` times each bound over the ratio; None for a bound that
        is not finite."""
        return (
            figure * self.low / self.ratio if math.isfinite(self.low) else None,
            figure * self.high / self.ratio if math.isfinite(self.high) else None,
        )


@dataclass(frozen=True)
class GroupFit:
    """The fitted levels of a group's stacks (module doc)."""

    #: Stack name -> the mean effect of its processes (log scale, up to a shared constant).
    levels: Mapping[str, float]
    #: Stack name -> processes that contributed slices.
    counts: Mapping[str, int]
    #: Process -> its effect (log scale, same constant).
    process_effects: Mapping[int, float]
    #: The mean round effect (so that ``exp(level + mean_round)`` is req/s at the group's
    #: average round).
    mean_round: float
    #: Pooled variance of the process effects about their stack's level.
    variance: float
    df: int
    level: float = 0.95
    #: The variance a process effect has from its slices' noise alone: the fit's residual
    #: variance times the mean of 1 / (a process's slices). 0 when unknown.
    slice_noise: float = 0.0
    #: How far a slice sits off its round and process: the fit's residual standard deviation
    #: (log scale; 0.08: about 8%). 0 when unknown.
    slice_sd: float = 0.0
    #: Stack name -> its family (module doc, "Families"); empty: one family, the group.
    families: Mapping[str, str] = field(default_factory=dict)
    #: Stack name -> the pool its process variance is read from: its family, or itself when
    #: its processes spread apart from the family's others (module doc, "Stacks apart");
    #: empty: one pool, the group.
    pools: Mapping[str, str] = field(default_factory=dict)
    #: Pool -> (its pooled process variance, its degrees of freedom, its slice noise): set
    #: when the stacks fall in two or more pools.
    by_pool: Mapping[str, tuple[float, int, float]] = field(default_factory=dict)

    def for_stopping(self) -> GroupFit:
        """The fit a stop rule judges: its process variance no lower than
        :attr:`slice_noise` (module doc: a lucky low spread must not stop a run), each
        pool's no lower than its own."""
        return replace(
            self,
            variance=max(self.variance, self.slice_noise),
            by_pool={f: (max(v, noise), df, noise) for f, (v, df, noise) in self.by_pool.items()},
        )

    def apart(self) -> list[str]:
        """The stacks whose intervals carry their own process spread (module doc, "Stacks
        apart")."""
        return sorted(s for s, pool in self.pools.items() if pool == s)

    def rps(self, stack: str) -> float:
        """The stack's requests/s at the group's average round."""
        return math.exp(self.levels[stack] + self.mean_round)

    def level_interval(self, stack: str) -> Interval:
        """The stack's own figure (:meth:`rps`: a percentile fit's geometric mean of its
        processes' percentiles) with its interval over its processes: Student's t with the
        process variance over its ``K`` processes (the rounds' effects taken as known)."""
        return self._interval(
            self.levels[stack] + self.mean_round, {stack: 1.0 / self.counts[stack]}
        )

    def ratio(self, stack: str, other: str) -> Interval:
        """``stack`` / ``other`` with its interval."""
        d = self.levels[stack] - self.levels[other]
        return self._interval(d, {stack: 1.0 / self.counts[stack], other: 1.0 / self.counts[other]})

    def vs_reference(self, stack: str, reference: str | None = None) -> Interval:
        """``stack`` / the reference: a named stack, or (None) the geometric mean of every
        stack of the group."""
        if reference is not None and reference != GEOMETRIC_MEAN:
            if reference == stack:  # exactly 1: no interval to give
                return Interval(1.0, math.nan, math.nan)
            return self.ratio(stack, reference)
        basis = self.basis(stack)
        n = len(basis)
        if n < 2:  # a group of one stack is its own geometric mean
            return Interval(1.0, math.nan, math.nan)
        mean = sum(self.levels[s] for s in basis) / n
        d = self.levels[stack] - mean
        weights = {
            s: ((1.0 - 1.0 / n) ** 2 if s == stack else 1.0 / n**2) / self.counts[s] for s in basis
        }
        return self._interval(d, weights)

    def basis(self, stack: str) -> list[str]:
        """The stacks whose geometric mean is ``stack``'s reference: every stack of the
        group, or with families those of ``stack``'s family (a CPython stack's ratio to a
        mean that held PyPy's levels would carry PyPy's process spread; ratios across
        families are the pairs', :meth:`ratio`)."""
        if not self.families:
            return sorted(self.levels)
        mine = self.families.get(stack, "")
        return sorted(s for s in self.levels if self.families.get(s, "") == mine)

    def variance_of(self, weights: Mapping[str, float]) -> tuple[float, float]:
        """The variance of a contrast of the levels whose squared coefficients over their
        processes are ``weights`` (stack -> c**2 / K), and its degrees of freedom: the
        group's pooled variance, or with pools each pool's part, the degrees of freedom by
        Welch-Satterthwaite. NaN variance: no interval can be had."""
        if not self.by_pool:
            if self.df < 1 or not math.isfinite(self.variance):
                return math.nan, 0.0
            return self.variance * sum(weights.values()), float(self.df)
        parts: dict[str, float] = {}
        for s, w in weights.items():
            f = self.pools.get(s, "")
            parts[f] = parts.get(f, 0.0) + w
        total, spread = 0.0, 0.0
        for f, w in parts.items():
            variance, df, _ = self.by_pool.get(f, (math.nan, 0, 0.0))
            if w <= 0:
                continue
            if df < 1 or not math.isfinite(variance):
                return math.nan, 0.0
            total += variance * w
            spread += (variance * w) ** 2 / df
        if total <= 0 or spread <= 0:
            return total, float(self.df)
        return total, total**2 / spread

    def _interval(self, log_ratio: float, weights: Mapping[str, float]) -> Interval:
        ratio = math.exp(log_ratio)
        variance, df = self.variance_of(weights)
        if df < 1 or not math.isfinite(variance):
            return Interval(ratio, math.nan, math.nan)
        from pywebbench.analysis.stats import t_quantile

        half = t_quantile(0.5 + self.level / 2.0, df) * math.sqrt(variance)
        return Interval(ratio, math.exp(log_ratio - half), math.exp(log_ratio + half), df)


def fit_group(
    observations: Iterable[Observation],
    stack_of: Mapping[int, str],
    *,
    level: float = 0.95,
    families: Mapping[str, str] | None = None,
) -> GroupFit | None:
    """The two-way fit of a group's kept slices (module doc); None when no stack has a slice
    or when the slices fall into groups of processes that share no round (their levels
    cannot be compared). Processes missing from ``stack_of`` are left out. ``families``
    (stack -> family, e.g. its interpreter) gives each family its own process variance
    when the stacks fall in two or more (module doc, "Families"); a stack whose processes
    spread apart from its family's others gets its own (:func:`stacks_apart`)."""
    obs = [o for o in observations if o.process in stack_of and o.rps > 0]
    if not obs:
        return None
    rounds = sorted({o.round for o in obs})
    procs = sorted({o.process for o in obs})
    row_of = {r: i for i, r in enumerate(rounds)}
    col_of = {p: len(rounds) + i for i, p in enumerate(procs)}
    design = np.zeros((len(obs), len(rounds) + len(procs)))
    y = np.empty(len(obs))
    for i, o in enumerate(obs):
        design[i, row_of[o.round]] = 1.0
        design[i, col_of[o.process]] = 1.0
        y[i] = math.log(o.rps)
    # The effects are defined up to one constant (rank = columns - 1); differences of
    # process effects are not, unless the design falls apart into unconnected groups.
    if np.linalg.matrix_rank(design) < design.shape[1] - 1:
        return None
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    residual_df = len(obs) - (design.shape[1] - 1)
    residuals = y - design @ coef
    residual_var = float(np.sum(residuals**2)) / residual_df if residual_df > 0 else 0
    slices_of = Counter(o.process for o in obs)
    effects = {p: float(coef[col_of[p]]) for p in procs}
    by_stack: dict[str, list[float]] = {}
    for p in procs:
        by_stack.setdefault(stack_of[p], []).append(effects[p])
    levels = {s: sum(v) / len(v) for s, v in by_stack.items()}
    df = len(procs) - len(by_stack)
    spread = sum((e - levels[s]) ** 2 for s, v in by_stack.items() for e in v)
    family_of = {s: (families or {}).get(s, "") for s in by_stack}
    squares = {s: sum((e - levels[s]) ** 2 for e in v) for s, v in by_stack.items()}
    counts = {s: len(v) for s, v in by_stack.items()}

    def noise_of(stacks: list[str]) -> float:
        """The variance the slices' noise alone gives a process effect of ``stacks``: the
        residual variance of their own slices (the fit's residual degrees of freedom shared
        out by slices: a JIT's slices are noisier than CPython's) over a process's slices."""
        rows = [i for i, o in enumerate(obs) if stack_of[o.process] in stacks]
        mine = [p for p in procs if stack_of[p] in stacks]
        res_df = residual_df * len(rows) / len(obs)
        res = float(np.sum(residuals[rows] ** 2)) / res_df if res_df > 0 else 0.0
        return res * sum(1.0 / slices_of[p] for p in mine) / len(mine)

    pool_of = dict(family_of)
    for f in set(family_of.values()):
        mine = [s for s in by_stack if family_of[s] == f]
        floor = noise_of(mine)
        for s in stacks_apart({s: squares[s] for s in mine}, counts, floor):
            pool_of[s] = s
    by_pool: dict[str, tuple[float, int, float]] = {}
    if len(set(pool_of.values())) > 1:
        for f in set(pool_of.values()):
            mine = [s for s in by_stack if pool_of[s] == f]
            f_df = sum(counts[s] for s in mine) - len(mine)
            f_spread = sum(squares[s] for s in mine)
            by_pool[f] = (f_spread / f_df if f_df > 0 else math.nan, f_df, noise_of(mine))
    return GroupFit(
        levels=levels,
        counts={s: len(v) for s, v in by_stack.items()},
        process_effects=effects,
        mean_round=float(np.mean(coef[: len(rounds)])),
        variance=spread / df if df > 0 else math.nan,
        df=df,
        level=level,
        slice_noise=residual_var * sum(1.0 / n for n in slices_of.values()) / len(slices_of),
        slice_sd=math.sqrt(residual_var),
        families=family_of if len(set(family_of.values())) > 1 else {},
        pools=pool_of if by_pool else {},
        by_pool=by_pool,
    )


def stacks_apart(
    squares: Mapping[str, float],
    counts: Mapping[str, int],
    floor: float = 0.0,
    *,
    p: float = APART_P,
) -> list[str]:
    """The stacks of one family whose processes spread apart from the others' (module doc,
    "Stacks apart"), worst first. ``squares``: each stack's sum of squared process effects
    about its level; ``counts``: its processes; ``floor``: the variance the slices' noise
    alone gives a process effect. A stack is apart when the F test of its variance against
    the other stacks' pooled one falls below ``p`` over the stacks tested (Bonferroni); the
    worst such is taken out and the rest tested again, as long as two stacks stay pooled.
    The others' variance is judged no lower than ``floor`` (then as known: F on infinite
    degrees of freedom): once a spread stack is out, the stacks left may spread less than
    their slices' noise by chance, and each would in turn look apart from them."""
    import scipy.stats

    pooled = [s for s in sorted(squares) if counts[s] > 1]
    apart: list[str] = []
    while len(pooled) > 2:
        worst: tuple[float, str] | None = None
        for s in pooled:
            rest_df = sum(counts[o] - 1 for o in pooled if o != s)
            rest = sum(squares[o] for o in pooled if o != s) / rest_df
            mine = squares[s] / (counts[s] - 1)
            if mine <= 0:
                continue
            if rest < floor:
                rest, rest_df = floor, 0  # known: F(d, inf) is chi-squared(d) / d
            if rest <= 0:
                chance = 0.0
            elif rest_df == 0:
                d = counts[s] - 1
                chance = float(scipy.stats.chi2.sf(d * mine / rest, d))
            else:
                chance = float(scipy.stats.f.sf(mine / rest, counts[s] - 1, rest_df))
            if chance < p / len(pooled) and (worst is None or chance < worst[0]):
                worst = (chance, s)
        if worst is None:
            break
        apart.append(worst[1])
        pooled.remove(worst[1])
    return apart


def fit_percentile(
    by_process: Mapping[int, float],
    slices: Iterable[Observation],
    stack_of: Mapping[int, str],
    *,
    level: float = 0.95,
    families: Mapping[str, str] | None = None,
) -> GroupFit | None:
    """An open loop's latency percentile over processes (module doc, "Open loops"):
    ``by_process`` holds each process's percentile over its merged measured slices (us),
    one observation each; ``slices`` each measured slice's own percentile, whose spread
    (the round taken out) gives :attr:`GroupFit.slice_noise`, the floor a stop rule judges.
    None without a process."""
    fit = fit_group(
        [Observation(0, p, v) for p, v in by_process.items()],
        stack_of,
        level=level,
        families=families,
    )
    if fit is None:
        return None
    noise = fit_group(slices, stack_of, level=level, families=families)
    if noise is None:
        return fit
    return replace(
        fit,
        slice_noise=noise.slice_noise,
        slice_sd=noise.slice_sd,
        by_pool={
            f: (v, df, noise.by_pool.get(f, (0.0, 0, noise.slice_noise))[2])
            for f, (v, df, _) in fit.by_pool.items()
        },
    )


@dataclass(frozen=True)
class LatencyFit:
    """An open loop's figures: each stack's p50 and p99 over its processes
    (:func:`fit_percentile`)."""

    p50: GroupFit
    p99: GroupFit

    def widest(self) -> float:
        """The widest half-width a stop rule judges: every stack's p99 interval on
        :meth:`GroupFit.for_stopping` (the tail is what an open loop is run for, and the
        widest of the two); NaN when a stack has no interval."""
        judged = self.p99.for_stopping()
        widths = [judged.level_interval(s).half_width for s in judged.levels]
        return max(widths) if widths and all(math.isfinite(w) for w in widths) else math.nan


def ranked(fit: GroupFit) -> list[tuple[str, Interval | None]]:
    """The stacks fastest first, each with its ratio to the one above (None for the first):
    a tie when that interval holds 1."""
    order = sorted(fit.levels, key=lambda s: (-fit.levels[s], s))
    return [(s, None if i == 0 else fit.ratio(order[i - 1], s)) for i, s in enumerate(order)]


def widest(fit: GroupFit, reference: str | None = None) -> float:
    """The widest half-width a stop rule judges (module doc): of every gap of the ranking
    (:func:`ranked`) and of every stack's ratio to ``reference`` (None: the geometric mean),
    on :meth:`GroupFit.for_stopping`. NaN for a group of one stack, or without an interval."""
    if len(fit.levels) < 2:
        return math.nan
    judged = fit.for_stopping()
    gaps = [iv for _, iv in ranked(judged) if iv is not None]
    ratios = [judged.vs_reference(s, reference) for s in judged.levels if s != reference]
    widths = [iv.half_width for iv in gaps + ratios]
    return max(widths) if widths and all(math.isfinite(w) for w in widths) else math.nan


@dataclass(frozen=True)
class Disagreement:
    """Why a group's intervals are as wide as they are, when its processes disagree more
    than its slices do (:func:`disagreement`)."""

    stack: str  # the stack whose processes spread the most
    process: int  # its process furthest from the stack's level
    off: float  # that process's level over its stack's, less 1 (-0.06: 6% below)
    share: float  # the stack's part of the group's between-process sum of squares
    ratio: float  # the process variance over what the slices' noise alone would give

    def describe(self, name: Callable[[int], str] = str) -> str:
        """One line for the console and the report."""
        return (
            f"the processes disagree {self.ratio:.1f}x more than their slices' noise explains, "
            f"{self.share:.0%} of it in {self.stack} (process {name(self.process)} at "
            f"{self.off:+.1%} of its stack's level): more rounds will not narrow this; more "
            "processes of that stack would"
        )


def disagreement(
    fit: GroupFit, stack_of: Mapping[int, str], *, at_least: float = 2.0
) -> Disagreement | None:
    """Where the variance lives when it is between processes (Kalibera & Jones): None when
    the process effects spread no more than ``at_least`` times what the slices' noise gives
    a process effect (more rounds would then narrow the intervals), or without a spread.
    With pools (module doc: families, stacks apart), each pool is judged on its own spread
    and noise, and the one whose processes disagree most beyond their noise is named."""
    candidates: list[tuple[float, set[str]]] = []
    if fit.by_pool:
        for f, (variance, df, noise) in fit.by_pool.items():
            if df > 0 and math.isfinite(variance) and noise > 0:
                candidates.append((variance / noise, {s for s, g in fit.pools.items() if g == f}))
    elif fit.df > 0 and math.isfinite(fit.variance) and fit.slice_noise > 0:
        candidates.append((fit.variance / fit.slice_noise, set(fit.levels)))
    if not candidates:
        return None
    ratio, stacks = max(candidates, key=lambda c: c[0])
    if ratio < at_least:
        return None
    squares: dict[str, float] = {}
    for p, e in fit.process_effects.items():
        s = stack_of[p]
        if s in stacks:
            squares[s] = squares.get(s, 0.0) + (e - fit.levels[s]) ** 2
    total = sum(squares.values())
    if total <= 0:
        return None
    stack = max(squares, key=lambda s: squares[s])
    mine = [p for p in fit.process_effects if stack_of[p] == stack]
    worst = max(mine, key=lambda p: abs(fit.process_effects[p] - fit.levels[stack]))
    off = math.exp(fit.process_effects[worst] - fit.levels[stack]) - 1.0
    return Disagreement(stack, worst, off, squares[stack] / total, ratio)
