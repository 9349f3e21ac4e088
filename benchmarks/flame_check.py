"""``run --flamegraph`` (docs/flamegraphs.md): the sampler's overhead and what it attributes.

    python benchmarks/flame_check.py [--replicates 3] [--keep DIR]
    python benchmarks/flame_check.py --compare-only --compare-rounds 5   # point 4, 5 times

Server pinned to core 0, load generator to core 1 (the study's defaults). Prints:

1. **Overhead.** Per replicate, the throughput of the sampled window (py-spy attached) against
   the measured iteration just before it on the same server process, gunicorn-sync raw-wsgi,
   hello and cpu: the median ratio over the replicates.
2. **fib.** cpu n=25 on gunicorn-sync: the share of the worker's non-idle samples inside fib.
3. **A Rust server.** granian-wsgi hello: the breakdown, with its threads' *native, unsampled*.
4. **compare n=20 against n=22.** The function that changed most, its CPU per request ratio
   (fib(22)/fib(20) makes 2.618x the calls) and the tree's CPU per request against the inverse
   throughput ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pywebbench.meter.breakdown import breakdown, stack_seconds
from pywebbench.meter.flame import FlameWindow
from pywebbench.store import Store

PWB = str(Path(sys.executable).parent / "pywebbench")
FIB_RATIO = 57_313 / 21_891


def run(results: Path, *args: str, n: int | None = None) -> str:
    """One `pywebbench run` into ``results`` (the cpu workload's n, if given); its run id."""
    if n is not None:  # workload parameters are study-file keys
        study = results / f"cpu-{n}.toml"
        study.write_text(f"[matrix]\nworkload_params = {{cpu = {{n = {n}}}}}\n")
        args = (*args, "--config", str(study))
    proc = subprocess.run(
        [PWB, "run", "--python", "cpython3.11", "--framework", "raw-wsgi", "-c", "4", "-d", "2"]
        + ["--warmup", "fixed", "--warmup-duration", "1", "--flamegraph"]
        + ["--flamegraph-duration", "2", "--no-report", "--results-dir", str(results), *args],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        sys.exit(proc.stdout[-2000:] + proc.stderr[-2000:])
    with Store(results / "pywebbench.sqlite", create=False) as store:
        return store.resolve_run_ids([])[-1]


def windows(results: Path, run_id: str) -> list[tuple[float, FlameWindow]]:
    """(measured req/s, sampled window) per replicate."""
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study([run_id])
    rps = {(i.cell_id, i.replicate): i.rps for i in study.iterations if i.kind == "measured"}
    out = []
    for rep in study.replicates:
        doc = rep.flame
        if doc and "error" not in doc:
            out.append((rps[(rep.cell_id, rep.replicate)], FlameWindow.from_dict(doc)))
    return out


def worker_share(window: FlameWindow, function: str) -> float:
    worker = {s: n for s, n in window.stacks.items() if s.count("process ") >= 2}
    sub = FlameWindow(**{**window.to_dict(), "stacks": worker})
    pairs = stack_seconds(sub)
    total = sum(s for _, s in pairs)
    inside = sum(s for f, s in pairs if any(x.startswith(f"{function} (") for x in f))
    return inside / total if total else 0.0


def compare_once(results: Path, reps: list[str], round_: int) -> bool:
    """Point 4 once, on two fresh runs: whether both 10% bounds held."""
    base = run(results, "--server", "gunicorn-sync", "--workload", "cpu", *reps, n=20)
    new = run(results, "--server", "gunicorn-sync", "--workload", "cpu", *reps, n=22)
    proc = subprocess.run(
        [PWB, "compare", base, new, "--format", "json", "--results-dir", str(results)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    [cell] = json.loads(proc.stdout)["cells"]
    top = cell["grown"][0]
    cpu_b, cpu_n = cell["cpu_per_request_s"]
    fib = top["new_s"] / top["base_s"]
    tree, inverse = cpu_n / cpu_b, 1 / cell["rps"]["ratio"]
    print(f"4. compare n=20 -> n=22 (round {round_ + 1}): verdict {cell['verdict']}, req/s ratio "
          f"{cell['rps']['ratio']:.3f}; changed most: {top['function']} {fib:.3f}x (calls "
          f"ratio {FIB_RATIO:.3f}); tree CPU per request {tree:.3f}x against inverse "
          f"throughput {inverse:.3f}x; CPU at one core speed: "
          f"{'yes' if cell.get('cpu_at_one_speed') else 'no'}", flush=True)  # fmt: skip
    return (
        top["function"] == "fib"
        and abs(fib / FIB_RATIO - 1) <= 0.10
        and abs(tree / inverse - 1) <= 0.10
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="results directory to keep")
    parser.add_argument(
        "--compare-only",
        action="store_true",
        help="only point 4 (compare n=20 against n=22)",
    )
    parser.add_argument(
        "--compare-rounds",
        type=int,
        default=1,
        help="point 4 this many times, each on fresh runs; prints how many met the 10%% bounds",
    )
    args = parser.parse_args()
    reps = ["--replicates", str(args.replicates), "--max-replicates", str(args.replicates)]
    results = args.keep or Path(tempfile.mkdtemp(prefix="pwb-flame-"))
    results.mkdir(parents=True, exist_ok=True)

    if not args.compare_only:
        print("1. overhead: sampled window / measured iteration, same server process")
        for workload in ("hello", "cpu"):
            rid = run(results, "--server", "gunicorn-sync", "--workload", workload, *reps)
            ratios = [w.requests / w.duration_s / rps for rps, w in windows(results, rid) if rps]
            print(f"   gunicorn-sync raw-wsgi {workload}: median {statistics.median(ratios):.3f} "
                  f"({', '.join(f'{r:.3f}' for r in ratios)})")  # fmt: skip

        rid = run(results, "--server", "gunicorn-sync", "--workload", "cpu", n=25)
        shares = [worker_share(w, "fib") for _, w in windows(results, rid)]
        print(f"2. cpu n=25: share of the worker's samples inside fib: {shares}")

        rid = run(results, "--server", "granian-wsgi", "--workload", "hello")
        b = breakdown([w for _, w in windows(results, rid)])
        print("3. granian-wsgi hello: " + ", ".join(f"{k} {v:.1%}" for k, v in b.shares.items()))

    met = 0
    for round_ in range(args.compare_rounds):
        met += compare_once(results, reps, round_)
    if args.compare_rounds > 1:
        print(f"   fib within 10% of {FIB_RATIO:.3f}x and the tree's CPU within 10% of the inverse "
              f"throughput ratio: {met} of {args.compare_rounds} rounds")  # fmt: skip
    print(f"results: {results}")


if __name__ == "__main__":
    main()
