"""Barrett's classes on real curves recorded from the reference server (issue 21: at least
95% classified as labelled; here each shape must be, in one of two recordings: RECORDINGS).

Each curve is a real warm-up load (its 0.25 s buckets) and a real 3 s measured iteration
(its progress snapshots), as the runner records them:
- flat: a settled server (20 ms delay, 2 ms jitter: ~400 req/s on 8 connections);
- warm-up: a delay falling from 40 ms to 0 over 3 s (``delay_ramp_s``), then settled at
  its 6 ms jitter;
- no steady state: a saw-tooth delay that climbs to 8 ms every 3 s (``delay_saw_s``);
- slowdown: the flat server loaded by 16 connections for 4 s, then by 4 (the reference
  server has no rising-delay shape; fewer connections on a timer-bound server are a real,
  lasting drop of its throughput).

The four shapes are timer-bound, so their first recordings are made at the same time, each
with its own server (about 11 s instead of 45 s): together they serve a few thousand
requests a second, a few percent of a core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from pwbtest import GEN_CPUS
from pywebbench.load import LoadProgress, LoadSpec, LocalAgent
from pywebbench.refserver import RefServer
from pywebbench.run.steadiness import measured_curve, warm_until_steady
from pywebbench.steady import SteadyRule
from pywebbench.warmup_class import WarmupClass, classify

Spec = Callable[[float], LoadSpec]
Recording = tuple[list[float], list[float]]  # a warm-up curve, a measured curve


def _spec(url: str, connections: int) -> Spec:
    def build(duration_s: float) -> LoadSpec:
        return LoadSpec(
            url=url + "/hello", connections=connections, duration_s=duration_s, cpus=GEN_CPUS
        )

    return build


def _warm(spec: Spec, seconds: float) -> list[float]:
    """A warm-up load of ``seconds`` that runs to its end (the deep mode's), its curve."""
    rule = SteadyRule(window_s=2.0, cap_s=seconds)
    _, verdict = warm_until_steady(LocalAgent(), spec, rule, stop_when_steady=False)
    return [y for _, y in verdict.curve]


def _measured(spec: Spec) -> list[float]:
    snapshots: list[tuple[float, int]] = []

    def keep(p: LoadProgress) -> None:
        snapshots.append((p.elapsed_s, p.requests))

    result = LocalAgent().run(spec(3.0), progress=keep)
    return [y for _, y in measured_curve([(result, [], snapshots)])]


# Timer-bound shapes (a few hundred to a few thousand req/s on 4-16 connections), so that
# what is recorded is the server's shape, not the shared machine's CPU contention (a 5 ms
# server on 8 connections fell from ~1,050 to ~500 req/s for seconds while other tests ran).
CASES = {
    "flat": (WarmupClass.FLAT, {"delay_ms": 20.0, "delay_jitter_ms": 2.0}),
    "warm-up": (
        WarmupClass.WARMUP,
        {"delay_ms": 40.0, "delay_ramp_s": 3.0, "delay_jitter_ms": 6.0},
    ),
    "no steady state": (WarmupClass.NO_STEADY_STATE, {"delay_ms": 8.0, "delay_saw_s": 3.0}),
    "slowdown": (WarmupClass.SLOWDOWN, {"delay_ms": 20.0, "delay_jitter_ms": 2.0}),
}


#: Recordings per case. Issue 21 asks that at least 95% of real curves are classified as
#: labelled, so one recording may fairly be misclassified 5% of the time (a neighbour's
#: burst inside the measured 3 s is a real level change); with 4 cases a single recording
#: each would fail the suite up to 1 run in 5. A case passes when one of 2 recordings is
#: classified as labelled: at a 5% miss rate a false failure is 0.25% per case, 1% per
#: run. A classifier that gets a shape wrong still fails: it gets it wrong both times.
RECORDINGS = 2


def _record(label: WarmupClass, shape: dict[str, float]) -> Recording:
    with RefServer(cpus=[0], **shape) as srv:  # type: ignore[arg-type]
        if label == WarmupClass.SLOWDOWN:
            warmup = _warm(_spec(srv.url, 16), 4.0) + _warm(_spec(srv.url, 4), 4.0)
            return warmup, _measured(_spec(srv.url, 4))
        return _warm(_spec(srv.url, 8), 8.0), _measured(_spec(srv.url, 8))


@pytest.fixture(scope="module")
def first_recordings() -> Iterator[dict[str, Future[Recording]]]:
    """Every case's first recording, started together (each in its own thread)."""
    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
        yield {case: pool.submit(_record, *CASES[case]) for case in CASES}


@pytest.mark.parametrize("case", list(CASES))
def test_a_real_curve_is_classified_as_labelled(
    case: str, first_recordings: dict[str, Future[Recording]]
) -> None:
    label, shape = CASES[case]
    missed = []
    for attempt in range(RECORDINGS):
        warmup, measured = (
            first_recordings[case].result() if attempt == 0 else _record(label, shape)
        )
        got = classify(warmup, measured)
        if got == label:
            return
        missed.append((str(got), [round(y) for y in warmup], [round(y) for y in measured]))
    raise AssertionError(f"{case}: every recording misclassified: {missed}")
