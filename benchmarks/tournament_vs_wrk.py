"""The tournament against continuous loads on the same processes: does a slice read what wrk
reads? (docs/steady-state.md#the-interleaved-study, issue 63)

    python benchmarks/tournament_vs_wrk.py                 # the quick CPython hello group
    python benchmarks/tournament_vs_wrk.py --runs 3 --json out.json
    python benchmarks/tournament_vs_wrk.py --neighbour          # beside the steady neighbour
    python benchmarks/tournament_vs_wrk.py --workload cpu --servers granian-wsgi,gunicorn-gthread
    python benchmarks/tournament_vs_wrk.py --top          # and a stack over 100k req/s

Each run is one interleaved group measured by ``pywebbench run``'s own code (the quick
profile, or the stacks asked for; servers on core 0, the engine and the orchestrator on core 1),
with one change: when the group ends, before its processes are stopped, every process is
loaded continuously by wrk (``-t1`` with the cell's connections, pinned to core 1) for
``--wrk-s`` seconds, in a random order, ``--wrk-rounds`` rounds, all processes still up
(``--bracket``: also before the group, once every process is up, so that wrk's readings
bracket the group's minutes and the host's drift over them cancels to first order). Per
stack it prints the group's level (req/s at the group's average round), the plain mean of its
measured slices, wrk's mean over its processes, and the ratio of the group's level to wrk's.
Then each stack's ratio to the group's reference (the geometric mean of the stacks), from the
group (with its interval) and from wrk, and whether wrk's lies within the group's interval.
Per run it also prints the CPU the run's process took on the generator's core during the
group, by thread: the engine's threads against the orchestrator's. ``--top`` adds bjoern
(a C server, libev) to the servers: bjoern/raw-wsgi is a stack at the top of the range, over
150k req/s on one core. ``--no-engine`` leaves out
the continuous ``pywebbench load`` readings (half the time after each group).

Acceptance (issue 63): each stack within +-3% of wrk (median of 3 runs), and 90% of wrk's
ratios inside the group's intervals.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pywebbench.analysis.group import Observation, fit_group
from pywebbench.bringup import BringUp, Check
from pywebbench.commands.run import _interpreters
from pywebbench.meter.core_speed import CoreSpeedProbe
from pywebbench.run.executor import LocalExecutor
from pywebbench.run.runner import run_study
from pywebbench.run.seams import Seams
from pywebbench.store import DEFAULT_FILENAME, Store
from pywebbench.study.config import resolve
from pywebbench.study.matrix import expand
from pywebbench.study.profiles import PROFILE_DATA

NEIGHBOUR = Path(__file__).with_name("neighbour.py")
#: A stack at the top of the range (``--top``): a server (its stacks with the quick
#: profile's frameworks: bjoern/raw-wsgi at 150k+ req/s on one core, bjoern/flask).
#: socketify-native read 90k+, but its idle processes take ~3% of a core each (its event
#: loop's timers), which every other stack's slices then lack.
TOP_SERVER = "bjoern"
GENERATOR_CPU = 1
SERVER_CPU = 0
_WRK_RPS = re.compile(r"Requests/sec:\s+([\d.]+)")


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads so far, summed by thread name."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def wrk(url: str, connections: int, seconds: float) -> float:
    """wrk's requests/s on ``url`` (one thread, pinned to the generator's core)."""
    done = subprocess.run(
        ["taskset", "-c", str(GENERATOR_CPU), "wrk", "-t1", f"-c{connections}",
         f"-d{seconds:g}s", url],
        capture_output=True, text=True, timeout=seconds + 30, check=True,
    )  # fmt: skip
    found = _WRK_RPS.search(done.stdout)
    if found is None:
        raise RuntimeError(f"wrk printed no rate: {done.stdout}")
    return float(found.group(1))


def engine(url: str, connections: int, seconds: float, io: str | None = None) -> float:
    """``pywebbench load``'s requests/s on ``url``, continuous (one thread, the generator's
    core): the engine without slices, to tell the slicing from the engine."""
    done = subprocess.run(
        [sys.executable, "-m", "pywebbench", "load", url, "-c", str(connections),
         "-d", f"{seconds:g}s", "--cpus", str(GENERATOR_CPU), "--json", "-",
         *(["--io", io] if io else [])],
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    )  # fmt: skip
    return float(json.loads(done.stdout)["rps"])


@dataclass
class WrkAtClose:
    """A bring-up that records every verified process and, when the group first stops one
    (its processes all still up), loads each of them with wrk (module doc)."""

    connections: int
    seconds: float
    rounds: int
    seed: int
    io: str | None = None
    engine: bool = True  # also the engine's continuous readings
    #: wrk's readings before the group too, once this many processes are up (``--bracket``)
    expected: int = 0
    bracket: bool = False
    #: pid -> the server core's median rate during each wrk reading (the core-speed probe's).
    rates: dict[int, list[float]] = field(default_factory=dict)
    base: BringUp = field(default_factory=BringUp)
    #: pid -> (stack key, URL) of the processes verified and not stopped yet.
    up: dict[int, tuple[str, str]] = field(default_factory=dict)
    #: pid -> wrk's readings after the group (and before it, with ``bracket``), and the
    #: engine's (continuous).
    readings: dict[int, list[float]] = field(default_factory=dict)
    before: dict[int, list[float]] = field(default_factory=dict)
    engine_readings: dict[int, list[float]] = field(default_factory=dict)
    cpu_before: dict[str, float] | None = None
    cpu_group: dict[str, float] = field(default_factory=dict)
    _stopping: threading.Lock = field(default_factory=threading.Lock)

    def seams(self) -> Seams:
        return Seams(bringup=replace(self.base, check=self.check, stop=self.stop))

    def check(self, server: Any, stack: Any, workload: Any, params: Any = None,
              *, timeout_s: float = 10.0) -> Check:  # fmt: skip
        found = self.base.check(server, stack, workload, params, timeout_s=timeout_s)
        if found.failure() is None:
            path = workload.request(**(params or {})).path
            self.up[server.pid] = (stack.name, server.base_url.rstrip("/") + path)
            if self.bracket and len(self.up) == self.expected and not self.before:
                # every process is up and the group has not begun: wrk's first pass, so
                # that wrk's readings bracket the group's minutes (the host drifts)
                self.before = self.wrk_pass("before the group")
        self.cpu_before = thread_cpu()
        return found

    def stop(self, server: Any) -> float:
        # the pool stops its processes all at once, each in a thread: the first one here
        # loads them all with wrk while the others wait, still up
        with self._stopping:
            if self.up and len(self.up) > 1 and not self.readings:
                after = thread_cpu()
                before = self.cpu_before or {}
                self.cpu_group = {k: v - before.get(k, 0.0) for k, v in after.items()}
                self.readings = self.wrk_pass("after the group")
            self.up.pop(server.pid, None)
        return self.base.stop(server)

    def wrk_pass(self, when: str) -> dict[int, list[float]]:
        """wrk (and the engine) on every process up, ``rounds`` rounds in a random order;
        each process's readings by pid (the core-speed probe's rates go to ``rates``)."""
        readings: dict[int, list[float]] = {}
        order = list(self.up)
        rng = random.Random(self.seed + len(self.rates))
        probe = CoreSpeedProbe([SERVER_CPU]).start()
        for r in range(self.rounds):
            rng.shuffle(order)
            for pid in order:
                url = self.up[pid][1]
                began = time.monotonic()
                rps = wrk(url, self.connections, self.seconds)
                ended = time.monotonic()
                readings.setdefault(pid, []).append(rps)
                during = [x for t, x in list(probe.readings) if began <= t <= ended and x > 0]
                if during:
                    self.rates.setdefault(pid, []).append(statistics.median(during))
                if self.engine:
                    rps = engine(url, self.connections, self.seconds, self.io)
                    self.engine_readings.setdefault(pid, []).append(rps)
            print(f"  wrk round {r + 1} of {self.rounds} {when} done", flush=True)
        probe.stop()
        return readings


def group_figures(
    store_path: Path,
) -> tuple[dict[str, dict[str, Any]], dict[int, list[float]], dict[int, str], float | None]:
    """The latest run's cells' group figures by stack key, each server process's measured
    slices (req/s) by its pid, and its stack key; and the group's core rate (the median of
    its slices' readings: the speed its req/s are put at)."""
    with Store(store_path, create=False) as store:
        study = store.load_study()
    names = {s.id: s.key for s in study.stacks}
    groups: dict[str, dict[str, Any]] = {}
    slices: dict[int, list[float]] = {}
    stacks: dict[int, str] = {}
    rates = [it.core_rate for it in study.iterations if it.core_rate]
    for cell in study.cells:
        g = cell.flags.get("group")
        if isinstance(g, dict):
            groups[names[cell.stack_id]] = g
        assert cell.id is not None
        for rep in study.replicates_of(cell.id):
            pid = rep.pid
            if pid is None or rep.id is None:
                continue
            stacks[pid] = names[cell.stack_id]
            slices[pid] = [
                it.rps for it in study.iterations_of(cell.id)
                if it.replicate == rep.replicate and it.kind == "measured" and it.rps
            ]  # fmt: skip
    return groups, slices, stacks, statistics.median(rates) if rates else None


def one_run(args: argparse.Namespace, k: int) -> dict[str, Any]:
    results = Path(tempfile.mkdtemp(prefix="tvw-"))
    matrix_opts: dict[str, Any] = {"workloads": [args.workload], "interpreters": [args.python]}
    quick = PROFILE_DATA["quick"]["matrix"]
    servers = args.servers.split(",") if args.servers else list(quick["servers"])
    frameworks = args.frameworks.split(",") if args.frameworks else list(quick["frameworks"])
    if args.top:
        servers = [*servers, TOP_SERVER]
    matrix_opts["servers"], matrix_opts["frameworks"] = servers, frameworks
    overrides: dict[str, Any] = {
        "matrix": matrix_opts,
        "results_dir": str(results),
        "report": False,
        "load": {"seed": args.seed + k} if args.seed is not None else {},
    }
    if args.no_core_speed:
        overrides["load"]["core_speed"] = False
    if args.io:
        overrides["load"]["io"] = args.io
    config = resolve({}, overrides, profile="quick")
    matrix = expand(config, _interpreters(config))
    hook = WrkAtClose(
        config.load.connections[0], args.wrk_s, args.wrk_rounds, seed=k, io=args.io,
        engine=not args.no_engine, bracket=args.bracket,
        expected=len(matrix.cells) * max(2, config.load.replicates),
    )  # fmt: skip
    started = time.monotonic()
    with Store(results / DEFAULT_FILENAME) as store, LocalExecutor(hook.seams()) as executor:
        outcome = run_study(config, matrix, store, results_dir=results, executor=executor)
    wall = time.monotonic() - started
    groups, slices, stacks, group_rate = group_figures(results / DEFAULT_FILENAME)
    by_stack: dict[str, dict[str, list[float]]] = {}
    for pid, stack in stacks.items():
        entry = by_stack.setdefault(
            stack,
            {"wrk": [], "slices": [], "engine": [], "matched": [], "before": [], "after": []},
        )
        if pid in hook.readings:
            # with --bracket, before the group and after it: the host's drift over the
            # group's minutes cancels to first order
            mine = hook.before.get(pid, []) + hook.readings[pid]
            entry["wrk"].append(statistics.fmean(mine))
            if pid in hook.before:
                entry["before"].append(statistics.fmean(hook.before[pid]))
                entry["after"].append(statistics.fmean(hook.readings[pid]))
            rates = hook.rates.get(pid, [])
            if group_rate and len(rates) == len(mine):
                # at the group's core speed (elasticity 1): the host's speed moves over the
                # minutes between the group and wrk, and the group's figures are put at its own
                entry["matched"].append(
                    statistics.fmean(
                        rps * group_rate / rate for rps, rate in zip(mine, rates, strict=True)
                    )
                )
            if pid in hook.engine_readings:
                entry["engine"].append(statistics.fmean(hook.engine_readings[pid]))
        if slices.get(pid):
            entry["slices"].append(statistics.fmean(slices[pid]))
    rows = []
    for stack, entry in sorted(by_stack.items()):
        g = groups.get(stack, {})
        rows.append({
            "stack": stack,
            "group_rps": g.get("rps"),
            "ratio": g.get("ratio"), "low": g.get("low"), "high": g.get("high"),
            "slices_rps": statistics.fmean(entry["slices"]) if entry["slices"] else None,
            "wrk_rps": statistics.fmean(entry["wrk"]) if entry["wrk"] else None,
            "wrk_matched_rps": statistics.fmean(entry["matched"]) if entry["matched"] else None,
            "engine_rps": statistics.fmean(entry["engine"]) if entry["engine"] else None,
            "wrk_processes": entry["wrk"],
            "wrk_before_rps": statistics.fmean(entry["before"]) if entry["before"] else None,
            "wrk_after_rps": statistics.fmean(entry["after"]) if entry["after"] else None,
            "wrk_readings": [hook.before.get(p, []) + hook.readings[p]
                             for p, st in stacks.items() if st == stack and p in hook.readings],
        })  # fmt: skip
    wrk_ratios(rows)
    cpu = {k: round(v, 2) for k, v in sorted(hook.cpu_group.items(), key=lambda kv: -kv[1])}
    return {"run": outcome.run_id, "wall_s": wall, "rows": rows, "thread_cpu_s": cpu}


def wrk_ratios(rows: list[dict[str, Any]]) -> None:
    """Each row's ratio to the geometric mean of the stacks by wrk, with its 95% interval
    (``wrk_ratio``, ``wrk_low``, ``wrk_high``): the group's own fit (round plus process
    effects, the interval over the processes) on wrk's readings, each wrk round a round, so
    that the continuous ratios carry their own uncertainty, as the group's do. Rows stored
    before the readings were kept by round count each process's mean as one round."""
    obs = []
    stack_of: dict[int, str] = {}
    for r in rows:
        per_process = r.get("wrk_readings") or [[x] for x in r.get("wrk_processes", [])]
        for readings in per_process:
            p = len(stack_of)
            stack_of[p] = r["stack"]
            obs += [Observation(k, p, x) for k, x in enumerate(readings)]
    fit = fit_group(obs, stack_of)
    if fit is None:
        return
    for r in rows:
        if r["stack"] in fit.levels:
            iv = fit.vs_reference(r["stack"])
            r["wrk_ratio"], r["wrk_low"], r["wrk_high"] = iv.ratio, iv.low, iv.high


def summarize(runs: list[dict[str, Any]]) -> None:
    """Over the runs: each stack's group/wrk (median, as measured and at the group's core
    speed), and how the ratios to the stacks' geometric mean agree: wrk's inside the group's
    interval, the group's inside wrk's, and the two within their combined interval (the
    difference of two independent estimates, each with its own 95% half-width)."""
    print("median over runs of group/wrk per stack (as measured; at the group's core speed):")
    stacks = sorted({r["stack"] for run in runs for r in run["rows"]})
    for s in stacks:
        mine = [r for run in runs for r in run["rows"] if r["stack"] == s and r["group_rps"]]
        vs = [r["group_rps"] / r["wrk_rps"] for r in mine if r["wrk_rps"]]
        at = [r["group_rps"] / r["wrk_matched_rps"] for r in mine if r.get("wrk_matched_rps")]
        if vs:
            print(f"  {s:44} {statistics.median(vs):.3f} ({', '.join(f'{v:.3f}' for v in vs)})"
                  + (f"; {statistics.median(at):.3f} ({', '.join(f'{v:.3f}' for v in at)})"
                     if at else ""))  # fmt: skip
    a = b = c = n = 0
    for run in runs:
        wrk_ratios(run["rows"])
        for r in run["rows"]:
            if r.get("low") is None or r.get("wrk_low") is None:
                continue
            n += 1
            a += r["low"] <= r["wrk_ratio"] <= r["high"]
            b += r["wrk_low"] <= r["ratio"] <= r["wrk_high"]
            hw_g = math.log(r["high"] / r["ratio"])
            hw_w = math.log(r["wrk_high"] / r["wrk_ratio"])
            c += abs(math.log(r["ratio"] / r["wrk_ratio"])) <= math.hypot(hw_g, hw_w)
    if n:
        print(
            f"ratios to the geometric mean, {n} in all: wrk's inside the group's interval {a};"
            f" the group's inside wrk's {b}; within their combined interval {c}"
        )


def show(run: dict[str, Any]) -> None:
    print(f"run {run['run']}: {run['wall_s']:.0f} s (engine: pywebbench load, continuous)")
    print(f"  {'stack':44} {'group':>8} {'slices':>8} {'wrk':>8} {'engine':>8} {'grp/wrk':>7}"
          f" {'@speed':>7} {'ratio [CI]':>22} {'wrk ratio':>9} in")  # fmt: skip
    for r in run["rows"]:
        g, w = r["group_rps"], r["wrk_rps"]
        vs = f"{g / w:8.3f}" if g and w else f"{'-':>8}"
        ci = (f"{r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
              if r.get("low") is not None and r.get("ratio") is not None else "-")  # fmt: skip
        wr = r.get("wrk_ratio")
        inside = "-" if wr is None or r.get("low") is None else (
            "yes" if r["low"] <= wr <= r["high"] else "NO")  # fmt: skip
        e = r.get("engine_rps") or 0
        m = r.get("wrk_matched_rps")
        at = f"{g / m:7.3f}" if g and m else f"{'-':>7}"
        print(f"  {r['stack']:44} {g or 0:8,.0f} {r['slices_rps'] or 0:8,.0f} {w or 0:8,.0f}"
              f" {e:8,.0f} {vs} {at} {ci:>22} {wr or 0:9.3f} {inside}")  # fmt: skip
    drift = [r["wrk_after_rps"] / r["wrk_before_rps"] for r in run["rows"]
             if r.get("wrk_before_rps") and r.get("wrk_after_rps")]  # fmt: skip
    if drift:
        print(f"  wrk after the group over wrk before it: median {statistics.median(drift):.3f}"
              f" ({min(drift):.3f}-{max(drift):.3f})")  # fmt: skip
    print("  CPU seconds of the run's threads during the group: " + ", ".join(
        f"{k} {v:g}" for k, v in list(run["thread_cpu_s"].items())[:8]))  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--python", default="cpython3.11")
    ap.add_argument("--workload", default="hello")
    ap.add_argument("--servers", help="comma-separated (default: the quick profile's)")
    ap.add_argument("--frameworks", help="comma-separated (default: the quick profile's)")
    ap.add_argument("--wrk-s", type=float, default=5.0)
    ap.add_argument("--wrk-rounds", type=int, default=3)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--no-core-speed", action="store_true")
    ap.add_argument("--io", choices=["epoll", "uring"], help="engine backend (default: study's)")
    ap.add_argument("--top", action="store_true", help="add bjoern's stacks (150k+)")
    ap.add_argument("--no-engine", action="store_true", help="wrk only, not the engine too")
    ap.add_argument(
        "--bracket", action="store_true",
        help="wrk's rounds before the group as well as after it (its readings then bracket "
        "the group's minutes; --wrk-rounds each time)",
    )  # fmt: skip
    ap.add_argument("--neighbour", action="store_true", help="the steady neighbour on core 0")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--from-json", type=Path, nargs="+", help="summarize stored runs, run none")
    args = ap.parse_args(argv)
    if args.from_json:
        summarize([run for path in args.from_json for run in json.loads(path.read_text())])
        return
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk (scripts/setup.sh installs it)")
    neighbour = None
    if args.neighbour:
        neighbour = subprocess.Popen(
            [sys.executable, str(NEIGHBOUR), "--cpu", "0", "--on", "30ms", "--off", "70ms",
             "--for", "3600s"], start_new_session=True,
        )  # fmt: skip
    runs = []
    try:
        for k in range(args.runs):
            runs.append(one_run(args, k))
            show(runs[-1])
            if args.json:
                args.json.write_text(json.dumps(runs, indent=1))
    finally:
        if neighbour is not None:
            os.killpg(neighbour.pid, 15)
            neighbour.wait(timeout=10)
    summarize(runs)


if __name__ == "__main__":
    main()
