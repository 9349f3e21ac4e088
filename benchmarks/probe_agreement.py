"""Does the core-speed probe read the core, or itself? Three probes side by side.

The study's probe (``pywebbench.meter.core_speed.CoreSpeedProbe``: a thread of the
orchestrator, pinned to the server's core, 2 ms of a fixed loop every 100 ms) stores one
rate per iteration (``iterations.core_rate``). This script runs two more probes of the same
loop, each in a process of its own on the same core, beside ``--runs`` small studies of
gunicorn-sync raw-wsgi ``cpu`` (server on core 0, generator on core 1), then, for every
measured iteration, sets the three probes' medians over its window beside the server's
req/s.

If the probes read the core, they agree, and the server's req/s follow them. On the 2-vCPU
VM of docs/interference.md (2026-11-27, quiet) each probe in turn read about 0.75x the
others for the whole life of one server process, while the server's req/s did not move:
that is what :data:`pywebbench.analysis.elasticity.UNIDENTIFIED_ELASTICITY` guards against.

    python benchmarks/probe_agreement.py --runs 12        # about 4 minutes
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from pywebbench.analysis.elasticity import centred_logs

PWB = str(Path(sys.executable).parent / "pywebbench")

#: One probe process: the study's loop, on core 0, every 100 ms, "wall-time rate" lines.
PROBE = """
import os, sys, time
from pywebbench.meter.core_speed import loop_rate
os.sched_setaffinity(0, [0])
out = open(sys.argv[1], "w", buffering=1)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    rate = loop_rate(0.002)
    out.write(f"{time.time():.3f} {rate:.0f}\\n")
    time.sleep(0.1)
"""

#: A window is "in disagreement" when two probes' medians differ by more than this.
DISAGREE = 0.08


def study(results: Path, replicates: int) -> None:
    """One small study into ``results`` (its own fresh servers)."""
    subprocess.run(
        [PWB, "run", "--python", "cpython3.11", "--server", "gunicorn-sync"]
        + ["--framework", "raw-wsgi", "--workload", "cpu", "-c", "4", "-d", "2"]
        + ["--warmup", "fixed", "--warmup-duration", "1", "--replicates", str(replicates)]
        + ["--max-replicates", str(replicates), "--no-report", "--results-dir", str(results)],
        check=True,
        capture_output=True,
        timeout=600,
    )


def readings(path: Path) -> list[tuple[float, float]]:
    return [(float(t), float(r)) for t, r in (line.split() for line in path.open())]


def median_in(series: list[tuple[float, float]], start: float, end: float) -> float:
    inside = [r for t, r in series if start <= t <= end]
    return statistics.median(inside) if inside else math.nan


def within_run_correlation(points: list[tuple[str, float, float]]) -> float:
    """Correlation of log req/s with log rate, each run centred on its own means."""
    runs = sorted({r for r, _, _ in points})
    xs, ys = centred_logs([(x, y) for r, x, y in points if r == run] for run in runs)
    if len(xs) < 3 or not any(xs) or not any(ys):
        return math.nan
    return statistics.correlation(xs, ys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=12, help="small studies (default 12)")
    ap.add_argument("--replicates", type=int, default=3, help="per study (default 3)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pwb-probes-"))
    files = [tmp / "probe-a.txt", tmp / "probe-b.txt"]
    budget = str(a.runs * a.replicates * 8 + 60)
    probes = [subprocess.Popen([sys.executable, "-c", PROBE, str(f), budget]) for f in files]
    try:
        time.sleep(1)
        for k in range(a.runs):
            study(tmp / "store", a.replicates)
            print(f"study {k + 1} of {a.runs} done", file=sys.stderr, flush=True)
    finally:
        for p in probes:
            p.terminate()
            p.wait(timeout=10)
    series = [readings(f) for f in files]
    db = sqlite3.connect(tmp / "store" / "pywebbench.sqlite")
    rows = db.execute(
        "SELECT c.run_id, i.replicate, i.started_at, i.duration_s, i.rps, i.core_rate "
        "FROM iterations i JOIN cells c ON c.id = i.cell_id "
        "WHERE i.kind = 'measured' AND i.core_rate IS NOT NULL ORDER BY i.started_at"
    ).fetchall()
    names = ("study's probe", "probe A", "probe B")
    table = []
    for run_id, rep, started, duration, rps, core_rate in rows:
        start = datetime.fromisoformat(started).timestamp()
        rates = [core_rate, *(median_in(s, start, start + duration) for s in series)]
        table.append((run_id, rep, rps, rates))
    print(f"{len(table)} measured iterations of {a.runs} studies; server on core 0, all three "
          "probes on core 0, generator on core 1")  # fmt: skip
    print("run (last 4)  replicate  req/s   " + "  ".join(f"{n:>13}" for n in names))
    for run_id, rep, rps, rates in table:
        print(f"{run_id[-4:]:>12}  {rep:9d}  {rps:6.0f}   "
              + "  ".join(f"{r / 1e6:13.1f}" for r in rates))  # fmt: skip
    pairs = [(0, 1), (0, 2), (1, 2)]
    for i, j in pairs:
        apart = sum(
            1 for *_, r in table if not math.isnan(r[i] + r[j]) and abs(r[i] / r[j] - 1) > DISAGREE
        )
        print(f"{names[i]} and {names[j]}: {apart} of {len(table)} windows more than "
              f"{DISAGREE:.0%} apart")  # fmt: skip
    for i, name in enumerate(names):
        points = [(run, r[i], rps) for run, _, rps, r in table if not math.isnan(r[i])]
        print(f"req/s against {name}, within each study: correlation "
              f"{within_run_correlation(points):+.2f}")  # fmt: skip
    print(f"store and readings: {tmp}")


if __name__ == "__main__":
    main()
