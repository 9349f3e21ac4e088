"""Acceptance of ``pywebbench ab`` (docs/ab.md): false alarms, detection, the gate, CI width.

    python benchmarks/ab_detect.py                       # the full acceptance: 20 trials each
    python benchmarks/ab_detect.py --trials 2 --kinds aa,slower3   # a reduced run
    python benchmarks/ab_detect.py --neighbour           # the same beside a steady neighbour

The app is a third-party Flask app from PyPI, httpbin (pinned in REQUIREMENTS), on
gunicorn-gthread with the running CPython, loaded on ``PATH``. Each trial is one
``pywebbench ab`` command (exactly what a CI job runs) with a ``--budget`` that keeps the trial,
bring-up included, under 3 minutes. Kinds of trial:

- ``aa``: the same app twice (two copies of the project); the verdict must be slower or
  faster in at most 1 of 20, and ``--fail-if 'slower>3%'`` exit 1 in at most 1 of 20;
- ``slower3``: CHANGE wraps the app in a WSGI middleware that burns CPU equal to 3% of the
  server's CPU time per request, calibrated at the start (and printed): verdict slower in at
  least 19 of 20;
- ``gate6``: the same with 6%: ``--fail-if 'slower>3%'`` exits 1 in at least 19 of 20;
- ``interpreters``: cpython3.11 against cpython3.12 (pyenv) on gunicorn-gthread/raw-wsgi
  with the cpu workload, ``--ci-width 0.02``: the 95% CI reaches +-2% within 3 minutes.

``--neighbour`` runs a process pinned to the server core that spins 30 ms of every 100 ms
for the whole benchmark (the interference issue's steady neighbour).

Calibration: BASE and a probe project burning about 30% more (the loop timed alone in the
interpreter, then sized) are both served on the server core and loaded in turn, 1 s each,
in random order, for 10 rounds; each server's process-tree CPU time over the requests it
completed is its CPU per request. The median of the rounds' probe/BASE ratios, less one,
over the probe's iterations is one iteration's cost inside the server as a share of BASE's
CPU per request, measured in the same seconds on both, so the host's core-speed changes
cancel (two separate 5-s loads read the loop at 35-113 ns an iteration; the loop timed
alone made the first reduced run's slowdowns 2-3x the aimed ones). The iteration count is
set so the loop costs the wanted share of BASE's per-request CPU.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pywebbench import bringup
from pywebbench.ab.sides import parse_side, side_overrides, side_study
from pywebbench.load import LoadSpec, run_load
from pywebbench.meter.sampler import trees_cpu_s
from pywebbench.run.host import split_cpus

PYWEBBENCH = shutil.which("pywebbench") or str(Path(sys.executable).parent / "pywebbench")
REQUIREMENTS = "httpbin==0.10.4\n"
PATH = "/get"
APP = "abapp:app"
BUDGET_S = 140.0  # of load; bring-up (~35 s on a loaded machine) fits in the rest of 3 minutes
TRIAL_LIMIT_S = 180.0
KINDS = ("aa", "slower3", "gate6", "interpreters")
CPYTHON312 = "/root/.pyenv/versions/3.12.1/bin/python3.12"

PLAIN = "from httpbin import app  # noqa: F401\n"
# The burn loop's every iteration costs the same: no int object is made (range() past 256
# allocates one per iteration, so a loop of 296 cost less per iteration than the 2,798 that
# calibrated it: the "+3%" middleware of earlier runs burned less than 3%).
BURN = """from itertools import repeat

from httpbin import app as inner

LOOPS = {loops}


def burn(n):
    acc = 0
    for _ in repeat(None, n):
        acc ^= 1
    return acc


def app(environ, start_response):
    burn(LOOPS)
    return inner(environ, start_response)
"""
LOOP_TIMER = """
import time
from itertools import repeat
def burn(n):
    acc = 0
    for _ in repeat(None, n):
        acc ^= 1
    return acc
best = min((lambda t: (burn(200000), time.process_time() - t)[1])(time.process_time())
           for _ in range(7))
print(best / 200000)
"""


def project(root: Path, name: str, source: str) -> Path:
    """A project directory holding ``abapp.py``."""
    where = root / name
    where.mkdir(parents=True, exist_ok=True)
    (where / "abapp.py").write_text(source)
    return where


def app_flags(requirements: Path) -> list[str]:
    return [
        "--app",
        APP,
        "--path",
        PATH,
        "--interface",
        "wsgi",
        "--requirements",
        str(requirements),
    ]


#: Interleaved 1-s loads of BASE and the probe that calibrate the middleware.
CALIBRATION_ROUNDS = 10
#: The probe burns about this share of BASE's CPU per request (as timed alone).
PROBE_SHARE = 0.3


def serve(
    cleanup: ExitStack, name: str, where: Path, requirements: Path, connections: int
) -> tuple[int, LoadSpec, Path]:
    """Start project ``where`` on the server core (stopped by ``cleanup``) and warm it with
    2 s of load; its server PID, a 1-s load of it, and its interpreter."""
    shared = {
        "matrix": {"servers": ["gunicorn-gthread"], "interpreters": ["cpython3.11"]},
        "load": {"connections": [connections], "model": "closed"},
        "app": {
            "app": APP,
            "paths": [PATH],
            "interface": "wsgi",
            "requirements": str(requirements),
        },
    }
    side = parse_side("--base", str(where))
    study = side_study(side, side_overrides(shared, side, where))
    variant = study.cell.variant
    server_cpus, generator_cpus = split_cpus([], [])
    env = bringup.provision(variant.stack)
    options = bringup.launch_options(
        variant,
        log_dir=Path(tempfile.mkdtemp(prefix=f"calib-{name}-", dir=where.parent)),  # the run's root
        cpus=server_cpus,
    )
    ready = bringup.ready_path(variant.stack, [study.cell.workload])
    server = cleanup.enter_context(bringup.running(variant.stack, env, options, ready))
    spec = study.cell.load_spec(server.base_url, study.config.load, generator_cpus, duration_s=2)
    run_load(spec)
    return server.pid, spec.replace(duration_s=1.0), env.python


def cpu_per_request(pid: int, spec: LoadSpec) -> float:
    """Server CPU seconds per request over one load ``spec`` of server ``pid``."""
    before = trees_cpu_s([pid])
    done = run_load(spec)
    return (trees_cpu_s([pid]) - before) / max(1, done.requests)


def calibrate(root: Path, base: Path, requirements: Path, connections: int) -> tuple[float, float]:
    """(server CPU seconds per request of BASE, extra CPU per request of one burn-loop
    iteration, in BASE's seconds). BASE and a probe project burning about 30% more (sized
    from the loop timed alone) are both served on the server core and loaded in turn, 1 s
    each, in random order, for :data:`CALIBRATION_ROUNDS` rounds; each round's ratio of the
    two servers' CPU per request cancels the host's core-speed changes, which made two
    separate 5-s loads read the loop at 35-113 ns an iteration. The loop's cost is (median
    ratio - 1) x BASE's CPU per request over the probe's iterations."""
    rng = random.Random(0)
    with ExitStack() as cleanup:
        base_pid, base_load, python = serve(cleanup, "base", base, requirements, connections)
        alone = float(
            subprocess.run(
                [str(python), "-c", LOOP_TIMER],
                capture_output=True, text=True, check=True, timeout=120,
            ).stdout.strip()
        )  # fmt: skip
        loops = max(1, round(PROBE_SHARE * cpu_per_request(base_pid, base_load) / alone))
        probe = project(root, "probe", BURN.format(loops=loops))
        servers = [
            (base_pid, base_load),
            serve(cleanup, "probe", probe, requirements, connections)[:2],
        ]
        per_request: list[list[float]] = [[], []]
        for _ in range(CALIBRATION_ROUNDS):
            order = [0, 1]
            rng.shuffle(order)
            for i in order:
                per_request[i].append(cpu_per_request(*servers[i]))
    ratios = sorted(p / b for b, p in zip(*per_request, strict=True))
    ratio = statistics.median(ratios)
    base_cpu = statistics.median(per_request[0])
    per_loop = (ratio - 1.0) * base_cpu / loops
    print(
        f"calibration: BASE {base_cpu * 1e6:.0f} us/request; a probe of {loops} loop "
        f"iterations costs {ratio:.3f}x BASE's CPU per request (median of "
        f"{CALIBRATION_ROUNDS} interleaved rounds, {ratios[0]:.3f}-{ratios[-1]:.3f}): "
        f"{per_loop * 1e9:.1f} ns an iteration in the server, {alone * 1e9:.1f} ns alone",
        flush=True,
    )
    return base_cpu, per_loop


def neighbour(core: int, busy: float = 0.03, period: float = 0.1) -> None:
    """Spin ``busy`` seconds of every ``period`` on ``core``, until killed."""
    os.sched_setaffinity(0, {core})
    while True:
        start = time.monotonic()
        while time.monotonic() - start < busy:
            pass
        time.sleep(max(0.0, period - (time.monotonic() - start)))


def trial(args: list[str], results: Path) -> dict[str, Any]:
    """One ``pywebbench ab`` command: its exit status, verdict, CI and wall time."""
    started = time.monotonic()
    done = subprocess.run(
        [PYWEBBENCH, "ab", *args, "--format", "json", "--results-dir", str(results)],
        capture_output=True,
        text=True,
        timeout=TRIAL_LIMIT_S + 120,
    )
    wall = time.monotonic() - started
    try:
        doc = json.loads(done.stdout) if done.returncode in (0, 1) else None
    except json.JSONDecodeError:
        doc = None
    if doc is None:
        return {"exit": done.returncode, "error": done.stderr.strip()[-300:], "wall_s": wall}
    rps = doc["rps"] or {}
    cpu = doc.get("cpu") or {}
    speed = doc.get("core_speed") or {}
    measured = speed.get("rps_measured") or {}
    counted = doc.get("instructions") or {}
    return {
        "exit": done.returncode,
        "verdict": doc["verdict"],
        "ratio": rps.get("ratio"),
        "ci": [rps.get("ci_low"), rps.get("ci_high")],
        "half_width": doc["ci_half_width"],
        "cpu_ratio": cpu.get("ratio"),
        "cpu_ci": [cpu.get("ci_low"), cpu.get("ci_high")],
        "stopped": doc["stopped"],
        "rounds": doc["rounds"],
        "kept": doc["rounds_kept"],
        "other_share": doc["other_share"],
        "elasticity": speed.get("elasticity"),
        "core_span": speed.get("span"),
        "measured_ratio": measured.get("ratio"),
        "measured_ci": [measured.get("ci_low"), measured.get("ci_high")],
        "instructions_ratio": counted.get("ratio"),
        "instructions_ci": [counted.get("ci_low"), counted.get("ci_high")],
        "instructions_counts": {
            side: [c.get("per_request") for c in counted.get(side) or []]
            for side in ("base", "change")
        },
        "counting_s": sum(
            float(c.get("study_s") or 0.0)
            for side in ("base", "change")
            for c in counted.get(side) or []
        ),
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="trial i runs ab with --seed FIRST_SEED+i (its slices' order): give a run that "
        "adds trials to an earlier one seeds of its own",
    )
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma list of " + ", ".join(KINDS))
    ap.add_argument("--neighbour", action="store_true")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--ci-width", type=float, default=0.01)
    ap.add_argument(
        "--budget",
        type=float,
        help=f"of load (default {BUDGET_S:g} s; with --figure instructions ab's own "
        "default, two rounds' worth: its counts come after the timed run)",
    )
    ap.add_argument("--interference-limit", type=float, default=0.05)
    ap.add_argument(
        "--figure", choices=["rps", "cpu", "instructions"], default="rps", help="what ab judges"
    )
    ap.add_argument("--json", type=Path, help="also write every trial here")
    a = ap.parse_args()
    if a.budget is None and a.figure != "instructions":
        a.budget = BUDGET_S
    kinds = [k for k in a.kinds.split(",") if k]
    for k in kinds:
        if k not in KINDS:
            ap.error(f"--kinds: unknown kind {k!r}")
    root = Path(tempfile.mkdtemp(prefix="ab-detect-"))
    requirements = root / "requirements.txt"
    requirements.write_text(REQUIREMENTS)
    base = project(root, "base", PLAIN)
    copy = project(root, "copy", PLAIN)
    spinner = None
    if a.neighbour:
        server_core = split_cpus([], [])[0][0]
        spinner = multiprocessing.Process(target=neighbour, args=(server_core,), daemon=True)
        spinner.start()
    try:
        changes: dict[str, Path] = {}
        if {"slower3", "gate6"} & set(kinds):
            per_request, per_loop = calibrate(root, base, requirements, a.connections)
            for kind, share in (("slower3", 0.03), ("gate6", 0.06)):
                loops = round(share * per_request / per_loop)
                changes[kind] = project(root, kind, BURN.format(loops=loops))
                print(
                    f"calibration: server CPU {per_request * 1e6:.0f} us/request; a loop "
                    f"iteration {per_loop * 1e9:.1f} ns; {kind}: {loops} iterations = "
                    f"{loops * per_loop * 1e6:.1f} us = {share:.0%} per request",
                    flush=True,
                )
        common = [
            "-c", str(a.connections), "--ci-width", str(a.ci_width),
            "--interference-limit", str(a.interference_limit), "--figure", a.figure,
            *(["--budget", str(a.budget)] if a.budget is not None else []),
        ]  # fmt: skip
        plans: dict[str, list[str]] = {
            "aa": [*app_flags(requirements), "--base", str(base), "--change", str(copy),
                   "--fail-if", "slower>3%"],
            "slower3": [*app_flags(requirements), "--base", str(base), "--change",
                        str(changes.get("slower3", base))],
            "gate6": [*app_flags(requirements), "--base", str(base), "--change",
                      str(changes.get("gate6", base)), "--fail-if", "slower>3%"],
            "interpreters": ["--framework", "raw-wsgi", "--workload", "cpu",
                             "--base", "python=cpython3.11", "--change", f"python={CPYTHON312}",
                             "--ci-width", "0.02"],
        }  # fmt: skip
        every: dict[str, list[dict[str, Any]]] = {}
        for kind in kinds:
            got = every.setdefault(kind, [])
            for i in range(a.trials):
                seed = a.first_seed + i
                r = trial([*common, *plans[kind], "--seed", str(seed)], root / "results")
                r["seed"] = seed
                got.append(r)
                print(f"{kind} trial {i + 1}/{a.trials}: {json.dumps(r)}", flush=True)
        print()
        print(f"loadavg at the end: {os.getloadavg()}; neighbour: {a.neighbour}")
        for kind, got in every.items():
            n = len(got)
            ok = [r for r in got if "verdict" in r]
            sig = sum(r["verdict"] in ("slower", "faster") for r in ok)
            slower = sum(r["verdict"] == "slower" for r in ok)
            gate = sum(r["exit"] == 1 for r in got)
            widths = [r["half_width"] for r in ok if r["half_width"] is not None]
            walls = [r["wall_s"] for r in got]
            cpu_widths = [
                max(r["cpu_ci"][1] / r["cpu_ratio"] - 1, 1 - r["cpu_ci"][0] / r["cpu_ratio"])
                for r in ok
                if r.get("cpu_ratio") and None not in r["cpu_ci"]
            ]
            cpu = (
                f"; per CPU-s CI +-{statistics.median(cpu_widths):.2%} median" if cpu_widths else ""
            )
            print(
                f"{kind}: {n} trials; verdict slower/faster {sig}, slower {slower}; gate exit 1 "
                f"{gate}; CI +-{statistics.median(widths):.2%} median, "
                f"+-{max(widths):.2%} widest{cpu}; wall {statistics.median(walls):.0f} s median, "
                f"{max(walls):.0f} s longest; stopped by CI "
                f"{sum(r.get('stopped') == 'ci' for r in ok)}"
                if widths
                else f"{kind}: {n} trials, no estimate: {got}"
            )
        if a.json:
            a.json.write_text(json.dumps(every, indent=1))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.join()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
