"""Open loop: rate accuracy, coordinated-omission correction, queueing, overflow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from pwbtest import GEN_CPUS
from pywebbench.load import LoadResult, LoadSpec, run_load
from pywebbench.refserver import RefServer


def test_constant_rate_is_met(refserver: RefServer) -> None:
    """1.5 s at 2,000/s is 3,000 sends, at k/2000 s for k = 0..2999: every one is offered,
    even one the generator gets to after the end, and each is completed, failed, in flight
    or unsent when the run stops (exact). Timed: the unfinished ones are those due while the
    server or the generator was held at the very end; half a second of them (1,000) needs a
    hold of half a second, where the host steals in slices of milliseconds
    (tests/load/test_rate_phases.py's module docstring; how closely a quiet host meets the
    rate: benchmarks/open_loop_lag.py)."""
    r = run_load(
        LoadSpec(
            url=refserver.url + "/hello", rate=2000, connections=16, duration_s=1.5, cpus=GEN_CPUS
        )
    )
    assert r.mode == "open" and r.errors == 0, r.error_classes
    ol = r.open_loop
    assert ol is not None and ol.arrival == "constant"
    assert ol.offered == 3000 and ol.offered_rate == 2000
    unfinished = r.connections.in_flight_at_end + ol.unsent_at_end
    assert r.requests + unfinished == ol.offered
    assert unfinished <= 2000 * 0.5, (unfinished, r.duration_s)
    assert ol.achieved_rate == pytest.approx(r.requests / r.duration_s, rel=1e-9)
    assert r.service_time is not None and r.schedule_lag is not None
    assert r.schedule_lag.summary.count == ol.offered
    # Corrected latency can only be >= service time.
    assert r.latency.summary.p50 >= r.service_time.summary.p50
    # Self-check: spinning for send times is CPU but not work; run-queue delay is reported.
    th = r.generator.threads[0]
    assert 0 <= th.spin_s <= th.cpu_s
    assert th.busy == pytest.approx((th.cpu_s - th.spin_s) / th.wall_s, rel=1e-3, abs=1e-6)
    assert th.run_delay_s is not None and 0 <= th.run_delay_s <= th.wall_s


def test_the_measured_phase_offers_exactly_its_scheduled_sends_however_late(
    refserver: RefServer,
) -> None:
    """0.5 s of warm-up and 1 s measured at 1,000/s, the generator's process stopped (SIGSTOP)
    across each end of the measured phase: from 0.3 to 0.8 s and from 1.2 to 1.9 s. When it
    runs again it dispatches the sends due meanwhile, late: those scheduled in the warm-up are
    the warm-up's, those due before the end are offered (then in flight or unsent), and
    nothing after the end is. So the measured phase offers its 1,000 sends, each with its
    schedule lag. Exact wherever the holds fall: one that misses a boundary moves nothing."""
    spec = LoadSpec(
        url=refserver.url + "/hello", rate=1000, connections=8, warmup_s=0.5, duration_s=1.0
    )
    code = (
        "import sys\nfrom pywebbench.load import LoadSpec, run_load\n"
        "spec = LoadSpec.from_json(sys.argv[1])\n"
        "print('go', flush=True)\nprint(run_load(spec).to_json())\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, spec.to_json()], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline() == "go\n"
        started = time.monotonic()
        for stop_at, go_at in ((0.3, 0.8), (1.2, 1.9)):
            time.sleep(max(0.0, started + stop_at - time.monotonic()))
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(max(0.0, started + go_at - time.monotonic()))
            os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait(timeout=10)
    r = LoadResult.from_json(out)
    ol = r.open_loop
    assert ol is not None and r.schedule_lag is not None and r.errors == 0, r.error_classes
    assert ol.offered == 1000 == r.schedule_lag.summary.count, (ol, r.duration_s)


def test_poisson_is_seeded(refserver) -> None:
    spec = dict(url=refserver.url + "/hello", rate=1000, arrival="poisson", connections=8)
    a = run_load(LoadSpec(**spec, max_requests=500, seed=7))
    b = run_load(LoadSpec(**spec, max_requests=500, seed=7))
    assert a.requests == b.requests == 500
    assert a.open_loop.arrival == "poisson"
    # Same seed, same schedule: its 500th send is due at 0.49 s, so neither run ends sooner
    # on any host (a send only goes late); here both took 0.4917-0.4930 s (5 Dec 2026). They
    # differ only by how late the last responses came: over 0.5 s apart, or over 1.3 s long,
    # only if the host held the generator or the server for half a second (0.8 s) at the
    # end, where it steals in slices of milliseconds: far rarer than 1 in 10,000 (issue 52,
    # docs/contributing.md).
    assert abs(a.duration_s - b.duration_s) < 0.5
    assert 0.3 < a.duration_s < 1.3


def test_stall_shows_in_corrected_latency_only(refserver_stall) -> None:
    """300 ms stall every 2 s at a constant rate: corrected p99 shows it, service time not.

    The pool is bounded (4 connections), so while the server is frozen the scheduled sends
    wait in the queue; their wait counts in the corrected latency only.
    """
    r = run_load(
        LoadSpec(
            url=refserver_stall.url + "/hello",
            rate=1000,
            connections=4,
            duration_s=4.0,
            timeout_s=2.0,
            cpus=GEN_CPUS,
        )
    )
    assert r.errors == 0, r.error_classes
    corrected = r.latency.summary
    service = r.service_time.summary
    assert corrected.p99 >= 100_000, corrected  # >= 100 ms: the stall is visible
    assert corrected.max >= 250_000, corrected
    # Service time leaves the queue's wait out: only the requests in flight when a stall
    # begins (at most 4, one per connection, per stall; 2 stalls in 4 s) wait one out, 8 of
    # ~4000, under the 40 above the p99. For p99 to reach 250 ms (below the 300-ms stall, and
    # the corrected max's bound above), 40 requests would each need a 250-ms hold of the
    # host: with 4 in flight, 10 holds of a quarter second, where the host steals up to 50%
    # in slices of milliseconds and no 1-s hold was seen: a false failure far under 1 in
    # 10,000 (issue 52; was 50 ms).
    assert service.p99 < 250_000, service
    assert r.open_loop.queue_max >= 100  # sends waited while the server was frozen


def test_queue_overflow_is_counted_not_dropped(refserver_stall) -> None:
    r = run_load(
        LoadSpec(
            url=refserver_stall.url + "/hello?delay_ms=50",
            rate=2000,
            connections=2,
            queue_limit=10,
            duration_s=0.5,
        )
    )
    ol = r.open_loop
    overflow = r.error_classes["queue_overflow"].count
    assert overflow > 0
    # Every scheduled send is accounted for: completed, failed, in flight or still queued.
    assert (
        r.requests + r.errors + r.connections.in_flight_at_end + ol.unsent_at_end >= ol.offered - 2
    )
