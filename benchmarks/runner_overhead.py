"""Runner overhead: wall time of a cached study against the sum of its load windows.

    python benchmarks/runner_overhead.py                  # the quick profile
    python benchmarks/runner_overhead.py -- --server granian-wsgi --workload hello

Runs ``pywebbench run`` once to fill the provisioning cache (skipped with --cached), then
again timing the whole command, and reads the second run's iterations from the store: the
load windows are the engine's measured durations (warm-up and measured iterations). Prints
both and their ratio; the target is at most 1.2x. Everything else (server starts and stops,
verification, metering, store writes, the report) is the runner's overhead.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pywebbench.store import DEFAULT_FILENAME, Store

TARGET = 1.2


def run(results_dir: Path, extra: list[str]) -> float:
    """Run one study; returns its wall time in seconds."""
    exe = shutil.which("pywebbench") or str(Path(sys.executable).parent / "pywebbench")
    argv = [exe, "run", "--results-dir", str(results_dir), *extra]
    print("$", " ".join(argv), flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(argv)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"pywebbench run exited with {proc.returncode}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cached", action="store_true", help="skip the cache-filling first run")
    ap.add_argument("--keep", action="store_true", help="keep the results directory")
    ap.add_argument("extra", nargs="*", help="arguments for pywebbench run (after --)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pwb-overhead-"))
    try:
        if not args.cached:
            print("== first run: fills the provisioning cache (not timed)")
            run(tmp / "warm", [*args.extra, "--no-report"])
        print("== timed run")
        wall = run(tmp / "timed", args.extra)
        with Store(tmp / "timed" / DEFAULT_FILENAME, create=False) as store:
            study = store.load_study()
        windows = sum(i.duration_s for i in study.iterations)
        cells = len(study.cells)
        ratio = wall / windows if windows else float("inf")
        print()
        print(f"cells:                 {cells}")
        print(f"iterations:            {len(study.iterations)}")
        print(f"sum of load windows:   {windows:8.1f} s")
        print(f"wall time of the run:  {wall:8.1f} s")
        print(f"overhead ratio:        {ratio:8.2f}x   (target <= {TARGET}x)")
        print(f"per cell overhead:     {(wall - windows) / max(cells, 1):8.2f} s")
        sys.exit(0 if ratio <= TARGET else 1)
    finally:
        if args.keep:
            print(f"results kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
