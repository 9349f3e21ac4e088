"""What a study iteration takes from the load stage: the spec for a workload request, the run
through a load agent with live progress, the store's figures and the stalled-tail check,
against the real engine and reference server."""

from __future__ import annotations

import pytest
from pywebbench.catalogue.workloads import HttpRequest
from pywebbench.load import (
    LoadProgress,
    LoadSpec,
    LocalAgent,
    iteration_figures,
    run_load,
    spec_for_request,
)
from pywebbench.meter import Sampler
from pywebbench.refserver import RefServer


def test_spec_result_figures_and_metering() -> None:
    with RefServer(cpus=[0]) as srv:
        spec = spec_for_request(
            srv.url + "/",
            HttpRequest("GET", "/hello", headers=(("X-A", "1"),)),
            connections=16,
            duration_s=1.5,
            timeout_s=2.0,
            cpus=[1],
        )
        assert spec.url == srv.url + "/hello" and spec.headers == [("X-A", "1")]
        progress: list[LoadProgress] = []
        with Sampler(srv.pid, interval_s=0.1) as sampler:
            result = LocalAgent().run(spec, progress=progress.append)
    figures = iteration_figures(result)
    # Floors say the server served and was metered (issue 52): on this project's 2-core VM
    # (5 Dec 2026) the run completed 164,000-204,000 requests, the server used 0.57-0.70
    # CPU-s, 288,000-292,000 requests per CPU-s. A throughput or CPU figure moves by at most
    # 2.9x (a 1.45x slower core at 50% steal, docs/contributing.md): 57,000 requests, 0.20
    # CPU-s and 99,000 a CPU-s, each at least twice its floor below, so missing one needs the
    # host to take far more than half the cores for the run: far rarer than 1 in 10,000.
    assert figures["requests"] > 1000 and figures["errors"] == 0 and figures["non_2xx"] == 0
    # Asked 1.5 s: the run ends on the engine's own timer, which only fires late, so over
    # 1.4 s on any host; at most 1 s over what was asked (issue 52; the arithmetic is
    # tests/load/test_engine.py's module docstring: at 50% steal in slices of milliseconds,
    # a 1-s stall at the end was never seen).
    assert 1.4 < figures["duration_s"] <= 2.5
    assert figures["rps"] == pytest.approx(figures["requests"] / figures["duration_s"], rel=1e-9)
    p = [figures[k] for k in ("latency_p50_us", "latency_p90_us", "latency_p99_us")]
    p += [figures["latency_p999_us"], figures["latency_max_us"]]
    assert p == sorted(p) and p[0] > 0
    assert figures["latency_p99_us"] == result.latency.summary.p99
    assert figures["generator_cpu_s"] > 0
    assert figures["bytes_in"] and figures["bytes_out"]
    assert not figures["interrupted"]
    assert result.stalled_tail_s() == 0.0
    assert any(p.rps > 0 for p in progress), "no live rate from the progress callback"
    m = sampler.summary
    assert m.cpu_s and m.cpu_s > 0.1  # the server worked for the load (floors above)
    assert figures["requests"] / m.cpu_s > 1000  # requests per CPU-second of a Rust server
    assert m.rss_peak_bytes and m.samples


def test_stalled_tail_counts_silent_seconds(refserver) -> None:
    result = run_load(LoadSpec(url=refserver.url + "/hello", connections=1, duration_s=0.3))
    second = result.per_second[0]

    def stalled(duration_s: float, completed: list[int]) -> float:
        series = [
            second.model_copy(update={"t": t, "completed": n}) for t, n in enumerate(completed)
        ]
        update = {"duration_s": duration_s, "per_second": series}
        return result.model_copy(update=update).stalled_tail_s()

    assert stalled(3.0, [500, 0, 0]) == 2.0
    assert stalled(2.5, [500, 0, 0]) == 1.0  # the last, partial second does not count
    assert stalled(1.0, [500]) == 0.0
