"""Fault plans: intensity sweeps, arriving connections, the attack's lead; and the good
clients' requests that never completed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pywebbench import _engine
from pywebbench.faults import FaultMixError, measure_of
from pywebbench.faults.outcome import CellRobustness
from pywebbench.faults.plan import DEFAULT_FRESH_SHARE, DEFAULT_LEAD_S, parse_plan
from pywebbench.run.robustness import curve_of


def test_a_sweep_measures_each_size_of_one_held_kind() -> None:
    plan = parse_plan("slowloris=10,100,500,churn=5/s,fresh=30%,lead=2s")
    assert plan.is_sweep and plan.kind == "slow-headers" and plan.sizes == [10, 100, 500]
    assert plan.fresh_share == pytest.approx(0.3) and plan.lead_s == 2.0
    points = plan.points()
    assert [size for size, _ in points] == [10, 100, 500]
    for size, specs in points:
        held = {s.kind: s for s in specs}
        assert held["slow-headers"].connections == size
        assert held["churn"].rate == 5
    assert plan.mix_at(points[-1][1]) == "slow-headers=500,churn=5/s"


def test_a_plain_mix_is_one_point_with_the_documented_defaults() -> None:
    plan = parse_plan("slowloris=50")
    assert not plan.is_sweep and [s for s, _ in plan.points()] == [None]
    assert plan.fresh_share == DEFAULT_FRESH_SHARE == 0.2 and plan.lead_s == DEFAULT_LEAD_S
    assert parse_plan("default,fresh=0").fresh_share == 0.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("churn=5/s,100", "a bare number continues an intensity sweep"),
        ("100", "a bare number continues"),
        ("slowloris=100,50", "sizes must increase"),
        ("slowloris=10,5000", "connections must be 1..4096"),
        ("slowloris=1,2,3,4,5,6,7,8,9", "at most 8 sizes"),
        ("slowloris=10,20,idle=5,30", "one kind per sweep"),
        ("slowloris=10,fresh=150%", "fresh must be between"),
        ("slowloris=10,lead=2h", "lead must be a duration"),
        ("fresh=20%", "no fault kind"),
    ],
)
def test_bad_plans_name_the_item(text: str, message: str) -> None:
    with pytest.raises(FaultMixError, match=message):
        parse_plan(text)


def test_the_breaking_point_is_the_smallest_size_under_half() -> None:
    plan = parse_plan("slowloris=10,100,500,1000")
    rows = [
        (s, CellRobustness(
            mix="slowloris", retained_pct=r, p99_clean_ms=1.0, p99_faulted_ms=1.0,
            good_errors=0, good_error_rate=0.0, survived=True, answered_after=True,
            malformed={}, malformed_accepted=[], score=r, clean_rps=1.0, faulted_rps=r / 100))
        for s, r in [(10, 99.0), (100, 95.0), (500, 49.9), (1000, 0.0)]
    ]  # fmt: skip
    curve = curve_of(plan, list(rows))
    assert curve.breaking_point == 500 and [p.size for p in curve.points] == [10, 100, 500, 1000]
    assert curve_of(plan, list(rows[:2])).breaking_point is None


def test_requests_that_never_completed_count_as_timeouts() -> None:
    """A server that accepts connections (the kernel's backlog) and never answers: within a
    1 s window the 5 s timeout never fires, yet no good request completed. They count as
    failed, and p99 is at least the window, not missing."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # never accepted: connections wait in the backlog
        port = listener.getsockname()[1]
        spec = {"url": f"http://127.0.0.1:{port}/", "connections": 8, "duration_s": 1.0,
                "timeout_s": 5.0, "cpus": [1]}  # fmt: skip
        result = json.loads(_engine.run_load(json.dumps(spec)))
    assert result["requests"] == 0 and result["errors"] == 0  # what the engine alone says
    m = measure_of(result)
    assert m.unanswered == 8 and m.errors == 8 and m.error_rate == 1.0
    assert m.p99_us is not None and m.p99_us >= 1_000_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--server-option", "waitress.backlogg=5"], "matrix.server_options.waitress.backlogg: "
         "unknown setting; waitress takes: connection_limit"),
        (["--server-option", "waitress=5"], "--server-option 'waitress=5': expected"),
        (["--server-option", "uvicorn-h11.connection_limit=5"], "not a server of this study"),
        (["--faults", "slowloris=100,50"], "sizes must increase"),
    ],
)  # fmt: skip
def test_bad_server_options_and_sweeps_are_one_line_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "pywebbench"), "run", "--server", "waitress",
         "--framework", "raw-wsgi", "--workload", "hello", "--results-dir", str(tmp_path),
         *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "pywebbench.sqlite").exists()
