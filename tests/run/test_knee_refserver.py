"""The knee search against a server of known capacity: the reference server, one thread,
a serial service time (``service_ms``: a single-server FIFO queue, docs/refserver.md).

Constant arrivals at rate λ and a deterministic service time S make a D/D/1 queue. Below the
capacity μ = 1/S nothing queues and every latency is S. Above it the backlog grows by
(λ - μ) requests each second, so a request sent t seconds into the load waits about
(λ/μ - 1)·t. A probe warms up for W seconds and measures D more; its q-quantile is reached
about W + q·D seconds in, so the SLO target L holds while λ/μ - 1 <= L / (W + q·D):

    knee = μ · (1 + L / (W + q·D))

The knee found must lie within 10% of it (the search's own tolerance is 5%).
"""

from __future__ import annotations

import pytest
from pwbtest import GEN_CPUS
from pywebbench.load import LoadSpec, run_load
from pywebbench.refserver import RefServer
from pywebbench.run.knee import SearchPlan, probe_row, search_knee
from pywebbench.run.slo import parse_slo
from pywebbench.store import utcnow
from pywebbench.store.knee_rows import KneeProbe

SERVICE_MS = 0.5  # capacity 2,000 req/s on one thread
WARMUP_S = 0.5


def test_knee_of_a_single_server_queue_matches_queueing_theory() -> None:
    slo = parse_slo("p95=50ms")
    plan = SearchPlan(slo=slo, start_rps=1_000.0, budget_s=60.0, warmup_s=WARMUP_S)
    with RefServer(service_ms=SERVICE_MS, threads=1, cpus=[0]) as srv:

        def probe(rate: float, phase: str) -> KneeProbe:
            spec = LoadSpec(
                url=srv.url + "/hello",
                rate=rate,
                connections=64,
                duration_s=plan.probe_s(rate),
                warmup_s=plan.warmup_s,
                cpus=GEN_CPUS,
            )
            return probe_row(run_load(spec), slo, 0, 0, phase, utcnow())

        result = search_knee(plan, probe)
    capacity = 1000.0 / SERVICE_MS
    window = WARMUP_S + slo.quantile * plan.probe_s(capacity)
    analytic = capacity * (1 + (slo.target_us / 1e6) / window)
    rates = [
        (round(p.rate_offered), p.verdict, round(p.latency_us / 1000, 1)) for p in result.probes
    ]
    assert result.status == "found", rates
    assert result.knee_rps == pytest.approx(analytic, rel=0.10), (analytic, rates)
    # the knee and every rate below it met the SLO in every one of their probes
    below = [p for p in result.probes if p.rate_offered <= result.knee_rps]
    assert below and all(p.passed for p in below), rates
    assert len(result.probes) == plan.repeats * len({p.rate_offered for p in result.probes})
    assert all(p.samples >= 0.9 * slo.min_samples for p in result.probes if p.passed)
