"""Twins and a 5% change in one interleaved study: are the intervals honest, and do they
see 5%?

    python benchmarks/twins.py --trials 20                  # 20 studies, one after another
    python benchmarks/twins.py --trials 20 --neighbour      # beside the steady neighbour

One small WSGI app (a JSON document built per request) is written into three project
directories: ``twin-a`` and ``twin-b`` (the same file) and ``burn`` (the same app behind a
WSGI middleware that spins a pure-Python loop before each request). Each trial is one
``pywebbench run --app app:application --project twin-a --project twin-b --project burn``
on one server (gunicorn-gthread by default) and one interpreter (the running CPython by
default; ``--python pypy3.9``), with the interleaved
design: the three stacks' processes up together, loaded in slices of the same rounds, server
on core 0 and load on core 1; each trial its own rotation (``--seed``).

**Calibration.** Before the trials, one study of ``twin-a`` alone measures the app's server
CPU per request (the slices' requests per CPU-second); the loop's cost per iteration is
timed in a CPython pinned to core 0; the middleware spins ``--extra`` (5%) of the app's CPU
per request. What the trials then measured is printed beside it: the burn stack's CPU per
request over the twins', from the same slices.

**Counts.** A trial's twins are *tied* when the 95% interval of their ratio holds 1 (a
correct interval misses 1 time in 20, so about 19 of 20 trials should tie); the burn stack
is *ranked below* a twin when the interval of twin/burn lies wholly above 1. Printed per
trial and in total, with the median interval half-width of each pair.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from pywebbench.store import DEFAULT_FILENAME, Store

PWB = Path(__file__).resolve().parents[1] / "pwb"
NEIGHBOUR = Path(__file__).with_name("neighbour.py")
TRIAL_TIMEOUT_S = 900

APP = '''"""A small WSGI app: a JSON document built per request."""
import json

ITEMS = [{"id": i, "name": "item-%d" % i, "price": i * 1.25} for i in range(20)]


def application(environ, start_response):
    body = json.dumps({"path": environ.get("PATH_INFO", "/"), "items": ITEMS}).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]
'''

BURN = """
SPINS = {spins}


def _spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


_inner = application


def application(environ, start_response):  # noqa: F811 - the middleware wraps the app
    _spin(SPINS)
    return _inner(environ, start_response)
"""


def spin_cost_s(cpu: int = 0, iterations: int = 20_000) -> float:
    """Seconds one iteration of the middleware's loop takes in this CPython on ``cpu``
    (the best of 7 timings, as timeit advises)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        ns: dict[str, Any] = {}
        exec(BURN.format(spins=0).split("_inner")[0], ns)  # defines _spin
        best = min(timeit.repeat(lambda: ns["_spin"](iterations), number=5, repeat=7))
    finally:
        os.sched_setaffinity(0, before)
    return best / 5 / iterations


def write_projects(root: Path, spins: int) -> dict[str, Path]:
    """The three project directories."""
    out = {}
    for name in ("twin-a", "twin-b", "burn"):
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        text = APP + (BURN.format(spins=spins) if name == "burn" else "")
        (d / "app.py").write_text(text)
        out[name] = d
    return out


def study(
    results: Path,
    projects: list[Path],
    server: str,
    python: str,
    seed: int,
    budget: float,
    extra: list[str],
) -> subprocess.CompletedProcess[str]:
    """One interleaved study of ``projects`` on ``server``."""
    cmd = [str(PWB), "run", "--app", "app:application", "--interface", "wsgi",
           "--server", server, "--python", python, "--design", "interleaved",
           "--group-budget", str(budget),
           "--seed", str(seed), "--results-dir", str(results), "--no-report", *extra]  # fmt: skip
    for p in projects:
        cmd += ["--project", str(p)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TRIAL_TIMEOUT_S)
    (results / "out.txt").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"pywebbench run failed ({done.returncode}); see {results / 'out.txt'}")
    return done


def figures(store_path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Each stack's group figures (by its project's name) and its median server CPU per
    request (microseconds) over its measured slices."""
    groups: dict[str, dict[str, Any]] = {}
    cpu: dict[str, float] = {}
    with Store(store_path, create=False) as store:
        s = store.load_study()
        names = {x.id: x.key for x in s.stacks}
        for cell in s.cells:
            key = names[
                cell.stack_id
            ]  # cpython3.11/gunicorn-gthread/app-app.application@twin-a@w1t4
            project = key.split("/")[2].split("@")[1]
            g = cell.flags.get("group")
            if cell.status == "ok" and isinstance(g, dict):
                groups[project] = g | {"key": key}
            per = [
                1e6 / it.requests_per_cpu_s
                for it in s.iterations_of(cell.id)
                if it.requests_per_cpu_s
            ]
            if per:
                cpu[project] = statistics.median(per)
    return groups, cpu


def pair(groups: dict[str, dict[str, Any]], a: str, b: str) -> tuple[float, float, float]:
    """a/b with its interval (from a's figures)."""
    ratio, low, high = groups[a]["vs"][groups[b]["key"]]
    return ratio, low, high


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--server", default="gunicorn-gthread")
    ap.add_argument("--python", default=f"cpython{sys.version_info[0]}.{sys.version_info[1]}")
    ap.add_argument("--extra", type=float, default=0.05, help="the burn's share of CPU (0.05)")
    ap.add_argument("--budget", type=float, default=120.0, help="--group-budget of a trial")
    ap.add_argument("--neighbour", action="store_true", help="30 ms of every 100 ms on core 0")
    ap.add_argument("--keep", type=Path, help="keep the results here (default: a temp dir)")
    ap.add_argument("run_args", nargs="*", help="more `pywebbench run` flags, after --")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="pwb-twins-"))
    root.mkdir(parents=True, exist_ok=True)
    spinner = None
    if args.neighbour:
        spinner = subprocess.Popen(
            [sys.executable, str(NEIGHBOUR), "--cpu", "0", "--on", "30ms", "--off", "70ms",
             "--for", "3600s"],
            start_new_session=True,
        )  # fmt: skip
    try:
        run(args, root)
    finally:
        if spinner is not None:
            os.killpg(spinner.pid, signal.SIGTERM)
            spinner.wait(timeout=30)


def run(args: argparse.Namespace, root: Path) -> None:
    # calibration: the app's CPU per request, alone
    calib = root / "calibration"
    calib.mkdir(exist_ok=True)
    base = write_projects(root / "projects-calibration", 0)
    study(calib, [base["twin-a"], base["twin-b"]], args.server, args.python, 0, 60.0, args.run_args)
    _, cpu = figures(calib / DEFAULT_FILENAME)
    app_us = statistics.mean(cpu.values())
    per_spin = spin_cost_s()
    spins = max(1, round(args.extra * app_us * 1e-6 / per_spin))
    print(
        f"calibration: the app costs {app_us:.1f} us of server CPU per request on "
        f"{args.server}; the loop {per_spin * 1e9:.1f} ns per iteration; the burn spins "
        f"{spins} iterations (+{args.extra:.0%})",
        flush=True,
    )
    projects = write_projects(root / "projects", spins)
    order = [projects["twin-a"], projects["twin-b"], projects["burn"]]
    rows = []
    for i in range(args.trials):
        results = root / f"trial-{i + 1:02d}"
        results.mkdir(exist_ok=True)
        t0 = time.monotonic()
        study(results, order, args.server, args.python, 1000 + i, args.budget, args.run_args)
        groups, cpu = figures(results / DEFAULT_FILENAME)
        twins = pair(groups, "twin-a", "twin-b")
        burn_a = pair(groups, "twin-a", "burn")
        burn_b = pair(groups, "twin-b", "burn")
        extra = cpu["burn"] / statistics.mean([cpu["twin-a"], cpu["twin-b"]]) - 1.0
        row = {
            "trial": i + 1,
            "wall_s": round(time.monotonic() - t0),
            "twins": twins,
            "twin_a_over_burn": burn_a,
            "twin_b_over_burn": burn_b,
            "burn_extra_cpu": extra,
            "rounds": groups["twin-a"]["rounds"],
        }
        rows.append(row)
        tie = twins[1] <= 1.0 <= twins[2]
        print(
            f"trial {i + 1:2d} ({row['wall_s']} s, {row['rounds']} rounds): twins "
            f"{twins[0]:.3f} [{twins[1]:.3f}-{twins[2]:.3f}] {'tied' if tie else 'APART'}; "
            f"twin-a/burn {burn_a[0]:.3f} [{burn_a[1]:.3f}-{burn_a[2]:.3f}] "
            f"{'below' if burn_a[1] > 1.0 else 'NOT below'}; burn's extra CPU "
            f"{extra:+.1%}",
            flush=True,
        )
    (root / "trials.json").write_text(json.dumps(rows, indent=1))
    n = len(rows)
    tied = sum(r["twins"][1] <= 1.0 <= r["twins"][2] for r in rows)
    below_a = sum(r["twin_a_over_burn"][1] > 1.0 for r in rows)
    below_b = sum(r["twin_b_over_burn"][1] > 1.0 for r in rows)

    def hw(t: tuple[float, float, float]) -> float:
        return max(t[2] / t[0] - 1.0, 1.0 - t[1] / t[0])

    print(f"twins tied in {tied} of {n} trials (a correct 95% interval: about {0.95 * n:.0f})")
    print(f"burn ranked below twin-a in {below_a} of {n}, below twin-b in {below_b} of {n}")
    print(
        f"median half-width: twins +-{statistics.median(hw(r['twins']) for r in rows):.1%}, "
        f"twin-a/burn +-{statistics.median(hw(r['twin_a_over_burn']) for r in rows):.1%}; "
        f"burn ratio median {statistics.median(r['twin_a_over_burn'][0] for r in rows):.3f}; "
        f"burn's measured extra CPU per request median "
        f"{statistics.median(r['burn_extra_cpu'] for r in rows):+.1%}"
    )
    print(f"results: {root}")


if __name__ == "__main__":
    main()
