"""The engine against the reference server: load models, bounds, progress.

Timing bounds here are a run's length and how soon it stops when asked: what must hold on
any host. Each allows a second (or more) over what was asked: a run ends on the engine's
own timer, so it overruns only by a stall of its thread at the end, and the host takes its
steal in slices of milliseconds (at 50% steal, a 1-s stall in one block would be a host
stopped for twice the run's own length; none was seen in this suite's runs at 11-48%
steal). How soon a run stops is bounded at 10 s: 5,000 requests on 8 connections took
0.04-0.05 s on this project's 2-core VM (5 Dec 2026), a run whose progress callback stops it
at 0.3 s (or raises at its first call, 0.25 s) returned in 0.26-0.31 s; at 2.9x slower
(a 1.45x slower core at 50% steal, docs/contributing.md) 0.15 s and 0.9 s, so 10 s is
exceeded only by holds of 9 s within one such run: far rarer than 1 in 10,000, and still
20 s short of a 30-s run that did not stop.

Floors on a run's requests say only that it served: on the same VM a 1-s closed loop on 16
connections completed 121,000-123,000 (floor 1,000), 0.8 s pipelined 270,000-316,000
(1,000), 0.8 s with a connection per request 12,400-14,100 (100), 0.5 s at 1 ms a request
428-431 (10). At 2.9x slower each is still 14x (the 1-ms one: 148 against 10) to 90x its
floor: missing one needs the run held for over 90% of its length, where the host takes at
most half, in slices of milliseconds: far rarer than 1 in 10,000.

The engine's accuracy against wrk is a benchmark (benchmarks/loadgen_vs_wrk.py and
:func:`test_fixed_1ms_delay_p50_within_3_percent`, marked ``benchmark``; issue 52)."""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import time

import pytest
from pwbtest import GEN_CPUS
from pywebbench.load import LoadInterrupted, LoadProgress, LoadSpec, LocalAgent, run_load


def test_closed_loop_counts_everything(refserver) -> None:
    r = run_load(
        LoadSpec(url=refserver.url + "/hello", connections=16, duration_s=1.0, cpus=GEN_CPUS)
    )
    assert r.mode == "closed" and not r.interrupted
    assert r.errors == 0, r.error_classes
    assert r.requests > 1000
    assert r.status_counts == {"200": r.requests}
    assert 0.95 <= r.duration_s <= 2.0  # asked 1 s (module docstring)
    assert r.rps == pytest.approx(r.requests / r.duration_s)
    # Every response is "Hello, World!" (13 bytes) plus a head; every request went out whole.
    assert r.bytes_in > 13 * r.requests
    assert r.bytes_out >= r.requests * len("GET /hello HTTP/1.1\r\n\r\n")
    assert r.latency.summary.count == r.requests
    assert r.connections.targeted == 16 and r.connections.established == 16
    assert r.connections.reopened == 0
    assert r.connections.requests_per_connection.count == 16
    assert sum(s.completed for s in r.per_second) == r.requests
    assert r.per_second[0].p50_us > 0
    g = r.generator
    assert g.threads[0].cpu == GEN_CPUS[0] and g.cpu_s > 0
    assert g.cpu_us_per_request == pytest.approx(g.cpu_s * 1e6 / r.requests)
    assert r.service_time is None and r.schedule_lag is None and r.open_loop is None


def test_max_requests_is_exact_and_ends_the_run(refserver) -> None:
    t = time.monotonic()
    r = run_load(LoadSpec(url=refserver.url + "/hello", connections=8, max_requests=5000))
    assert r.requests == 5000
    assert r.connections.in_flight_at_end == 0
    assert time.monotonic() - t < 10  # no duration: the count alone ends it (module docstring)


def test_pipelining_times_each_response(refserver) -> None:
    r = run_load(LoadSpec(url=refserver.url + "/hello", connections=4, pipeline=8, duration_s=0.8))
    assert r.errors == 0, r.error_classes
    assert r.requests > 1000
    assert r.latency.summary.count == r.requests
    assert r.connections.reopened == 0


def test_connection_per_request(refserver) -> None:
    r = run_load(
        LoadSpec(url=refserver.url + "/hello", connections=4, keepalive=False, duration_s=0.8)
    )
    assert r.mode == "connection_per_request"
    assert r.errors == 0, r.error_classes
    assert r.requests > 100
    # One connection per request (a few may be in flight at the end).
    assert r.connections.established >= r.requests
    assert r.connections.requests_per_connection.max == 1


def test_warmup_is_kept_apart(refserver) -> None:
    seen: list[LoadProgress] = []
    r = run_load(
        LoadSpec(url=refserver.url + "/hello", connections=4, duration_s=0.6, warmup_s=0.4),
        progress=seen.append,
        interval_s=0.1,
    )
    assert r.warmup is not None and r.warmup.requests > 0
    assert 0.35 <= r.warmup.duration_s <= 1.4  # asked 0.4 s (module docstring)
    assert 0.55 <= r.duration_s <= 1.6  # asked 0.6 s
    assert r.latency.summary.count == r.requests  # no warm-up samples in the histogram
    assert sum(s.completed for s in r.per_second) == r.requests
    assert r.connections.established == 4  # connection counts span the whole run
    phases = [p.phase for p in seen]
    assert "warmup" in phases and "measure" in phases
    assert phases.index("warmup") < phases.index("measure")
    assert all(p.rps >= 0 for p in seen)
    assert max(p.requests for p in seen) <= r.requests


def test_body_checks(refserver) -> None:
    ok = run_load(
        LoadSpec(
            url=refserver.url + "/hello",
            connections=2,
            duration_s=0.3,
            expect_status=[200],
            expect_body="Hello, World!",
        )
    )
    assert ok.requests > 0 and ok.errors == 0
    bad = run_load(
        LoadSpec(
            url=refserver.url + "/hello",
            connections=2,
            duration_s=0.3,
            expect_status=[204],
            expect_body="Hello, World?",
        )
    )
    assert bad.requests > 0
    assert bad.error_classes["check_failed"].count == bad.requests
    assert "status 200" in bad.error_classes["check_failed"].example


def test_non_2xx_are_counted_apart(refserver) -> None:
    r = run_load(LoadSpec(url=refserver.url + "/hello?status=503", connections=2, duration_s=0.3))
    assert r.requests > 0 and r.errors == 0
    assert r.status_counts == {"503": r.requests}
    assert r.non_2xx == r.requests


def test_post_body_is_sent(refserver) -> None:
    body = "x" * 1000
    r = run_load(
        LoadSpec(
            url=refserver.url + "/hello",
            method="POST",
            body=body,
            connections=2,
            duration_s=0.3,
            expect_body="1000",
        )
    )
    assert r.requests > 0 and r.errors == 0, r.error_classes
    assert r.bytes_out >= 1000 * r.requests


def _wrk_p50_us(url: str, cpus: list[int]) -> float:
    """p50 that wrk (the reference generator, from Debian) measures on one connection."""
    wrk = shutil.which("wrk")
    assert wrk, "wrk is missing: install it with scripts/setup.sh (apt-get install wrk)"
    out = subprocess.run(
        ["taskset", "-c", ",".join(map(str, cpus)), wrk, "-t1", "-c1", "-d1s", "--latency", url],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    m = re.search(r"^\s+50%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    assert m, out
    return float(m.group(1)) * {"us": 1.0, "ms": 1000.0, "s": 1e6}[m.group(2)]


def test_a_servers_fixed_delay_is_inside_the_latency(refserver_1ms) -> None:
    """A server that waits 1 ms before answering: every latency holds it (the engine times
    from the request's write to the response's end), and the engine's p50 is the
    histogram's."""
    r = run_load(
        LoadSpec(url=refserver_1ms.url + "/hello", connections=1, duration_s=0.5, cpus=GEN_CPUS)
    )
    assert r.errors == 0 and r.requests > 10
    assert r.latency.summary.min >= 1000, r.latency.summary
    assert r.latency.summary.p50 >= r.latency.summary.min


@pytest.mark.benchmark
def test_fixed_1ms_delay_p50_within_3_percent(refserver_1ms) -> None:
    """Fixed 1 ms server delay: the engine's p50 is within 3% of 1 ms plus the path's
    overhead, as measured independently by wrk on the same path.

    Runs are paired (wrk, then ours) and the median of the per-pair differences is judged, so
    scheduler noise that moves both tools alike cancels out. wrk prints p50 in 10 us steps,
    hence the 10 us allowance. Up to 5 pairs are measured: noise fades with more pairs, a real
    bias does not.
    """
    url = refserver_1ms.url + "/hello"
    spec = LoadSpec(url=url, connections=1, duration_s=0.8, cpus=GEN_CPUS)
    pairs: list[tuple[float, float]] = []
    for n in range(5):
        truth = _wrk_p50_us(url, GEN_CPUS)
        r = run_load(spec)
        assert r.errors == 0
        assert r.latency.summary.p50 >= 1000, r.latency.summary
        pairs.append((r.latency.summary.p50, truth))
        if n >= 2:
            diff = statistics.median(ours - ref for ours, ref in pairs)
            ref = statistics.median(ref for _, ref in pairs)
            if abs(diff) <= 0.03 * ref + 10:
                return
    raise AssertionError(f"p50 differs from wrk's by {diff:.1f} us (ref {ref:.0f} us): {pairs}")


def test_local_agent_is_a_load_agent(refserver) -> None:
    r = LocalAgent().run(LoadSpec(url=refserver.url + "/hello", connections=1, duration_s=0.2))
    assert r.requests > 0


def test_threads_split_connections_and_merge(refserver) -> None:
    r = run_load(LoadSpec(url=refserver.url + "/hello", connections=5, threads=2, duration_s=0.5))
    assert [t.connections for t in r.generator.threads] == [3, 2]
    assert sum(t.requests for t in r.generator.threads) == r.requests
    assert r.errors == 0


def test_many_connections_need_fds_and_get_them(refserver) -> None:
    r = run_load(LoadSpec(url=refserver.url + "/hello", connections=2000, duration_s=0.8))
    assert r.connections.established == 2000
    assert r.generator.nofile_limit >= 2000
    assert r.errors == 0, r.error_classes


def test_interrupt_from_progress_returns_partial_result(refserver) -> None:
    def stop_soon(p: LoadProgress) -> None:
        if p.elapsed_s > 0.3:
            raise KeyboardInterrupt

    spec = LoadSpec(url=refserver.url + "/hello", connections=2, duration_s=30)
    t = time.monotonic()
    r = run_load(spec, progress=stop_soon, interval_s=0.05)
    assert time.monotonic() - t < 10  # of the 30 s asked (module docstring)
    assert r.interrupted and r.requests > 0
    assert "interrupted: partial results" in r.warnings
    with pytest.raises(LoadInterrupted) as info:
        run_load(spec, progress=stop_soon, interval_s=0.05, raise_on_interrupt=True)
    assert info.value.result.interrupted and info.value.result.requests > 0


def test_other_progress_errors_stop_the_run_and_propagate(refserver) -> None:
    def boom(p: LoadProgress) -> None:
        raise RuntimeError("boom")

    t = time.monotonic()
    with pytest.raises(RuntimeError, match="boom"):
        run_load(LoadSpec(url=refserver.url + "/hello", duration_s=30), progress=boom)
    assert time.monotonic() - t < 10  # of the 30 s asked (module docstring)
