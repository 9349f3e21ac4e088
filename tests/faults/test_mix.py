"""Fault mixes: parsing, validation, the named mixes, and the robustness score formula."""

from __future__ import annotations

import pytest
from pywebbench import _engine
from pywebbench.faults import (
    DEFAULT_MIX,
    KINDS,
    NAMED_MIXES,
    FaultMixError,
    FaultReport,
    FaultSpec,
    Measure,
    format_mix,
    parse_mix,
    robustness,
)


def test_kinds_match_the_engine() -> None:
    engine = {name: (held, malformed) for name, held, malformed in _engine.faults_kinds()}
    assert engine == {k.name: (k.held, k.malformed) for k in KINDS.values()}


def test_default_mix_covers_every_kind() -> None:
    specs = parse_mix("default")
    # Every kind but ws-no-read, which needs a WebSocket path (opt-in).
    assert {s.kind for s in specs} == set(KINDS) - {"ws-no-read"}
    assert parse_mix(DEFAULT_MIX) == specs
    for name in NAMED_MIXES:
        assert parse_mix(name)


def test_amounts_aliases_params_and_overrides() -> None:
    specs = parse_mix(
        "slowloris=50,reset-mid-response=10/s,bad-request-line=3,"
        "slow-reader=2:interval=250ms:read=128:depth=4:path=/json,churn=1/s,churn=200/s"
    )
    by = {s.kind: s for s in specs}
    assert by["slow-headers"] == FaultSpec("slow-headers", connections=50)
    assert by["reset-mid-response"].rate == 10.0
    assert by["bad-request-line"].count == 3
    assert by["slow-reader"] == FaultSpec(
        "slow-reader", connections=2, interval_ms=250, read_bytes=128, depth=4, path="/json"
    )
    assert by["churn"].rate == 200.0  # the later item wins
    assert parse_mix(format_mix(specs)) == specs
    assert parse_mix("default,slowloris=3")[0] == FaultSpec("slow-headers", connections=3)
    assert FaultSpec("slow-body", connections=1, interval_ms=2000).to_text() == (
        "slow-body=1:interval=2000ms"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty fault mix"),
        ("slowloris=50,,churn=1/s", "empty item"),
        ("nonsense=3", "unknown fault kind 'nonsense'"),
        ("churn", "KIND=AMOUNT"),
        ("slowloris=10/s", "holds connections"),
        ("churn=abc", "amount must be"),
        ("slow-headers=0", "connections must be 1..4096"),
        ("slow-headers=5000", "connections must be 1..4096"),
        ("churn=0/s", "rate must be"),
        ("smuggle=0", "count must be at least 1"),
        ("slow-headers=2:interval=fast", "interval must be a duration"),
        ("slow-headers=2:colour=red", "unknown parameter 'colour'"),
        ("slow-reader=2:depth=0", "depth must be 1..1024"),
        ("churn=1/s:path=nope", "path must start with /"),
        ("idle=1.5", "integer"),
    ],
)
def test_bad_mixes_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(FaultMixError) as err:
        parse_mix(text)
    assert needle in str(err.value)


def test_engine_rejects_what_python_rejects() -> None:
    # The engine validates again (for JSON that did not come through parse_mix).
    with pytest.raises(ValueError, match="connections"):
        _engine.faults_start('{"target": "127.0.0.1:9", "faults": [{"kind": "idle", "rate": 3}]}')
    with pytest.raises(ValueError, match="unknown field"):
        _engine.faults_start('{"target": "127.0.0.1:9", "faults": [], "colour": 1}')


def _report(malformed: dict[str, dict[str, int]], smuggled: bool = False) -> FaultReport:
    kinds = {name: {"attempts": sum(m.values()), "malformed": m} for name, m in malformed.items()}
    findings = []
    if smuggled:
        findings.append(
            {
                "kind": "smuggle",
                "what": "smuggled-request-answered",
                "count": 1,
                "status": 200,
                "request": "POST ...",
                "response": "HTTP/1.1 200 ...",
            }
        )
    return FaultReport.from_dict({"duration_s": 1.0, "kinds": kinds, "findings": findings})


def test_score_formula() -> None:
    clean = Measure(rps=1000.0, p99_us=2000.0, requests=2000, errors=0)
    perfect = robustness(clean, clean, None, survived=True, answered_after=True)
    assert perfect.score == 100.0 and perfect.retained_pct == 100.0
    # Half the throughput, p99 four times worse, 2 % errors, one malformed kind accepted.
    faulted = Measure(rps=500.0, p99_us=8000.0, requests=980, errors=20)
    rep = _report({"bad-request-line": {"accepted": 2}, "oversized-headers": {"rejected": 2}})
    r = robustness(clean, faulted, rep, survived=True, answered_after=True)
    expected = 100 * (0.5 * 0.5 + 0.2 * 0.25 + 0.15 * (1 - 0.02 / 0.1) + 0.15 * 0.5)
    assert r.score == round(expected, 1)
    assert r.malformed_accepted == ["bad-request-line"]
    assert r.malformed == {"bad-request-line": "accepted", "oversized-headers": "rejected"}
    assert r.good_errors == 20 and r.p99_faulted_ms == 8.0
    not_after = robustness(clean, faulted, rep, survived=True, answered_after=False)
    assert not_after.score == round(expected / 2, 1)
    assert robustness(clean, faulted, rep, survived=False, answered_after=True).score == 0.0
    # A smuggled request answered counts as accepted even if the first answer was a 4xx.
    sm = robustness(
        clean, clean, _report({"smuggle": {"rejected": 1}}, smuggled=True), survived=True,
        answered_after=True,
    )  # fmt: skip
    assert sm.malformed_accepted == ["smuggle"] and sm.score == 85.0
    # Nothing served under faults: no throughput, no latency credit.
    dead = Measure(rps=0.0, p99_us=None, requests=0, errors=50)
    assert robustness(clean, dead, None, survived=True, answered_after=True).score == 15.0
