"""Open-loop ramps and steps: the engine offers the rate the phases ask for second by second,
the per-second series carries the offered rate beside the achieved one, and the command line
reads and reports rate phases.

What the schedule offers is exact on any host: every send scheduled before the end is offered,
however late the generator gets to it, and each one offered is completed, failed, in flight or
unsent when the run stops. What a second achieves is a timing: a stall of the server or the
generator at the end of a second moves its requests into the next (an open loop sends late
requests as soon as it runs again). So each second is asked only to stay within half its
offered rate, and the whole run to leave unfinished no more than half a second of its last
rate (the requests due while the server or the generator was held at the very end). Measured
beside this suite's own run and neighbours spinning 40 ms of every 100 ms on both cores (5 Dec
2026): the worst second was 10.7% off, the run's total within 0.8%. A second falls half short,
or half a second's requests stay unfinished, only if the server or the generator stood still
for half a second: at 50% steal that is the whole of the host's take in one block, where it
takes it in slices of milliseconds (docs/contributing.md, "Timing bounds in the suite"). How
closely a quiet engine tracks (2% a second) is
:func:`test_ramp_tracks_the_offered_rate_within_2_percent`, marked ``benchmark`` (issue 52)."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner
from pywebbench.commands.load import command
from pywebbench.commands.run import command as run_command
from pywebbench.load import LoadResult, LoadSpec, RatePhase, parse_rate, run_load
from pywebbench.load.rate_phases import phase_lines, tracking_error
from pywebbench.refserver import RefServer

GENERATOR_CPUS = [1]
SECOND_SLACK = 0.5  # a second's achieved rate within half its offered one (module docstring)
HOLD_S = 0.5  # the longest the server or the generator stands still (module docstring)


def _whole_seconds(result: LoadResult) -> list[tuple[int, int, float]]:
    """(t, completed, offered rate) of the whole seconds after the first."""
    return [
        (s.t, s.completed, s.offered_rate or 0.0)
        for s in result.per_second
        if s.t >= 1 and s.t + 1 <= result.duration_s
    ]


@pytest.fixture(scope="module")
def ramp_result(refserver: RefServer) -> LoadResult:
    """1000 -> 20000 requests/s over 6 s, constant arrivals, the generator pinned to core 1."""
    spec = LoadSpec(
        url=refserver.url + "/hello",
        rate_phases=[RatePhase(rate=1000, end_rate=20000, duration_s=6)],
        connections=64,
        cpus=GENERATOR_CPUS,
    )
    return run_load(spec)


def _unfinished(result: LoadResult) -> int:
    """Sends offered and neither completed nor failed: in flight or unsent when it stopped."""
    assert result.open_loop is not None
    return result.connections.in_flight_at_end + result.open_loop.unsent_at_end


def test_ramp_offers_the_ramp_and_the_server_keeps_up(ramp_result: LoadResult) -> None:
    """The ramp's 63,000 sends (its integral: 6 s at a mean of 10,500/s) are offered, every one
    accounted for, and the offered rate is the curve's mean over the measured duration (the
    last rate held past the ramp's end): exact. Timed: the run ends when the generator next
    runs after the ramp's end (a second over it allowed, docs/contributing.md), each whole
    second within half its offered rate, and at most half a second of the last rate (10,000)
    unfinished (module docstring)."""
    r = ramp_result
    ol = r.open_loop
    assert ol is not None and r.spec.duration_s is None
    assert 6.0 <= r.duration_s < 7.0  # the ramp's length, and the generator's last wake-up
    assert ol.offered == 63000
    assert r.errors == 0, r.error_classes
    assert r.requests + _unfinished(r) == ol.offered
    assert sum(s.completed for s in r.per_second) == r.requests
    assert _unfinished(r) <= 20000 * HOLD_S
    held_s = r.duration_s - 6.0  # measured past the ramp's end, at its last rate
    assert ol.offered_rate == pytest.approx((63000 + 20000 * held_s) / r.duration_s, rel=1e-6)
    seconds = _whole_seconds(r)
    assert [t for t, _, _ in seconds] == [1, 2, 3, 4, 5]
    for t, completed, offered in seconds:
        # The ramp's mean over second t: 1000 + 19000 * (t + 0.5) / 6.
        assert offered == pytest.approx(1000 + 19000 * (t + 0.5) / 6, rel=1e-9)
        assert completed == pytest.approx(offered, rel=SECOND_SLACK), f"second {t}"
    # the summary's worst second is the one furthest from its offered rate
    worst = tracking_error(r)
    errors = {t: completed / offered - 1.0 for t, completed, offered in seconds}
    assert worst is not None and worst[1] == max(errors.values(), key=abs) == errors[worst[0]]


@pytest.mark.benchmark
def test_ramp_tracks_the_offered_rate_within_2_percent(ramp_result: LoadResult) -> None:
    """Every whole second within 2% of the ramp: an accuracy on a quiet host."""
    seconds = _whole_seconds(ramp_result)
    for t, completed, offered in seconds:
        assert completed == pytest.approx(offered, rel=0.02), f"second {t}"
    worst = tracking_error(ramp_result)
    assert worst is not None and abs(worst[1]) <= 0.02


def test_summary_shows_offered_vs_achieved_per_phase(ramp_result: LoadResult) -> None:
    lines = phase_lines(ramp_result)
    assert "1,000 -> 20,000/s over 6 s" in lines[0] and "offered" in lines[0]
    # achieved as a share of offered over the ramp: the responses of its first 6 seconds
    # against its 63,000 sends
    done = sum(s.completed for s in ramp_result.per_second if s.t < 6)
    assert f"({100 * done / 63000:.1f}%)" in lines[0], lines[0]
    assert lines[-1].strip().startswith("per second: achieved within")


def test_merged_results_add_the_offered_rates(ramp_result: LoadResult) -> None:
    merged = LoadResult.merge([ramp_result, ramp_result])
    assert merged.open_loop is not None and ramp_result.open_loop is not None
    assert merged.open_loop.offered_rate == pytest.approx(2 * ramp_result.open_loop.offered_rate)
    assert merged.spec.rate is None
    assert merged.spec.rate_phases[0].end_rate == pytest.approx(40000, rel=1e-6)
    for a, b in zip(merged.per_second, ramp_result.per_second, strict=True):
        assert a.offered_rate == pytest.approx(2 * (b.offered_rate or 0.0))


def test_steps_hold_each_rate(refserver: RefServer) -> None:
    spec = LoadSpec(
        url=refserver.url + "/hello",
        rate_phases=[RatePhase(rate=r, duration_s=2) for r in (2000, 8000, 4000)],
        connections=32,
        cpus=GENERATOR_CPUS,
    )
    r = run_load(spec)
    want = {1: 2000, 2: 8000, 3: 8000, 4: 4000, 5: 4000}
    for t, completed, offered in _whole_seconds(r):
        assert offered == want[t]
        assert completed == pytest.approx(offered, rel=SECOND_SLACK), f"second {t}"
    # 2 s at each of 2,000, 8,000 and 4,000/s; at most half a second of the last unfinished
    assert r.open_loop is not None and r.open_loop.offered == 28000
    assert r.errors == 0, r.error_classes
    assert r.requests + _unfinished(r) == r.open_loop.offered
    assert _unfinished(r) <= 4000 * HOLD_S


def test_poisson_arrivals_follow_a_ramp(refserver: RefServer) -> None:
    """Non-homogeneous Poisson arrivals (seeded): each second near its offered count (5
    standard deviations of the Poisson count, 7-11% here, or the timing slack of the module
    docstring, whichever is wider); the same seed gives the same number of sends."""
    spec = LoadSpec(
        url=refserver.url + "/hello",
        rate_phases=[RatePhase(rate=2000, end_rate=6000, duration_s=3)],
        arrival="poisson",
        seed=7,
        connections=32,
        cpus=GENERATOR_CPUS,
    )
    r = run_load(spec)
    for t, completed, offered in _whole_seconds(r):
        assert offered == pytest.approx(2000 + 4000 * (t + 0.5) / 3, rel=1e-3)
        slack = max(5 * math.sqrt(offered), SECOND_SLACK * offered)
        assert abs(completed - offered) <= slack, f"second {t}"
    assert r.open_loop is not None and r.open_loop.arrival == "poisson"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("5000", 5000.0),
        ("1000:20000:30s", [RatePhase(rate=1000, end_rate=20000, duration_s=30)]),
        ("1000,5000@500ms", [RatePhase(rate=r, duration_s=0.5) for r in (1000, 5000)]),
        ("20000:0:1m", [RatePhase(rate=20000, end_rate=0, duration_s=60)]),
    ],
)
def test_rate_forms(text: str, want: float | list[RatePhase]) -> None:
    assert parse_rate(text) == want


def test_bad_rate_phases_name_the_field() -> None:
    for bad in ("1000:2000", "1000:x:3s", "1,2@", "fast"):
        with pytest.raises(ValueError, match="^expected R, FROM:TO:DURATION"):
            parse_rate(bad)
    url = "http://127.0.0.1:9/"
    with pytest.raises(ValueError, match="^rate_phases: give either rate"):
        LoadSpec(url=url, rate=5, rate_phases=[RatePhase(rate=1, duration_s=1)])
    with pytest.raises(ValueError, match="^rate_phases: phase 2: duration_s must be > 0"):
        LoadSpec(url=url, rate_phases=[{"rate": 1, "duration_s": 1}, {"rate": 1, "duration_s": 0}])
    spec = LoadSpec(url=url, rate_phases=[RatePhase(rate=1, duration_s=1)])
    assert spec.mode == "open" and LoadSpec.from_json(spec.to_json()) == spec
    assert "rate_phases" not in LoadSpec(url=url).to_dict()


def test_documents_written_before_the_rename_still_read(ramp_result: LoadResult) -> None:
    """Specs and results stored (in SQLite, in --json files) before ``rate_profile`` became
    ``rate_phases`` read as the same spec and result, written back under the new name."""
    doc = ramp_result.to_dict()
    doc["spec"]["rate_profile"] = doc["spec"].pop("rate_phases")
    old_text = json.dumps(doc)
    assert LoadResult.from_json(old_text) == ramp_result
    assert LoadResult.of(json.loads(old_text)) == ramp_result  # as the store's readers do
    assert LoadSpec.from_dict(doc["spec"]) == ramp_result.spec
    assert '"rate_phases"' in ramp_result.spec.to_json()
    assert "rate_profile" not in ramp_result.to_json()
    with pytest.raises(ValueError, match="^rate_phases: phase 1: duration_s"):
        LoadSpec.from_dict(
            {"url": ramp_result.spec.url, "rate_profile": [{"rate": 1, "duration_s": 0}]}
        )


def test_cli_rejects_a_bad_rate_in_one_line() -> None:
    res = CliRunner().invoke(command, ["http://127.0.0.1:9/", "--rate", "0,0@1s"])
    assert res.exit_code == 2
    assert "--rate: every rate is 0" in res.output and "Traceback" not in res.output


def test_cli_runs_steps_and_reports_each_phase(refserver: RefServer) -> None:
    res = CliRunner().invoke(
        command, [refserver.url + "/hello", "--rate", "500,1000@500ms", "-c", "4", "-q"]
    )
    assert res.exit_code == 0, res.output
    assert "open loop, steps 500, 1,000/s, 0.5 s each" in res.output
    assert "phase 1" in res.output and "phase 2" in res.output


def test_run_keeps_constant_rates_and_says_so() -> None:
    res = CliRunner().invoke(run_command, ["--rate", "1000:2000:3s"])
    assert res.exit_code == 2
    assert "--rate: run sweeps constant rates" in res.output and "Traceback" not in res.output
