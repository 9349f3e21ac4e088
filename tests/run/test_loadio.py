"""The runner's side of the engine contract, against the real engine and reference server."""

from __future__ import annotations

from pywebbench.catalogue.workloads import HttpRequest
from pywebbench.meter import Sampler
from pywebbench.refserver import RefServer
from pywebbench.run import loadio


def test_spec_result_columns_and_metering() -> None:
    with RefServer(cpus=[0]) as srv:
        spec = loadio.build_spec(
            srv.url,
            HttpRequest("GET", "/hello"),
            connections=16,
            duration_s=1.5,
            timeout_s=2.0,
            cpus=[1],
        )
        live = loadio.LiveRate()
        rates: list[float | None] = []
        with Sampler(srv.pid, interval_s=0.1) as sampler:
            result = loadio.local_agent().run(spec, progress=lambda p: rates.append(live.update(p)))
    cols = loadio.columns(result)
    assert cols["requests"] > 1000 and cols["errors"] == 0 and cols["non_2xx"] == 0
    assert 1.4 < cols["duration_s"] < 2.0
    assert abs(cols["rps"] - cols["requests"] / cols["duration_s"]) < 0.05 * cols["rps"]
    p = [cols[f"latency_{k}_us"] for k in ("p50", "p90", "p99", "p999", "max")]
    assert all(x is not None for x in p) and p == sorted(p)
    assert cols["generator_cpu_s"] and cols["generator_cpu_s"] > 0
    assert cols["bytes_in"] and cols["bytes_out"]
    assert not cols["interrupted"]
    doc = loadio.result_dict(result)
    assert doc["latency"]["hist"] and doc["per_second"]
    assert loadio.stalled_tail_s(result) == 0.0
    assert any(r for r in rates if r), "no live rate from the progress callback"
    m = sampler.summary
    assert m.cpu_s and m.cpu_s > 0.1  # the server worked for the load
    assert cols["requests"] / m.cpu_s > 1000  # requests per CPU-second of a Rust server
    assert m.rss_peak_bytes and m.samples


def test_stalled_tail_counts_silent_seconds() -> None:
    series = [{"t": 0, "completed": 500}, {"t": 1, "completed": 0}, {"t": 2, "completed": 0}]
    assert loadio.stalled_tail_s({"duration_s": 3.0, "per_second": series}) == 2.0
    # the last, partial second does not count
    assert loadio.stalled_tail_s({"duration_s": 2.5, "per_second": series}) == 1.0
    assert loadio.stalled_tail_s({"duration_s": 1.0, "per_second": series[:1]}) == 0.0
