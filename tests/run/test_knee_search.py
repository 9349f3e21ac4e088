"""The knee search (docs/slo.md) without servers: the SLO text, the bracket and bisection
against a known capacity, the time budget, a stack that never meets the SLO, and bad input
refused by `pywebbench run` before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pwbtest import pwb
from pywebbench.run.knee import (
    ProbeFn,
    SearchPlan,
    probe_verdict,
    search_knee,
    start_rate,
)
from pywebbench.store.knee_rows import KneeProbe
from pywebbench.study.slo import Slo, SloError, parse_slo


@pytest.mark.parametrize(
    ("text", "percentile", "target_us", "samples"),
    [
        ("p99=50ms", 99.0, 50_000.0, 10_000),
        ("P99.9=1s", 99.9, 1_000_000.0, 100_000),
        ("p95=800us", 95.0, 800.0, 2_000),
        ("p50=0.5ms", 50.0, 500.0, 200),
    ],
)
def test_slo_text(text: str, percentile: float, target_us: float, samples: int) -> None:
    slo = parse_slo(text)
    assert (slo.percentile, slo.target_us, slo.min_samples) == (percentile, target_us, samples)
    assert parse_slo(str(slo)) == slo  # its text reads back


@pytest.mark.parametrize("text", ["p99=abc", "p99", "99=50ms", "p100=5ms", "p99=0ms", "p99=5m"])
def test_slo_text_refused(text: str) -> None:
    with pytest.raises(SloError, match="p99=50ms|percentile|target"):
        parse_slo(text)


class Queue:
    """A fake server of known capacity: below it the percentile is the service time, above
    it the queue grows; every probe costs its planned seconds on a fake clock."""

    def __init__(self, capacity: float, service_ms: float, plan_of: list[SearchPlan]) -> None:
        self.capacity = capacity
        self.service_ms = service_ms
        self.now = 0.0
        self.plan_of = plan_of
        self.rates: list[float] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, rate: float, phase: str) -> KneeProbe:
        plan = self.plan_of[0]
        self.now += plan.probe_cost_s(rate)
        self.rates.append(rate)
        over = max(0.0, rate / self.capacity - 1)
        latency_ms = self.service_ms + over * 1000 * plan.probe_s(rate)
        achieved = min(rate, self.capacity)
        verdict = probe_verdict(
            plan.slo, latency_us=latency_ms * 1000, errors=0, offered=rate, achieved=achieved
        )
        return KneeProbe(
            None, 1, 0, len(self.rates) - 1, phase, "t", rate, achieved, 1.0, 1, 0,
            latency_ms * 1000, latency_ms * 1000, plan.slo.min_samples, verdict,
        )  # fmt: skip


def _search(capacity: float, service_ms: float, **plan: object) -> tuple[object, Queue]:
    holder: list[SearchPlan] = []
    fake = Queue(capacity, service_ms, holder)
    options = {"slo": parse_slo("p99=20ms"), "start_rps": 100.0, "budget_s": 600.0, **plan}
    holder.append(SearchPlan(**options))  # type: ignore[arg-type]
    return search_knee(holder[0], fake, clock=fake.clock), fake


@pytest.mark.parametrize("start", [100.0, 5_000.0, 40_000.0])
def test_finds_the_capacity_from_below_and_above(start: float) -> None:
    result, fake = _search(2_000.0, 1.0, start_rps=start)
    assert result.status == "found" and result.ended == "tolerance"  # type: ignore[attr-defined]
    knee, fail = result.knee_rps, result.fail_rps  # type: ignore[attr-defined]
    assert 0.95 * 2_000 <= knee <= 2_008  # the fake queue's p99 stays under 20 ms to ~2,007
    assert knee < fail <= knee * 1.05
    assert len(set(fake.rates)) < 16
    assert len(fake.rates) == 3 * len(set(fake.rates))  # every rate probed 3 times by design
    assert result.flip_rps is None  # type: ignore[attr-defined]  # a steady edge: a point


def test_budget_stops_the_search_with_the_best_knee_so_far() -> None:
    result, fake = _search(2_000.0, 1.0, start_rps=1_500.0, budget_s=40.0, warmup_s=1.0)
    assert result.ended == "budget" and result.status == "found"  # type: ignore[attr-defined]
    assert fake.now <= 40.0  # no rate was started whose probes did not all fit
    assert result.knee_rps < 2_000 < result.fail_rps  # type: ignore[attr-defined]


def test_slo_not_met_even_at_the_lowest_rate() -> None:
    result, fake = _search(2_000.0, 50.0, start_rps=400.0)  # service 50 ms > SLO 20 ms
    assert result.status == "not_met" and result.ended == "floor"  # type: ignore[attr-defined]
    assert result.knee_rps is None and result.lowest_rps >= 10.0  # type: ignore[attr-defined]
    assert result.message(parse_slo("p99=20ms")).startswith("SLO p99=20ms not met at ")  # type: ignore[attr-defined]


def test_errors_and_a_rate_not_kept_fail_a_probe() -> None:
    slo = Slo(99.0, 20_000.0)
    ok = {"latency_us": 5_000.0, "offered": 1_000.0, "achieved": 999.0}
    assert probe_verdict(slo, errors=0, **ok) == "pass"
    assert probe_verdict(slo, errors=1, **ok) == "errors"
    assert probe_verdict(slo, errors=0, **{**ok, "latency_us": 20_001.0}) == "latency"
    assert probe_verdict(slo, errors=0, **{**ok, "achieved": 800.0}) == "rate"


def test_start_rate_is_half_the_measured_rate() -> None:
    assert start_rate([3_000.0, 4_000.0, 5_000.0]) == 2_000.0
    assert start_rate([]) == 100.0


def test_bad_slo_on_the_command_line_writes_nothing(tmp_path: Path) -> None:
    results = tmp_path / "res"
    proc = pwb("run", "--slo", "p99=abc", "--server", "gunicorn-sync", results=results)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--slo" in lines[0] and "p99=50ms" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not results.exists()


def test_bad_slo_in_the_study_file_names_its_key(tmp_path: Path) -> None:
    study = tmp_path / "pywebbench.toml"
    study.write_text('[load]\nslo = "p99=fast"\n')
    results = tmp_path / "res"
    proc = pwb("run", "--config", str(study), results=results)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "load.slo" in proc.stderr and "Traceback" not in proc.stderr
    assert not results.exists()


def _probe_of(passes: Callable[[float, int], bool]) -> tuple[list[float], ProbeFn]:
    """A fake probe whose verdict at a rate's n-th probe (0-based) is ``passes(rate, n)``."""
    rates: list[float] = []

    def probe(rate: float, phase: str) -> KneeProbe:
        n = sum(1 for r in rates if r == rate)
        rates.append(rate)
        verdict = "pass" if passes(rate, n) else "latency"
        return KneeProbe(
            None, 1, 0, len(rates) - 1, phase, "t", rate, rate, 1.0, 1, 0, 1.0, 1.0, 1,
            verdict, 100.0,
        )  # fmt: skip

    return rates, probe


def test_a_rate_is_judged_on_all_its_probes_not_its_luckiest() -> None:
    """Issue 22: a probe at 2,599 req/s failed twice and passed the third time, and the
    search went on above it. Judged on all three, that rate does not pass."""
    rates, probe = _probe_of(lambda rate, n: rate <= 800 or (rate <= 1_500 and n == 2))
    plan = SearchPlan(slo=parse_slo("p99=20ms"), start_rps=1_000.0, budget_s=1e9)
    result = search_knee(plan, probe, clock=lambda: 0.0)
    assert rates[:3] == [1_000.0] * 3  # one rate, three probes, by design
    assert result.knee_rps is not None and 760 <= result.knee_rps <= 800
    assert result.fail_rps is not None and result.fail_rps <= 1.05 * result.knee_rps
    assert [p.rate_offered for p in result.probes] == rates  # every probe kept


def test_an_edge_that_flips_is_a_range() -> None:
    """Between 1,500 and 1,800 req/s one probe in three fails: the knee is the highest rate
    that passed all three, and the edge is reported up to the highest rate that flipped."""
    rates, probe = _probe_of(lambda rate, n: rate <= 1_500 or (rate <= 1_800 and n != 1))
    plan = SearchPlan(slo=parse_slo("p99=20ms"), start_rps=1_000.0, budget_s=1e9)
    result = search_knee(plan, probe, clock=lambda: 0.0)
    assert result.knee_rps is not None and 1_420 <= result.knee_rps <= 1_500
    assert result.flip_rps is not None and 1_500 < result.flip_rps <= 1_800
    text = result.message(plan.slo)
    assert f"knee {result.knee_rps:,.0f}-{result.flip_rps:,.0f} req/s" in text, text
    steady_rates, steady = _probe_of(lambda rate, n: rate <= 1_500)
    assert search_knee(plan, steady, clock=lambda: 0.0).flip_rps is None


def test_the_first_rate_runs_only_the_probes_the_budget_holds() -> None:
    """A low start rate with a p99 target: each probe needs its 30 s cap; a 60 s budget holds
    one probe of 31.3 s, not three (the first rate overran a 60 s budget by 33 s here)."""
    rates, probe = _probe_of(lambda rate, n: False)
    now = [0.0]
    plan = SearchPlan(slo=parse_slo("p99=20ms"), start_rps=100.0, budget_s=60.0)

    def timed(rate: float, phase: str) -> KneeProbe:
        now[0] += plan.probe_cost_s(rate)
        return probe(rate, phase)

    result = search_knee(plan, timed, clock=lambda: now[0])
    assert rates == [100.0] and result.ended == "budget" and now[0] <= 60.0


def test_one_probe_per_rate_when_asked() -> None:
    rates, probe = _probe_of(lambda rate, n: rate <= 1_500)
    plan = SearchPlan(slo=parse_slo("p99=20ms"), start_rps=1_000.0, budget_s=1e9, repeats=1)
    result = search_knee(plan, probe, clock=lambda: 0.0)
    assert len(rates) == len(set(rates)) and result.repeats == 1
    assert result.knee_rps is not None and 1_420 <= result.knee_rps <= 1_500
