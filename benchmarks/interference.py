"""The interference guard's acceptance (docs/interference.md, issue 22): a single-stack study
run quiet, beside a steady neighbour, and beside a bursty one, on the server's core.

    python benchmarks/interference.py                       # the issue's study, ~15 min
    python benchmarks/interference.py --workload hello --rounds 8 --results-dir /tmp/i

1. quiet: the study alone (on a shared machine "alone" is relative: the script says what the
   guard saw).
2. steady: a neighbour spinning 30 ms of every 100 ms on the server's core. Expected: every
   measured iteration interfered, `compare QUIET STEADY` says "interfered" for every cell and
   `--fail-if 'slower>5%'` exits 1.
3. bursty: a neighbour spinning 2 s of every 10 s. Expected: the interfered iterations are
   measured again (the cell notes say "re-measured"), and for each cell the 95% CI of the
   ratio BURSTY/QUIET lies inside [0.95, 1.05].

   The bursty criterion is measured in ``--rounds`` rounds (default 12), each a quiet and a
   bursty study of one replicate, in random order: the guard is what is judged, and the
   host's own drift over the minutes between two whole studies (3-5%, either way, on this
   VM; docs/interference.md) is not the guard's to remove. Each round's bursty/quiet ratio of
   the replicate figures (median of the measured iterations) is one pair; the interval is
   Student's t over the rounds on the log scale, as ``ab`` pairs its slices. compare's
   unpaired estimator over the same replicates (raw req/s, not put at one core speed) is
   printed beside it. No bursty cell may stay interfered after its re-measures.

Each neighbour is bounded in time (it stops by itself) and stopped when its study ends.
The script prints each figure and, last, one line per expectation: met or not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pywebbench.analysis.ratio import ratio_of_medians, seed_for
from pywebbench.analysis.stats import t_interval
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.compare.cells import cell_figures
from pywebbench.store import Store

NEIGHBOUR = Path(__file__).with_name("neighbour.py")
PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")
NEIGHBOUR_MAX_S = 1800  # a neighbour stops by itself after this long


@contextmanager
def neighbour(core: int, on: str, off: str, delay_s: float = 0.0) -> Iterator[None]:
    """A neighbour with a duty cycle on ``core`` for the duration (bounded in time), its
    first spin ``delay_s`` after it starts."""
    proc = subprocess.Popen(
        [sys.executable, str(NEIGHBOUR), "--cpu", str(core), "--on", on, "--off", off,
         "--for", f"{NEIGHBOUR_MAX_S}s", "--delay", f"{delay_s:.3f}s"],
        start_new_session=True,
    )  # fmt: skip
    try:
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def pwb(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``pywebbench ARGS``, output captured; bounded at an hour."""
    proc = subprocess.run(
        [PYWEBBENCH, *args], capture_output=True, text=True, timeout=3600, check=False
    )
    if check and proc.returncode != 0:
        sys.exit(f"pywebbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def study(results: Path, options: list[str]) -> str:
    """Run the study into ``results``; its run id."""
    proc = pwb("run", *options, "--no-report", "--results-dir", str(results))
    print(proc.stdout.split("ranked by requests/s")[-1][-1500:])
    with Store(results / "pywebbench.sqlite", create=False) as store:
        run = store.latest_run()
    assert run is not None
    print(f"run {run.id}", flush=True)
    return run.id


def guard_figures(results: Path, run_id: str) -> list[dict[str, Any]]:
    """Per cell: measured iterations, how many stayed interfered, re-measures, the shares."""
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study_rows = store.load_study([run_id])
    out = []
    for cell in study_rows.cells:
        assert cell.id is not None
        its = study_rows.iterations_of(cell.id)
        shares = [
            (i.others_cpu_s or 0.0) / i.duration_s for i in its if i.duration_s and i.others_cpu_s
        ]
        out.append(
            {
                "cell": f"{cell.workload} @ {cell.load_point}",
                "measured": len(its),
                "interfered": sum(i.interfered for i in its),
                "remeasured": sum(len(i.remeasured) for i in its),
                "discarded_shares": [round(a["share"], 3) for i in its for a in i.remeasured],
                "kept_shares": [round(s, 3) for s in shares],
                "flags": cell.flags,
            }
        )
    return out


def compare(results: Path, base: str, new: str, *extra: str) -> tuple[int, dict[str, Any]]:
    """``compare BASE NEW --format json EXTRA``: exit status and document."""
    proc = pwb(
        "compare", base, new, "--format", "json", "--results-dir", str(results), *extra,
        check=False,
    )  # fmt: skip
    if proc.returncode not in (0, 1):
        sys.exit(f"compare failed ({proc.returncode}): {proc.stderr}")
    return proc.returncode, json.loads(proc.stdout)


def replicate_figures(
    results: Path, run_ids: list[str]
) -> tuple[dict[str, list[list[float]]], set[str]]:
    """Per cell (``stack | workload @ load point``): each run's measured req/s, raw, in
    ``run_ids`` order (empty where a run lacks the cell); and the cells that stayed
    interfered in some run."""
    with Store(results / "pywebbench.sqlite", create=False) as store:
        figures = cell_figures(store.load_study(run_ids))
    out: dict[str, dict[str, list[float]]] = {}
    interfered = set()
    for fig in figures:
        out.setdefault(fig.label, {})[fig.run_id] = [v for rep in fig.rps for v in rep]
        if fig.interfered:
            interfered.add(fig.label)
    return {cell: [by_run.get(r, []) for r in run_ids] for cell, by_run in out.items()}, interfered


def bursty_rounds(
    results: Path, options: list[str], rounds: int, core: int
) -> tuple[list[str], list[str]]:
    """``rounds`` rounds of a quiet and a bursty one-replicate study, in random order each:
    the quiet and the bursty run ids, round by round. Each bursty neighbour first spins
    0-10 s after it starts, at random, so the bursts fall anywhere in the study."""
    one = [*options, "--replicates", "1", "--max-replicates", "1"]
    quiet: list[str] = []
    bursty: list[str] = []
    rng = random.Random()
    for r in range(rounds):
        for side in rng.sample(["quiet", "bursty"], 2):
            print(f"== round {r + 1}/{rounds}: {side}", flush=True)
            if side == "quiet":
                quiet.append(study(results, one))
            else:
                with neighbour(core, "2s", "8s", delay_s=rng.uniform(0.0, 10.0)):
                    bursty.append(study(results, one))
    return quiet, bursty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=default_interpreters()[0].name)
    parser.add_argument("--server", default="gunicorn-gthread")
    parser.add_argument("--framework", default="raw-wsgi")
    parser.add_argument("--workload", default="cpu,hello")
    parser.add_argument("--replicates", default="3", help="of the quiet and steady studies")
    parser.add_argument("--rounds", type=int, default=12, help="quiet/bursty rounds")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--results-dir", type=Path)
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds: at least 2 (an interval needs two pairs)")
    results = args.results_dir or Path(tempfile.mkdtemp(prefix="pwb-interference-"))
    options = [
        "--python", args.python, "--server", args.server, "--framework", args.framework,
        "--workload", args.workload, "--server-cpus", str(args.server_cpu),
    ]  # fmt: skip
    replicated = [*options, "--replicates", args.replicates, "--max-replicates", args.replicates]
    print(f"results in {results}; study: pywebbench run {' '.join(replicated)}")
    print(f"load average before: {os.getloadavg()}")
    print("== quiet")
    quiet = study(results, replicated)
    print("== steady neighbour: 30ms on / 70ms off on core", args.server_cpu)
    with neighbour(args.server_cpu, "30ms", "70ms"):
        steady = study(results, replicated)
    print(f"== {args.rounds} rounds, quiet and bursty (2s on / 8s off on core {args.server_cpu})")
    quiet_rounds, bursty_rounds_ = bursty_rounds(results, options, args.rounds, args.server_cpu)
    print(f"load average after: {os.getloadavg()}")
    named = [("quiet", quiet), ("steady", steady)]
    named += [(f"quiet round {i + 1}", r) for i, r in enumerate(quiet_rounds)]
    named += [(f"bursty round {i + 1}", r) for i, r in enumerate(bursty_rounds_)]
    for name, run_id in named:
        for row in guard_figures(results, run_id):
            print(f"{name} {run_id} {json.dumps(row)}")
    steady_rc, steady_doc = compare(results, quiet, steady, "--fail-if", "slower>5%")
    steady_cells = guard_figures(results, steady)
    checks = {
        "steady: every measured iteration interfered": all(
            c["interfered"] == c["measured"] for c in steady_cells
        ),
        "steady: compare says interfered for every cell": all(
            c["verdict"] == "interfered" for c in steady_doc["cells"]
        ),
        "steady: --fail-if 'slower>5%' exits 1": steady_rc == 1,
        "bursty: interfered iterations were re-measured": any(
            c["remeasured"] for r in bursty_rounds_ for c in guard_figures(results, r)
        ),
    }
    for c in steady_doc["cells"]:
        print(f"steady/quiet {c['cell']}: {c['rps']['ratio']:.3f}, verdict {c['verdict']}")
    for side, runs in (("quiet", quiet_rounds), ("bursty", bursty_rounds_)):
        rows = [c for r in runs for c in guard_figures(results, r)]
        kept = [x for c in rows for x in c["kept_shares"]]
        gone = [x for c in rows for x in c["discarded_shares"]]
        print(
            f"{side} rounds: {sum(c['measured'] for c in rows)} measured iterations, "
            f"{len(gone)} attempts discarded (shares {sorted(gone)}); kept shares: mean "
            f"{sum(kept) / max(1, sum(c['measured'] for c in rows)):.4f}, "
            f"max {max(kept, default=0.0):.3f}"
        )
    quiet_figs, _ = replicate_figures(results, quiet_rounds)
    bursty_figs, stayed = replicate_figures(results, bursty_rounds_)
    checks["bursty: no cell stayed interfered after its re-measures"] = not stayed
    for cell in sorted(set(quiet_figs) ^ set(bursty_figs)):
        checks[f"bursty: {cell} measured on both sides"] = False
    for cell, quiet_reps in quiet_figs.items():
        bursty_reps = bursty_figs.get(cell)
        if bursty_reps is None:
            continue
        ratios = [
            statistics.median(b) / statistics.median(q)
            for q, b in zip(quiet_reps, bursty_reps, strict=True)
            if q and b and statistics.median(q) > 0 and statistics.median(b) > 0
        ]
        inside = False
        if len(ratios) >= 2:
            low, high = t_interval(ratios, level=0.95)
            mean = math.exp(statistics.fmean(math.log(x) for x in ratios))
            inside = low >= 0.95 and high <= 1.05
            print(
                f"bursty/quiet {cell}, paired over {len(ratios)} rounds: {mean:.3f} "
                f"(95% CI {low:.3f} .. {high:.3f}); rounds {[round(x, 3) for x in ratios]}"
            )
        unpaired = ratio_of_medians(quiet_reps, bursty_reps, seed=seed_for(cell), level=0.95)
        if unpaired is not None:
            print(
                f"bursty/quiet {cell}, unpaired (compare's estimator, raw req/s): "
                f"{unpaired.ratio:.3f} "
                f"(95% CI {unpaired.low:.3f} .. {unpaired.high:.3f})"
            )
        checks[f"bursty: 95% CI of {cell} inside [0.95, 1.05]"] = inside
    for what, met in checks.items():
        print(f"{'met' if met else 'NOT MET'}: {what}")


if __name__ == "__main__":
    main()
