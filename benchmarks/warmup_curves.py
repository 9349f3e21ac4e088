"""The steady-state rule, the drift test and Barrett's classes on real curves of the
reference server: how often each verdict is right, on fresh recordings.

    python benchmarks/warmup_curves.py --recordings 10         # record and judge
    python benchmarks/warmup_curves.py --recordings 5 --save tests/run/data/warmup_curves.json

Each recording is a real load of a reference server pinned to core 0, the engine on core 1,
with a shape whose right verdict is known:
- ``ramp 4`` / ``ramp 7``: a 40 ms delay falling to 0 over 4 s (7 s), 10 ms of jitter; a
  warm-up to 20 s past the ramp. Right: never steady on the ramp, steady within 6 s after it.
- ``sawtooth``: an 8 ms delay climbing every 3 s; a 9 s warm-up. Right: never steady.
- ``still warming``: a 3 s measured iteration of a 6 s ramp from its start. Right: drifting.
- ``settled``: a 3 s measured iteration of a settled server (after one before it). Right:
  not drifting.
- ``flat``, ``warm-up``, ``no steady state``, ``slowdown``: an 8 s warm-up (for the
  slowdown, 4 s on 16 connections then 4 s on 4) and a 3 s measured iteration. Right: the
  class of the name (``pywebbench.analysis.warmup_class.classify``).

Every shape is timer-bound (a few hundred to ~2,000 req/s, a few percent of a core): the
recordings of one round run at the same time, each with its own server.

The suite judges the same rules on a fixed set of these recordings (``--save``; a JSON file
of the progress snapshots and the measured results), so that its verdicts do not depend on
the host it runs on (tests/run/test_warmup_recorded.py, issue 52). This script answers the
other question: how often the rules are right on a new recording, on this host, today.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pywebbench.analysis.warmup import SteadyRule, WarmupEnd, WarmupVerdict, WarmupWatch
from pywebbench.analysis.warmup_class import WarmupClass, classify
from pywebbench.load import LoadProgress, LoadSpec, LocalAgent
from pywebbench.load.result import LoadResult
from pywebbench.refserver import RefServer
from pywebbench.run.steadiness import replicate_checks, snapshot_series

SERVER_CPUS = [0]
GEN_CPUS = [1]
SCHEMA = 1

Snapshots = list[tuple[float, int]]  # (elapsed s, requests so far, warm-up included)

#: name -> (reference server shape, connections of each warm-up segment, warm-up seconds of
#: each, measured 3 s iterations (the last is kept)).
SHAPES: dict[str, tuple[dict[str, float], list[int], list[float], int]] = {
    "ramp 4": ({"delay_ms": 40.0, "delay_ramp_s": 4.0, "delay_jitter_ms": 10.0}, [8], [24.0], 0),
    "ramp 7": ({"delay_ms": 40.0, "delay_ramp_s": 7.0, "delay_jitter_ms": 10.0}, [8], [27.0], 0),
    "sawtooth": ({"delay_ms": 8.0, "delay_saw_s": 3.0}, [8], [9.0], 0),
    "still warming": ({"delay_ms": 40.0, "delay_ramp_s": 6.0, "delay_jitter_ms": 10.0}, [], [], 1),
    "settled": ({"delay_ms": 20.0, "delay_jitter_ms": 2.0}, [], [], 2),
    "flat": ({"delay_ms": 20.0, "delay_jitter_ms": 2.0}, [8], [8.0], 1),
    "warm-up": ({"delay_ms": 40.0, "delay_ramp_s": 3.0, "delay_jitter_ms": 6.0}, [8], [8.0], 1),
    "no steady state": ({"delay_ms": 8.0, "delay_saw_s": 3.0}, [8], [8.0], 1),
    "slowdown": ({"delay_ms": 20.0, "delay_jitter_ms": 2.0}, [16, 4], [4.0, 4.0], 1),
}
#: The rule of the steady-state shapes (the quick profile's window; the cap is the load's).
RAMP_RULE = SteadyRule(window_s=2.0, cap_s=1e9)
#: How long after the ramp's end a steady verdict may come and still count as right.
STEADY_WITHIN_S = 6.0
CLASSES = {
    "flat": WarmupClass.FLAT,
    "warm-up": WarmupClass.WARMUP,
    "no steady state": WarmupClass.NO_STEADY_STATE,
    "slowdown": WarmupClass.SLOWDOWN,
}


def _load(url: str, connections: int, seconds: float) -> tuple[LoadResult, Snapshots]:
    snapshots: Snapshots = []

    def keep(p: LoadProgress) -> None:
        snapshots.append((round(p.elapsed_s, 4), p.requests + p.warmup_requests))

    spec = LoadSpec(url=url + "/hello", connections=connections, duration_s=seconds, cpus=GEN_CPUS)
    return LocalAgent().run(spec, progress=keep), snapshots


def record(name: str) -> dict[str, Any]:
    """One recording of shape ``name``: its warm-up segments' snapshots, and its last
    measured iteration (result and snapshots)."""
    shape, connections, seconds, measured = SHAPES[name]
    out: dict[str, Any] = {"warmup": []}
    with RefServer(cpus=SERVER_CPUS, **shape) as srv:  # type: ignore[arg-type]
        for c, s in zip(connections, seconds, strict=True):
            out["warmup"].append(_load(srv.url, c, s)[1])
        for _ in range(measured):
            result, snapshots = _load(srv.url, connections[-1] if connections else 8, 3.0)
            out["measured"] = {"result": result.model_dump(mode="json"), "snapshots": snapshots}
    return out


# --- the verdicts (the suite's tests judge recordings with these same functions) ---


def replay(snapshots: Snapshots, rule: SteadyRule) -> WarmupVerdict:
    """The warm-up verdict the runner would reach on these snapshots (it stops at the first
    verdict, as ``warm_until_steady`` does), or at the load's end."""
    watch = WarmupWatch(rule)
    for t, n in snapshots:
        verdict = watch.observe(t, n)
        if verdict is not None:
            return verdict
    return watch.verdict_at_cap(snapshots[-1][0] if snapshots else 0.0)


def warmup_series(segments: list[Snapshots]) -> list[float]:
    """The warm-up curve (req/s per 0.25 s bucket) of every segment, end to end, as the deep
    mode records it (a rule that is never met: the whole curve)."""
    ys: list[float] = []
    for snapshots in segments:
        watch = WarmupWatch(SteadyRule(window_s=2.0, cap_s=1e9), stop_when_steady=False)
        for t, n in snapshots:
            watch.observe(t, n)
        ys += [y for _, y in watch.curve]
    return ys


def measured_parts(recording: dict[str, Any]) -> tuple[LoadResult, Snapshots]:
    m = recording["measured"]
    return LoadResult.model_validate(m["result"]), [(float(t), int(n)) for t, n in m["snapshots"]]


def verdict(name: str, recording: dict[str, Any]) -> tuple[bool, str]:
    """Whether the rules judge this recording of ``name`` right, and what they found."""
    if name.startswith("ramp"):
        ramp_s = SHAPES[name][0]["delay_ramp_s"]
        v = replay(recording["warmup"][0], RAMP_RULE)
        start = v.steady_start_s
        right = (
            v.end == WarmupEnd.STEADY
            and start is not None
            and ramp_s - 1.0 <= start <= ramp_s + STEADY_WITHIN_S
        )
        return right, f"{v.end} at {start}"
    if name == "sawtooth":
        v = replay(recording["warmup"][0], SteadyRule(window_s=2.0, cap_s=9.0))
        return v.end == WarmupEnd.CAP, f"{v.end} at {v.steady_start_s}"
    if name in ("still warming", "settled"):
        result, snapshots = measured_parts(recording)
        trend, _ = replicate_checks([(result, [], snapshots)], max_drift=0.05)
        return trend.drifting == (name == "still warming"), (
            f"drifting={trend.drifting} change={trend.change:+.2f} p={trend.p_value:.3f}"
        )
    result, snapshots = measured_parts(recording)
    got = classify(warmup_series(recording["warmup"]), snapshot_series(snapshots))
    return got == CLASSES[name], str(got)


def _round(pool: ThreadPoolExecutor, names: list[str]) -> dict[str, dict[str, Any]]:
    futures = {name: pool.submit(record, name) for name in names}
    return {name: f.result() for name, f in futures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recordings", type=int, default=5, help="recordings of each shape")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated names")
    parser.add_argument("--save", type=Path, help="write the recordings here (the fixture)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.shapes.split(",") if n.strip()]
    unknown = [n for n in names if n not in SHAPES]
    if unknown or args.recordings < 1:
        print(f"--shapes: unknown {unknown}" if unknown else "--recordings: at least 1")
        return 2
    recordings: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        for k in range(args.recordings):
            for name, rec in _round(pool, names).items():
                recordings[name].append(rec)
            print(f"round {k + 1}/{args.recordings} ({time.monotonic() - started:.0f} s)")
    print(f"{'shape':<16} right   verdicts")
    for name in names:
        judged = [verdict(name, r) for r in recordings[name]]
        right = sum(ok for ok, _ in judged)
        said = "; ".join(what for _, what in judged)
        print(f"{name:<16} {right}/{len(judged)}   {said}")
    if args.save:
        doc = {"schema": SCHEMA, "recorded": time.strftime("%Y-%m-%d"), "shapes": recordings}
        tmp = args.save.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        tmp.replace(args.save)
        print(f"saved {args.save} ({args.save.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
