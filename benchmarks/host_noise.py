"""How much does this host's speed move within a second? The floor under a group's slices.

A fixed Python loop is pinned to a core and counts its steps in windows of ``--window``
seconds for ``--seconds``; nothing of pywebbench runs beside it. Two loops, one after the
other, on core 0 (the server's):

- ``tiny``: ``n += 1`` (the core-speed probe's loop: a few bytes of code and data);
- ``json``: ``json.dumps``/``json.loads`` of a small dict and a dict lookup among 1,000
  (an interpreter's footprint, as a web stack's request).

Then the ``json`` loop on core 0 and core 1 at once: whether what moves is shared by both
cores. It prints, per loop, the spread (sd over the mean) of its rate a window, the same
over windows 2, 4 and 8 times as long (noise that averages out falls as their square root),
and its lowest window; for the pair, the correlation of the two cores' rates.

    python benchmarks/host_noise.py                  # 60 s a loop, 0.25-s windows
    python benchmarks/host_noise.py --seconds 20 --json

On the EPYC VM of docs/measurements.md ("Where the slices' noise comes from") the ``json``
loop's rate spread 10.6% a 0.25-s window and still 7.1% over 2 s: a group's 0.25-s slices
carry that noise whatever their length, and only more of them (or a quieter host) narrow
its intervals. Only this script's own processes are started, and each ends on its own.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Sequence

LOOP = r"""
import json, os, sys, time
kind, window, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
doc = {"message": "Hello, World!", "items": list(range(50)), "nested": {"a": 1, "b": [1, 2]}}
table = {f"k{i}": i for i in range(1000)}
counts = []
start = time.monotonic()
edge, n = start + window, 0
while True:
    if kind == "json":
        for i in range(20):
            json.loads(json.dumps(doc))
            table.get(f"k{(n + i) % 1000}")
    else:
        for _ in range(2000):
            n += 1
    n += 1
    now = time.monotonic()
    if now >= edge:
        counts.append([edge - start, n / (now - edge + window)])
        n, edge = 0, edge + window
        if edge - start > seconds:
            break
print(json.dumps(counts))
"""

#: Windows this many times as long, for the spread that averaging leaves.
LONGER = (2, 4, 8)


def spread(rates: Sequence[float], k: int = 1) -> float:
    """The sd over the mean of ``rates`` averaged in runs of ``k`` consecutive windows (a
    last incomplete run left out); NaN with fewer than 2 runs."""
    runs = [statistics.fmean(rates[i : i + k]) for i in range(0, len(rates) - k + 1, k)]
    if len(runs) < 2:
        return math.nan
    return statistics.stdev(runs) / statistics.fmean(runs)


def summary(name: str, rates: Sequence[float], window: float) -> dict[str, object]:
    """One loop's figures (module doc)."""
    mean = statistics.fmean(rates)
    return {
        "loop": name,
        "windows": len(rates),
        "window_s": window,
        "sd": round(spread(rates), 4),
        "sd_longer": {f"{k * window:g}s": round(spread(rates, k), 4) for k in LONGER},
        "lowest": round(min(rates) / mean, 3),
    }


def correlation(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson's correlation of two cores' rates, window by window (the shorter's length)."""
    n = min(len(a), len(b))
    return statistics.correlation(list(a[:n]), list(b[:n])) if n > 2 else math.nan


def run_loops(
    kinds_on: Sequence[tuple[str, int]], window: float, seconds: float
) -> list[list[float]]:
    """Each (loop, core) in its own pinned process, all at once; their rates a window."""
    procs = [
        subprocess.Popen(
            [
                "taskset",
                "-c",
                str(core),
                sys.executable,
                "-c",
                LOOP,
                kind,
                str(window),
                str(seconds),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for kind, core in kinds_on
    ]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=seconds + 60)
        if p.returncode != 0:
            raise SystemExit(f"a loop failed (exit {p.returncode})")
        out.append([rate for _, rate in json.loads(stdout)])
    return out


def describe(s: dict[str, object]) -> str:
    """One line for a loop's figures."""
    longer = s["sd_longer"]
    assert isinstance(longer, dict)
    return (
        f"{s['loop']}: {s['windows']} windows of {s['window_s']} s; sd {s['sd']:.1%} a window "
        f"({', '.join(f'{v:.1%} over {k}' for k, v in longer.items())}); lowest window "
        f"{s['lowest']}x the mean"
    )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds a loop (default 60)")
    ap.add_argument("--window", type=float, default=0.25, help="seconds a window (default 0.25)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if not (0 < args.window <= args.seconds / 4):
        ap.error("--window: give at least 4 windows in --seconds")
    figures: dict[str, object] = {}
    for kind in ("tiny", "json"):
        (rates,) = run_loops([(kind, 0)], args.window, args.seconds)
        figures[kind] = summary(kind, rates, args.window)
    zero, one = run_loops([("json", 0), ("json", 1)], args.window, args.seconds)
    figures["json_both_cores"] = {
        "core0": summary("json on core 0, beside core 1", zero, args.window),
        "correlation": round(correlation(zero, one), 3),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for kind in ("tiny", "json"):
        s = figures[kind]
        assert isinstance(s, dict)
        print(describe(s))
    both = figures["json_both_cores"]
    assert isinstance(both, dict)
    print(f"json on cores 0 and 1 at once: correlation {both['correlation']:.2f} window by window")


if __name__ == "__main__":
    main()
