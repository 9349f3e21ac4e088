"""LoadSpec validation and JSON, Histogram helpers, LoadResult round trip and merge."""

from __future__ import annotations

import json

import pytest
from pywebbench import _engine
from pywebbench.load import Histogram, LoadResult, LoadSpec, run_load

URL = "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"url": "https://127.0.0.1/"}, "url"),
        ({"url": "127.0.0.1:80"}, "url"),
        ({"connections": 0}, "connections"),
        ({"threads": 0}, "threads"),
        ({"threads": 8, "connections": 4}, "threads"),
        ({"pipeline": 0}, "pipeline"),
        ({"pipeline": 4, "rate": 100.0}, "pipeline"),
        ({"pipeline": 4, "keepalive": False}, "pipeline"),
        ({"duration_s": 0}, "duration_s"),
        ({"duration_s": float("nan")}, "duration_s"),
        ({"warmup_s": -1}, "warmup_s"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"rate": -5.0}, "rate"),
        ({"arrival": "bursty"}, "arrival"),
        ({"queue_limit": 10}, "queue_limit"),
        ({"method": "GET /x"}, "method"),
        ({"headers": [("Bad Name", "x")]}, "headers"),
        ({"headers": [("Connection", "close")]}, "headers"),
        ({"headers": [("X-A", "a\r\nb")]}, "headers"),
        ({"expect_status": [42]}, "expect_status"),
        ({"max_requests": 0}, "max_requests"),
    ],
)
def test_invalid_specs_name_the_field(kwargs: dict, field: str) -> None:
    kw = {"url": URL, **kwargs}
    with pytest.raises(ValueError, match=rf"^{field}: "):
        LoadSpec(**kw)


def test_engine_validates_too_and_names_the_field() -> None:
    # The Rust side validates the same document on its own (remote agents send raw JSON).
    with pytest.raises(ValueError, match="^connections: "):
        _engine.run_load(json.dumps({"url": URL, "connections": 0}))
    with pytest.raises(ValueError, match="conections"):
        _engine.run_load(json.dumps({"url": URL, "conections": 1}))
    with pytest.raises(ValueError, match="^cpus: "):
        run_load(LoadSpec(url=URL, cpus=[1000], duration_s=0.1))


def test_spec_json_round_trip_and_mode() -> None:
    spec = LoadSpec(url=URL, headers=[("X-A", "1")], rate=10.0, arrival="poisson", cpus=[1])
    again = LoadSpec.from_json(spec.to_json())
    assert again == spec
    assert spec.mode == "open"
    assert LoadSpec(url=URL, keepalive=False).mode == "connection_per_request"
    assert LoadSpec(url=URL).mode == "closed"
    with pytest.raises(ValueError, match="^bogus: unknown"):
        LoadSpec.from_dict({"url": URL, "bogus": 1})


def test_histogram_quantiles_merge_summary_spectrum() -> None:
    a = Histogram.from_values(range(1, 1001))
    b = Histogram.from_values(range(1001, 2001))
    assert a.count == 1000
    assert 495 <= a.quantile(0.5) <= 505
    m = a.merge(b)
    assert m.count == 2000
    s = m.summary()
    assert s.min == 1 and 1995 <= s.max <= 2002
    assert 990 <= s.p50 <= 1010
    assert 1975 <= s.p99 <= 1985
    spec = m.spectrum()
    assert spec[0][1] == 0.0 and spec[-1][1] == 1.0
    assert sum(c for _, _, c in spec) == 2000
    values = [v for v, _, _ in spec]
    assert values == sorted(values)
    with pytest.raises(ValueError, match="quantile"):
        a.quantile(1.5)
    with pytest.raises(ValueError, match="base64"):
        Histogram("not base64!").summary()
    assert Histogram.merge_all([]).count == 0


def test_result_round_trip_and_merge(refserver) -> None:
    r = run_load(LoadSpec(url=refserver.url + "/hello", connections=4, duration_s=0.5))
    assert r.requests > 0
    assert LoadResult.from_json(r.to_json()) == r
    m = LoadResult.merge([r, r])
    assert m.requests == 2 * r.requests
    assert m.latency.summary.count == 2 * r.latency.summary.count
    assert m.latency.summary.p50 == r.latency.summary.p50
    assert m.status_counts == {k: 2 * v for k, v in r.status_counts.items()}
    assert m.spec.connections == 2 * r.spec.connections
    assert sum(s.completed for s in m.per_second) == m.requests
    assert len(m.generator.threads) == 2
