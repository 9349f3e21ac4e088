"""compare of two runs with a traffic mix names the endpoint whose latency grew most
(docs/mix.md, docs/compare.md), in the console, JSON, Markdown and HTML. The data are
deterministic: the session's short mix study (tests/pwbmix.py) and an edited copy of it
in which one endpoint's latencies are three times as long."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from compare_study import edited_copy
from pwbmix import ENDPOINTS, shared_study
from pwbtest import command
from pywebbench.store import Store, Study

SLOWED = "POST /search"


def _slow_endpoint(study: Study) -> None:
    """Every latency figure of SLOWED three times as long in each measured iteration."""
    for it in study.iterations:
        doc = json.loads(it.result_json or "{}")
        for e in doc.get("endpoints", []):
            if e["name"] == SLOWED:
                summary = e["latency"]["summary"]
                for key in ("p50", "p90", "p99", "p999", "p9999", "max", "min"):
                    summary[key] *= 3
        it.result_json = json.dumps(doc)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(store, BASE id, NEW id): the mix study and its copy with SLOWED slowed."""
    source = shared_study(tmp_path_factory)
    with Store(source, create=False) as store:
        latest = store.latest_run()
    assert latest is not None
    dest = tmp_path_factory.mktemp("compare-mix") / "pair.sqlite"
    base, new = edited_copy(source, latest.id, dest, _slow_endpoint)
    return dest, base, new


def _compare(pair: tuple[Path, str, str], *args: str) -> str:
    store, base, new = pair
    proc = command(["compare", base, new, "--store", str(store), *args])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_json_names_the_endpoint_that_grew(pair: tuple[Path, str, str]) -> None:
    doc: dict[str, Any] = json.loads(_compare(pair, "--format", "json"))
    (cell,) = doc["cells"]
    assert cell["endpoint_grew_most"] == {"name": SLOWED, "slower": False}  # 1 replicate
    by_name = {e["name"]: e for e in cell["endpoints"]}
    assert sorted(by_name) == sorted(ENDPOINTS)
    assert cell["endpoints"][0]["name"] == SLOWED  # the one that grew most first
    assert by_name[SLOWED]["p50"]["ratio"] == pytest.approx(3.0)
    assert by_name[SLOWED]["p99"]["ratio"] == pytest.approx(3.0)
    for name in set(ENDPOINTS) - {SLOWED}:
        assert by_name[name]["p50"]["ratio"] == pytest.approx(1.0)


def test_console_markdown_and_html_name_it(pair: tuple[Path, str, str]) -> None:
    line = f"endpoint {SLOWED} grew most (p50): p50 3.000× [CI n/a: 1 replicate]"
    assert line in " ".join(_compare(pair).split())  # the console table's notes, unwrapped
    assert line in _compare(pair, "--format", "markdown")
    html = _compare(pair, "--format", "html")
    assert 'id="endpoints"' in html and line in html
    assert f'<tr class="grew"><td>{SLOWED}</td>' in html


def test_an_interval_above_one_says_got_slower() -> None:
    from pywebbench.analysis.ratio import RatioEstimate
    from pywebbench.compare.endpoints import EndpointChange
    from pywebbench.compare.render import endpoints_text

    grew = EndpointChange(SLOWED, RatioEstimate(3.0, 2.5, 3.5, 100, 300), None)
    same = EndpointChange("GET /", RatioEstimate(1.01, 0.9, 1.1, 100, 101), None)
    assert endpoints_text([grew, same]) == (
        f"endpoint {SLOWED} got slower (its p50 grew most): p50 3.000× [2.500, 3.500], p99 –; "
        "others' p50: GET / 1.010×"
    )
    shrank = EndpointChange(SLOWED, RatioEstimate(0.5, 0.4, 0.6, 100, 50), None)
    assert endpoints_text([shrank]) == f"no endpoint's p50 grew; endpoints' p50: {SLOWED} 0.500×"
    assert endpoints_text([]) is None
