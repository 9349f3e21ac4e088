"""Runs pooled (analysis/pooling.py): the random-effects estimate's coverage against simulated
runs with a known tau, its degenerate cases (one run, two, tau 0, a run without a stack,
other references), the matching of runs, and the leave-one-out check.

Every simulation is seeded, so each coverage figure is fixed; the figures asserted hold with
a wide margin (their binomial standard error at 2,000 draws is 0.5%).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pywebbench.analysis.group import GEOMETRIC_MEAN, Observation, fit_group
from pywebbench.analysis.pooling import (
    CellKey,
    RunEstimate,
    leave_one_out,
    matched,
    pair_estimates,
    pool,
    pool_cell,
    reference_estimate,
)
from pywebbench.analysis.stats import t_quantile

DF = 4  # a group of 2 stacks x 3 processes
T = t_quantile(0.975, DF)
KEY = CellKey("hello", "c64", "a", "b")


def run(name: str, log_ratio: float, se: float, *, host: str = "h", key: CellKey = KEY) -> Any:
    """A run's estimate with the interval a group with ``DF`` degrees of freedom stores."""
    return RunEstimate(
        name,
        host,
        key,
        math.exp(log_ratio),
        math.exp(log_ratio - T * se),
        math.exp(log_ratio + T * se),
        DF,
    )


def simulate(tau: float, *, k: int = 6, draws: int = 2000, seed: int = 65) -> dict[str, float]:
    """``draws`` studies of ``k`` runs of a true ratio 1.2, runs spread by ``tau`` (log
    scale), each run's within-run standard error drawn from 0.5%..2% and estimated over
    ``DF`` degrees of freedom (as a group's is); one more run each, for the prediction
    interval. Returns the share of studies whose HKSJ interval holds 1.2 ("ci"), whose
    prediction interval holds the next run's ratio ("pi"), and the median half-width of the
    interval ("half")."""
    rng = np.random.default_rng(seed)
    mu = math.log(1.2)
    ci = pi = 0
    halves = []
    for _ in range(draws):
        sd = rng.uniform(0.005, 0.02, size=k + 1)
        se = sd * np.sqrt(rng.chisquare(DF, size=k + 1) / DF)  # each run's estimate of sd
        y = mu + rng.normal(0.0, tau, size=k + 1) + rng.normal(0.0, sd)
        runs = [run(str(i), float(y[i]), float(se[i])) for i in range(k + 1)]
        p = pool_cell(runs[:k], new_variance=runs[k].variance)
        assert p is not None and p.low is not None and p.high is not None
        assert p.pred_low is not None and p.pred_high is not None
        ci += p.low <= 1.2 <= p.high
        pi += p.pred_low <= runs[k].ratio <= p.pred_high
        halves.append(p.high / p.ratio - 1.0)
    return {"ci": ci / draws, "pi": pi / draws, "half": float(np.median(halves))}


# ------------------------------------------------------------------------------ coverage


def test_six_runs_with_a_3_percent_tau_cover_the_true_ratio_and_the_next_run() -> None:
    """tau 3% (a between-run spread a few times the within-run floor): the HKSJ interval
    holds the true ratio in 94.6% of 2,000 studies of 6 runs, the prediction interval the
    7th run's ratio in 96.2%; the interval is about +-3.3% wide, not the +-0.5% the runs'
    own intervals would pool to without tau."""
    got = simulate(0.03)
    assert got["ci"] >= 0.93 and got["pi"] >= 0.93
    assert got["ci"] == pytest.approx(0.9455, abs=1e-9)  # seeded: fixed
    assert got["pi"] == pytest.approx(0.962, abs=1e-9)
    assert 0.025 < got["half"] < 0.045


def test_six_runs_with_no_tau_keep_their_coverage_and_a_narrow_interval() -> None:
    """tau 0: Paule-Mandel reads 0 in most studies, where plain HKSJ can be too narrow;
    the modified interval still holds the true ratio in 95.5% of 1,000 studies (the next run in
    97.4%), and is +-1.2% wide."""
    got = simulate(0.0, draws=1000)
    assert got["ci"] >= 0.93 and got["pi"] >= 0.93
    assert got["half"] < 0.015


# ------------------------------------------------------------------ the pooled figures


def test_the_pooled_figures_are_paule_mandels_and_hksjs() -> None:
    """tau² solves Paule-Mandel's equation (the weighted squares about the mean equal
    runs - 1); the interval is the mean +- t(runs - 1) times the HKSJ standard error; the
    prediction interval is t(runs - 2) wide on tau² + se² + the median run variance."""
    logs = [0.18, 0.21, 0.15, 0.22, 0.17, 0.20]
    ses = [0.004, 0.006, 0.005, 0.008, 0.004, 0.006]
    p = pool_cell([run(str(i), y, s) for i, (y, s) in enumerate(zip(logs, ses, strict=True))])
    assert p is not None and p.tau is not None and p.low is not None and p.high is not None
    var = [run("x", 0.0, s).variance for s in ses]
    assert var[0] == pytest.approx(0.004**2)  # the variance read back from the interval
    w = [1.0 / (v + p.tau**2) for v in var]
    mu = sum(wi * y for wi, y in zip(w, logs, strict=True)) / sum(w)
    assert math.log(p.ratio) == pytest.approx(mu)
    q = sum(wi * (y - mu) ** 2 for wi, y in zip(w, logs, strict=True))
    assert q == pytest.approx(len(logs) - 1, abs=1e-3)
    assert p.tau == pytest.approx(0.0257, abs=1e-4)  # runs ~2.5% apart, within-run ~0.5%
    se = math.sqrt(q / (len(logs) - 1) / sum(w))
    half = t_quantile(0.975, 5) * se
    assert (math.log(p.low), math.log(p.high)) == pytest.approx((mu - half, mu + half))
    within = sorted(var)[2:4]
    pred = t_quantile(0.975, 4) * math.sqrt(p.tau**2 + se**2 + sum(within) / 2)
    assert p.pred_low is not None and p.pred_high is not None
    assert math.log(p.pred_high) == pytest.approx(mu + pred, rel=1e-3)
    assert p.runs == 6 and p.hosts == ("h",) and not p.within_only
    assert p.tau_pct == pytest.approx(math.expm1(p.tau))


def test_one_run_is_within_run_only() -> None:
    one = run("r1", math.log(1.3), 0.01)
    p = pool_cell([one])
    assert p is not None and p.within_only and p.runs == 1
    assert (p.ratio, p.low, p.high) == (one.ratio, one.low, one.high)  # its own interval
    assert p.tau is None and p.pred_low is None and p.pred_high is None
    assert p.holds(1.3) is None


def test_two_runs_give_tau_and_a_wide_interval_but_no_prediction() -> None:
    p = pool_cell([run("r1", 0.10, 0.01), run("r2", 0.16, 0.01)])
    assert p is not None and p.runs == 2 and p.tau is not None and p.low is not None
    assert p.tau == pytest.approx(math.sqrt(0.0017))  # 2 * (0.06 / 2)^2 - 0.01^2
    assert math.log(p.ratio) == pytest.approx(0.13)
    assert p.low < math.exp(0.10) and p.high is not None and p.high > math.exp(0.16)
    assert p.pred_low is None and p.pred_high is None  # 3 runs needed


def test_runs_that_agree_read_tau_0_and_keep_the_within_run_width() -> None:
    """Six runs at the same ratio: tau 0 and the HKSJ scale 0; the interval is the
    fixed-scale one (mean +- t(5) * sqrt(1 / sum of weights)), not a point."""
    p = pool_cell([run(str(i), 0.2, 0.01) for i in range(6)])
    assert p is not None and p.tau == 0.0 and p.low is not None and p.high is not None
    half = t_quantile(0.975, 5) * 0.01 / math.sqrt(6)
    assert math.log(p.high) - 0.2 == pytest.approx(half)
    assert p.ratio == pytest.approx(math.exp(0.2))


def test_a_run_without_an_interval_is_left_out_and_counted() -> None:
    bare = RunEstimate("r3", "h", KEY, 1.5, None, None, 0)
    p = pool_cell([run("r1", 0.1, 0.01), run("r2", 0.12, 0.01), bare])
    assert p is not None and p.runs == 2 and p.without_interval == 1
    assert set(p.run_ids) == {"r1", "r2"}


# ------------------------------------------------------------------------- matching


def group_flags(
    stacks: dict[str, tuple[float, float, float]],
    me: str,
    *,
    reference: str = GEOMETRIC_MEAN,
    vs: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    ratio, low, high = stacks[me]
    return {
        "reference": reference,
        "df": DF,
        "ratio": ratio,
        "low": low,
        "high": high,
        "vs": vs if vs is not None else {o: [1.0, 0.9, 1.1] for o in stacks if o != me},
    }


def test_runs_are_matched_by_stack_workload_and_load_point() -> None:
    es = [
        run("r1", 0.1, 0.01),
        run("r2", 0.2, 0.01),
        run("r1", 0.5, 0.01, key=CellKey("hello", "c16", "a", "b")),
        run("r1", 0.9, 0.01, key=CellKey("json", "c64", "a", "b")),
        run("r2", 0.3, 0.01, key=CellKey("hello", "c64", "c", "b")),
        run("r2", 0.7, 0.01),  # a second estimate of a cell in one run: the first is kept
    ]
    groups = matched(es)
    assert [len(g) for g in groups.values()] == [1, 2, 1, 1]
    assert [e.log_ratio for e in groups[KEY]] == pytest.approx([0.1, 0.2])
    pooled = {p.key: p for p in pool(es)}
    assert pooled[KEY].runs == 2 and pooled[CellKey("hello", "c16", "a", "b")].within_only


def test_a_run_without_a_stack_pools_what_it_has_and_its_geometric_mean_apart() -> None:
    """Three runs of stacks a, b, c; run r3 lacks c. With a named reference (b) a's ratio
    pools over all three runs and c's over two; with the geometric mean, r3's mean is over
    other stacks, so its ratios pool apart; the ratios between stacks pool over every run
    that has both."""
    three = {"a": (1.2, 1.1, 1.3), "b": (1.0, 0.9, 1.1), "c": (0.8, 0.7, 0.9)}
    two = {"a": (1.1, 1.0, 1.2), "b": (0.9, 0.8, 1.0)}
    named, geo, pairs = [], [], []
    for r, stacks in (("r1", three), ("r2", three), ("r3", two)):
        for s in stacks:
            flags = group_flags(stacks, s, reference="b")
            est = reference_estimate(r, "h", s, "hello", "c64", flags)
            if est is not None:
                named.append(est)
            geo_est = reference_estimate(r, "h", s, "hello", "c64", group_flags(stacks, s))
            assert geo_est is not None
            geo.append(geo_est)
            pairs += pair_estimates(r, "h", s, "hello", "c64", flags)
    by_stack = {p.key.stack: p.runs for p in pool(named)}
    assert by_stack == {"a": 3, "c": 2}  # b is the reference: exactly 1, nothing to pool
    geo_runs = sorted((p.key.stack, len(p.key.basis), p.runs) for p in pool(geo))
    assert geo_runs == [("a", 2, 1), ("a", 3, 2), ("b", 2, 1), ("b", 3, 2), ("c", 3, 2)]
    pair_runs = {(p.key.stack, p.key.versus): p.runs for p in pool(pairs)}
    assert pair_runs[("a", "b")] == 3 and pair_runs[("a", "c")] == 2


def test_a_groups_stored_interval_reads_back_as_its_fits_variance() -> None:
    """The flags a group stores (run/interleaved.py: ``vs_reference`` and ``ratio``) give
    back the variance of the fit's log ratio, so a run is weighted by what it measured."""
    levels = {0: 1000.0, 1: 1500.0, 2: 1010.0, 3: 1485.0, 4: 990.0, 5: 1515.0}
    stack_of = {p: "ab"[p % 2] for p in levels}
    obs = [
        Observation(r, p, rps * (1 + 0.1 * math.sin(r)) * (1 + 0.002 * math.cos(7 * r + p)))
        for r in range(12)
        for p, rps in levels.items()
    ]
    fit = fit_group(obs, stack_of)
    assert fit is not None and fit.df == DF
    vs = fit.ratio("b", "a")
    flags = {"reference": "a", "df": fit.df, "ratio": vs.ratio, "low": vs.low, "high": vs.high}
    est = reference_estimate("r1", "h", "b", "hello", "c64", flags)
    assert est is not None and est.variance is not None
    assert est.variance == pytest.approx(fit.variance * (1 / 3 + 1 / 3), rel=1e-9)
    assert est.ratio == pytest.approx(1.5, rel=0.01)


# ------------------------------------------------------------------------ leave one out


def test_leave_one_out_finds_the_run_that_landed_elsewhere() -> None:
    """Seven runs 1-2% apart and one 15% off: the seven fall inside the interval pooled
    from the others, the eighth does not, and the miss says by how much."""
    logs = [0.20, 0.21, 0.19, 0.205, 0.195, 0.215, 0.20]
    es = [run(f"r{i}", y, 0.005) for i, y in enumerate(logs)]
    es.append(run("off", 0.20 + math.log(1.15), 0.005))
    cov = leave_one_out(es)
    assert cov.checked == 8
    assert [m.run for m in cov.misses] == ["off"]
    assert cov.inside == 7 and cov.share == pytest.approx(7 / 8)
    miss = cov.misses[0]
    assert miss.off == pytest.approx(miss.ratio / miss.pred_high - 1.0) and 0.0 < miss.off < 0.15


def test_leave_one_out_skips_cells_with_too_few_runs() -> None:
    cov = leave_one_out([run(f"r{i}", 0.2, 0.01) for i in range(3)])
    assert (cov.checked, cov.inside, cov.share, cov.misses) == (0, 0, None, [])


def test_leave_one_out_covers_simulated_runs() -> None:
    """40 cells of 8 runs spread by tau 3%: at least 93% of the 320 left-out runs fall
    inside the prediction interval from the other 7 (the acceptance check, on runs that
    follow the model)."""
    rng = np.random.default_rng(7)
    es = []
    for c in range(40):
        key = CellKey("hello", "c64", f"s{c}", "b")
        mu = rng.normal(0.0, 0.3)
        for i in range(8):
            sd = float(rng.uniform(0.005, 0.02))
            y = mu + rng.normal(0.0, 0.03) + rng.normal(0.0, sd)
            es.append(run(f"r{i}", float(y), sd, key=key))
    cov = leave_one_out(es)
    assert cov.checked == 320
    assert cov.share is not None and cov.share >= 0.93
    assert cov.share == pytest.approx(0.95)  # seeded: 304 of 320
