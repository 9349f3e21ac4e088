"""How steady is a core's own speed? A fixed Python loop's work per CPU-second of its thread.

The interference guard (docs/interference.md) sees other processes' CPU time and the
hypervisor's steal. It cannot see a core that does less work per CPU-second than it did a
minute ago (the host's frequency, an SMT sibling or a neighbour guest sharing its caches):
the server still uses its whole core, nothing else runs, and the figure moves. This script
measures that directly: a thread pinned to each core runs the probe's loop
(``pywebbench.meter.core_speed``), and every
``--point`` seconds of its own CPU time (``time.thread_time``: waiting for the core does not
count) the loop's rate is recorded, as a fraction of the core's median rate.

    python benchmarks/core_speed.py --cpus 0,1 --seconds 40

Prints, per core, min / median / max of the rate (median = 1) and the series. On a quiet
bare-metal machine with a fixed frequency the series stays within a few percent; the 2-vCPU
VM of docs/interference.md moved between 0.60 and 1.15 within 40 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from pywebbench.meter.core_speed import loop_rate


def rates(cpu: int, seconds: float, point_s: float) -> list[float]:
    """The loop's steps per CPU-second of this thread, pinned to ``cpu``, one per point."""
    os.sched_setaffinity(0, {cpu})  # 0: the calling thread only
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.append(loop_rate(point_s))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpus", default="0", help="comma-separated cores (default: 0)")
    ap.add_argument("--seconds", type=float, default=40.0, help="wall seconds (default: 40)")
    ap.add_argument("--point", type=float, default=0.25, help="CPU seconds per point")
    args = ap.parse_args()
    if not 0 < args.seconds <= 600 or not 0.01 <= args.point <= 10:
        ap.error("--seconds must be in (0, 600] and --point in [0.01, 10]")
    cpus = [int(c) for c in args.cpus.split(",") if c.strip()]
    found: dict[int, list[float]] = {}
    for cpu in cpus:  # one core after the other: one interpreter, one thread running at a time
        found[cpu] = rates(cpu, args.seconds, args.point)
    for cpu, series in found.items():
        mid = statistics.median(series)
        rel = [r / mid for r in series]
        print(
            f"core {cpu}: {len(rel)} points of {args.point} CPU-s; "
            f"min {min(rel):.2f}, median 1.00, max {max(rel):.2f} "
            f"(max/min {max(rel) / min(rel):.2f}x)"
        )
        print("  " + " ".join(f"{r:.2f}" for r in rel))


if __name__ == "__main__":
    main()
