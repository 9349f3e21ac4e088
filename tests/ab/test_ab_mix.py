"""``pywebbench ab --mix`` (docs/mix.md, docs/ab.md): both sides loaded with a traffic mix,
each endpoint's p50 and p99 CHANGE/BASE paired by round, and the endpoint whose latency
grew most named. Which endpoint is named is asserted on deterministic data (the slices of
the session's short mix study, tests/pwbmix.py, against a copy with one endpoint's
latencies tripled); the real run is tested for function only (issue 52)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pwbmix import APP, ENDPOINTS, project, shared_study
from pwbtest import pwb
from pywebbench.ab.session import endpoint_latency
from pywebbench.analysis.estimate import RoundPair
from pywebbench.compare.render import endpoints_text
from pywebbench.load.result import EndpointStats
from pywebbench.load.sliced import SliceStats
from pywebbench.store import Store
from pywebbench.store.endpoints import iteration_endpoints

SLOWED = "POST /search"


def _slices(store_path: Path, slowed: float) -> list[SliceStats]:
    """The study's measured iterations as slices of one process, SLOWED's latency figures
    times ``slowed``."""
    with Store(store_path, create=False) as store:
        study = store.load_study()
    out = []
    for i, it in enumerate(study.iterations_of(study.cells[0].id)):
        endpoints = []
        for e in iteration_endpoints(it):
            if e["name"] == SLOWED:
                summary = e["latency"]["summary"]
                for key in ("p50", "p99"):
                    summary[key] = int(summary[key] * slowed)
            endpoints.append(EndpointStats.model_validate(e))
        out.append(
            SliceStats(
                index=i,
                round=i,
                target=0,
                requests=it.requests,
                errors=0,
                timeouts=0,
                duration_s=it.duration_s,
                rps=it.rps,
                started_at=0.0,
                ended_at=1.0,
                p50_us=int(it.latency_p50_us or 1),
                p99_us=int(it.latency_p99_us or 1),
                endpoints=endpoints,
            )  # fmt: skip
        )
    return out


def test_the_endpoint_that_grew_is_named(tmp_path_factory: pytest.TempPathFactory) -> None:
    store_path = shared_study(tmp_path_factory)
    base, change = _slices(store_path, 1.0), _slices(store_path, 3.0)
    pairs = [RoundPair(b.round, b, c) for b, c in zip(base, change, strict=True)]
    changes = endpoint_latency(pairs, level=0.95, processes=1)
    assert sorted(c.name for c in changes) == sorted(ENDPOINTS)
    assert changes[0].name == SLOWED
    assert changes[0].p50.ratio == pytest.approx(3.0, rel=0.01)  # (integer microseconds)
    assert all(c.p50.ratio == pytest.approx(1.0) for c in changes[1:])
    line = endpoints_text(changes)
    assert line is not None and line.startswith(f"endpoint {SLOWED} ")


BURN = """
_app = app

def app(environ, start_response):
    if environ["PATH_INFO"] == "/search":
        sum(i * i for i in range(20000))
    return _app(environ, start_response)
"""


def test_ab_with_a_mix_runs_and_reports_each_endpoint(tmp_path: Path, census: str) -> None:
    """Two versions of the app (the second burns CPU on one route) under the mix: each
    endpoint verified and compared; the JSON lists every endpoint's ratios and names one."""
    base, mix_file = project(tmp_path / "a")
    change, _ = project(tmp_path / "b")
    (change / "mixapp.py").write_text(APP + BURN)
    args = ["--app", "mixapp:app", "--interface", "wsgi", "--mix", str(mix_file)]
    done = pwb(
        "ab", *args, "--base", str(base), "--change", str(change), "-c", "4",
        "--budget", "8", "--warmup", "0.5", "--slice", "0.5", "--settle", "0.1",
        "--processes", "1", "--interference-limit", "1", "--format", "json", "--no-store",
        results=tmp_path / "results",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc: dict[str, Any] = json.loads(done.stdout)
    assert sorted(e["name"] for e in doc["endpoints"]) == sorted(ENDPOINTS)
    assert all(e["p50"]["ratio"] > 0 and e["p99"]["ratio"] > 0 for e in doc["endpoints"])
    top = doc["endpoint_grew_most"]
    assert top is None or top["name"] == doc["endpoints"][0]["name"]
    assert all("endpoints" not in s for s in doc["slices"])  # no histograms in the slices


def test_mix_is_refused_with_path_or_without_app(tmp_path: Path) -> None:
    folder, mix_file = project(tmp_path)
    for extra in (["--app", "mixapp:app", "--path", "/"], []):
        done = pwb(
            "ab", *extra, "--mix", str(mix_file), "--base", str(folder), "--change",
            str(tmp_path), results=tmp_path / "results",
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("error: --") and "--mix" in line, line
