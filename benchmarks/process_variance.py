"""How much two server processes of the same app differ: the between-process part of an A/B's
noise (docs/ab.md, "Server processes").

    python benchmarks/process_variance.py                       # 6 processes, 120 s of load
    python benchmarks/process_variance.py --hashseed 0          # every process PYTHONHASHSEED=0
    python benchmarks/process_variance.py --no-aslr             # under setarch -R

N servers of the same project (httpbin 0.10.4 ``/get`` on gunicorn-gthread, the running
CPython; the app of benchmarks/ab_detect.py) are started on the server core and loaded in one
interleaved engine run, exactly as ``pywebbench ab`` loads its two sides: short slices, each
round visiting every server in random order, at one core speed. Each slice's log requests/s
minus its round's mean is that server's deviation; a one-way ANOVA over the servers
(scipy.stats.f_oneway) says whether they differ by more than the slices' own noise, and the
variance components give the between-process standard deviation: the spread an A/A of one
process per side carries that a within-run interval does not see.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from pywebbench import bringup
from pywebbench.ab.sides import parse_side, side_overrides, side_study
from pywebbench.load import LocalAgent
from pywebbench.load.sliced import SlicePlan, run_sliced
from pywebbench.meter.slice_speed import SliceSpeeds, at_one_speed
from pywebbench.run.host import split_cpus
from pywebbench.run.rotation import slots
from scipy import stats

REQUIREMENTS = "httpbin==0.10.4\n"
PATH = "/get"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--processes", type=int, default=6)
    ap.add_argument("-d", "--duration", type=float, default=120.0, help="seconds of load")
    ap.add_argument("-c", "--connections", type=int, default=64)
    ap.add_argument("--hashseed", help="PYTHONHASHSEED for every server (default: random)")
    ap.add_argument("--no-aslr", action="store_true", help="start the servers under setarch -R")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if a.processes < 2:
        ap.error("--processes: at least 2")
    root = Path(tempfile.mkdtemp(prefix="procvar-"))
    (root / "requirements.txt").write_text(REQUIREMENTS)
    where = root / "app"
    where.mkdir()
    (where / "abapp.py").write_text("from httpbin import app  # noqa: F401\n")
    shared = {
        "matrix": {"servers": ["gunicorn-gthread"], "interpreters": ["cpython3.11"]},
        "load": {"connections": [a.connections], "model": "closed"},
        "app": {
            "app": "abapp:app",
            "paths": [PATH],
            "interface": "wsgi",
            "requirements": str(root / "requirements.txt"),
        },
    }
    side = parse_side("--base", str(where))
    study = side_study(side, side_overrides(shared, side, where))
    variant = study.cell.variant
    server_cpus, generator_cpus = split_cpus([], [])
    env = bringup.provision(variant.stack)
    app_env = {"PYTHONHASHSEED": a.hashseed} if a.hashseed is not None else {}
    wrapper = ["setarch", "-R"] if a.no_aslr else []
    ready = bringup.ready_path(variant.stack, [study.cell.workload])
    with ExitStack() as cleanup:
        urls = []
        for i in range(a.processes):
            launch = dataclasses.replace(
                bringup.launch_options(
                    variant, log_dir=root / f"logs{i}", cpus=server_cpus, wrapper=wrapper
                ),
                app_env=app_env,
            )
            server = bringup.start(variant.stack, env, launch, ready)
            cleanup.callback(bringup.stop, server)
            urls.append(server.base_url)
        load = study.cell.load_spec(
            urls[0], study.config.load, generator_cpus, duration_s=1.0, warmup_s=3.0
        )
        probe = LocalAgent().run(load.replace(duration_s=1.0, warmup_s=0.0))
        # sized as an interleaved group sizes them (docs/steady-state.md)
        slice_s, settle_s, rounds = slots(
            a.processes, a.duration, a.connections, probe.rps, least_rounds=2
        )
        plan = SlicePlan(
            load=load,
            targets=urls,
            slice_s=slice_s,
            settle_s=settle_s,
            rounds=rounds,
            seed=a.seed,
        )
        speeds = SliceSpeeds.start(server_cpus)
        cleanup.callback(speeds.stop)
        print(
            f"{a.processes} servers, {rounds} rounds of {slice_s:g} s slices; hashseed "
            f"{a.hashseed or 'random'}, ASLR {'off' if a.no_aslr else 'on'}",
            flush=True,
        )
        started = time.monotonic()
        result = run_sliced(plan, lambda _: False, interval_s=0.5)
        elapsed = time.monotonic() - started
    scaled = at_one_speed(result.slices, speeds).slices
    by_round: dict[int, dict[int, float]] = {}
    for s in scaled:
        if s.requests > 0:
            by_round.setdefault(s.round, {})[s.target] = math.log(s.rps)
    deviations: dict[int, list[float]] = {i: [] for i in range(a.processes)}
    for got in by_round.values():
        if len(got) != a.processes:
            continue
        mean = sum(got.values()) / len(got)
        for t, x in got.items():
            deviations[t].append(x - mean)
    groups = [deviations[i] for i in range(a.processes)]
    n = min(len(g) for g in groups)
    f, p = stats.f_oneway(*groups)
    # one-way random effects: sigma_b^2 = (MSB - MSW) / n
    means = [statistics.fmean(g) for g in groups]
    msb = n * statistics.variance(means)
    msw = statistics.fmean(statistics.variance(g) for g in groups)
    sigma_b = math.sqrt(max(0.0, (msb - msw) / n))
    print(f"{elapsed:.0f} s of load, {n} complete rounds")
    for i, m in enumerate(means):
        print(f"  process {i}: {math.exp(m):.4f}x the round mean")
    print(
        f"between processes: F = {f:.2f}, p = {p:.3g}; sd of a process's level "
        f"{sigma_b:.2%}; sd of a slice within a process {math.sqrt(msw):.2%}; "
        f"spread of the process means {math.exp(max(means) - min(means)) - 1:.2%}"
    )
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "processes": a.processes,
                    "hashseed": a.hashseed,
                    "aslr": not a.no_aslr,
                    "rounds": n,
                    "slice_s": slice_s,
                    "means": [math.exp(m) for m in means],
                    "F": f,
                    "p": p,
                    "sigma_between": sigma_b,
                    "sigma_within": math.sqrt(msw),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
