"""The interference guard's acceptance (docs/interference.md, issue 22): a single-stack study
run quiet, beside a steady neighbour, and beside a bursty one, on the server's core.

    python benchmarks/interference.py                       # the issue's study, ~10 min
    python benchmarks/interference.py --workload hello --replicates 3 --results-dir /tmp/i

1. quiet: the study alone (on a shared machine "alone" is relative: the script says what the
   guard saw).
2. steady: a neighbour spinning 30 ms of every 100 ms on the server's core. Expected: every
   measured iteration interfered, `compare QUIET STEADY` says "interfered" for every cell and
   `--fail-if 'slower>5%'` exits 1.
3. bursty: a neighbour spinning 2 s of every 10 s. Expected: the interfered iterations are
   measured again (the cell notes say "re-measured"), and for each cell the 95% CI of the
   ratio BURSTY/QUIET (compare's own interval, over replicates) lies inside [0.95, 1.05].

Each neighbour is bounded in time (it stops by itself) and stopped when its study ends.
The script prints each figure and, last, one line per expectation: met or not.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import Store

NEIGHBOUR = Path(__file__).with_name("neighbour.py")
PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")
NEIGHBOUR_MAX_S = 1800  # a neighbour stops by itself after this long


@contextmanager
def neighbour(core: int, on: str, off: str) -> Iterator[None]:
    """A neighbour with a duty cycle on ``core`` for the duration (bounded in time)."""
    proc = subprocess.Popen(
        [sys.executable, str(NEIGHBOUR), "--cpu", str(core), "--on", on, "--off", off,
         "--for", f"{NEIGHBOUR_MAX_S}s"],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=default_interpreters()[0].name)
    parser.add_argument("--server", default="gunicorn-gthread")
    parser.add_argument("--framework", default="raw-wsgi")
    parser.add_argument("--workload", default="cpu,hello")
    parser.add_argument("--replicates", default="3")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--results-dir", type=Path)
    args = parser.parse_args()
    results = args.results_dir or Path(tempfile.mkdtemp(prefix="pwb-interference-"))
    options = [
        "--python", args.python, "--server", args.server, "--framework", args.framework,
        "--workload", args.workload, "--replicates", args.replicates,
        "--max-replicates", args.replicates, "--server-cpus", str(args.server_cpu),
    ]  # fmt: skip
    print(f"results in {results}; study: pywebbench run {' '.join(options)}")
    print(f"load average before: {os.getloadavg()}")
    print("== quiet")
    quiet = study(results, options)
    print("== steady neighbour: 30ms on / 70ms off on core", args.server_cpu)
    with neighbour(args.server_cpu, "30ms", "70ms"):
        steady = study(results, options)
    print("== bursty neighbour: 2s on / 8s off on core", args.server_cpu)
    with neighbour(args.server_cpu, "2s", "8s"):
        bursty = study(results, options)
    print(f"load average after: {os.getloadavg()}")
    for name, run_id in (("quiet", quiet), ("steady", steady), ("bursty", bursty)):
        for row in guard_figures(results, run_id):
            print(f"{name} {run_id} {json.dumps(row)}")
    steady_rc, steady_doc = compare(results, quiet, steady, "--fail-if", "slower>5%")
    _, bursty_doc = compare(results, quiet, bursty, "--level", "0.95")
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
            c["remeasured"] for c in guard_figures(results, bursty)
        ),
    }
    for c in bursty_doc["cells"]:
        rps = c["rps"]
        lo, hi = rps.get("ci_low"), rps.get("ci_high")
        print(
            f"bursty/quiet {c['cell']}: {rps['ratio']:.3f} (95% CI {lo} .. {hi}), "
            f"verdict {c['verdict']}"
        )
        checks[f"bursty: 95% CI of {c['cell']} inside [0.95, 1.05]"] = (
            lo is not None and hi is not None and lo >= 0.95 and hi <= 1.05
        )
    for c in steady_doc["cells"]:
        print(f"steady/quiet {c['cell']}: {c['rps']['ratio']:.3f}, verdict {c['verdict']}")
    for what, met in checks.items():
        print(f"{'met' if met else 'NOT MET'}: {what}")


if __name__ == "__main__":
    main()
