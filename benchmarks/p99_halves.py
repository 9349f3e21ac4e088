"""An open loop's p99 over processes, taken apart: sampling or the processes themselves?

    python benchmarks/p99_halves.py RESULTS/pywebbench.sqlite

For each stack of a stored interleaved open-loop run (``pywebbench run --rate R``), each
server process's measured slices are split by round into odd and even halves; each half's
latency histograms (the engine's HdrHistograms) are merged and its p99 read. How far one
half's p99 lies from the other's gives the sampling noise of a process's p99; the spread of
the processes' whole p99s is that noise plus what truly differs between processes. Only the
sampling part narrows with more rounds (docs/measurements.md, issue 64's p99 at +-3%).
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
from collections import defaultdict
from pathlib import Path

from pywebbench.load.histogram import Histogram


def p99s(store: Path) -> dict[str, dict[int, tuple[float, float, float, int]]]:
    """Stack -> process (replicate) -> (p99 of all its measured slices, of its odd rounds',
    of its even rounds', requests), in microseconds."""
    slices: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "select c.key, i.replicate, i.idx, i.result_json from iterations i"
            " join cells c on c.id = i.cell_id where c.status = 'ok' and i.kind = 'measured'"
        ).fetchall()
    for key, replicate, idx, result in rows:
        hist = (json.loads(result).get("ab_slice") or {}).get("latency") or {}
        if hist.get("hist"):
            slices[(key.split("|")[0], replicate)].append((idx, hist["hist"]))
    out: dict[str, dict[int, tuple[float, float, float, int]]] = defaultdict(dict)
    for (stack, replicate), mine in slices.items():
        whole = Histogram.merge_all(h for _, h in mine)
        odd = Histogram.merge_all(h for i, h in mine if i % 2)
        even = Histogram.merge_all(h for i, h in mine if not i % 2)
        out[stack][replicate] = (
            whole.quantile(0.99),
            odd.quantile(0.99),
            even.quantile(0.99),
            whole.count,
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a results directory's pywebbench.sqlite")
    args = ap.parse_args()
    found = p99s(args.store)
    if not found:
        raise SystemExit(f"{args.store}: no measured slice with a latency histogram")
    print("stack: processes' p99 (ms); spread between processes; sampling noise of one")
    for stack, procs in sorted(found.items()):
        whole = [v[0] for v in procs.values()]
        between = statistics.stdev(math.log(x) for x in whole) if len(whole) > 1 else math.nan
        # log(odd/even) has twice a half's variance; a whole process's is half a half's
        halves = [math.log(v[1] / v[2]) for v in procs.values()]
        noise = math.sqrt(statistics.fmean(h * h for h in halves) / 2) / math.sqrt(2)
        print(
            f"  {stack}: {', '.join(f'{x / 1000:.2f}' for x in whole)}; "
            f"{between:.1%}; {noise:.1%} ({', '.join(str(v[3]) for v in procs.values())} "
            "requests)"
        )


if __name__ == "__main__":
    main()
