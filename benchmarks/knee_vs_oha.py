"""The knee (the highest rate whose p99 meets an SLO, docs/slo.md) against an independent
open-loop tool, oha (crates.io), on the same stack, the same machine, in alternating rounds.

Each round, in random order:

- **pywebbench**: ``pywebbench run --python cpython3.11 --server gunicorn-sync --framework
  raw-wsgi --workload hello --slo p99=20ms --replicates 1`` (its own fresh server on core 0,
  the engine on core 1); the knee is read from its store;
- **oha**: the same stack started by pywebbench's launcher on core 0 (same catalogue
  command, same venv), warmed by a 3 s closed loop, then the same search as the knee's
  (``pywebbench.run.knee.search_knee``: bracket from the closed-loop rate, bisect to 5%),
  each probe an oha run pinned to core 1: ``oha -q RATE -z S -w --latency-correction -c N
  --disable-keepalive`` (``-w``: requests in flight at the deadline are waited for, not
  counted as errors) after a 1 s warm-up at that rate (``slo_warmup_s``), judged by the
  knee's own verdict (``probe_verdict``: no errors, p99 within the SLO, 90% of the rate
  achieved), 3 probes per rate, each window as long as the knee's (``SearchPlan.probe_s``:
  100 samples beyond the percentile).

gunicorn's sync worker closes the connection after every response, so both tools open a
new connection per request when it is due, over the same N connections (``--connections``,
the knee's default 64; docs/slo.md). The script also prints each tool's closed-loop rate
over those connections on the same server: what each can drive through it.

    python benchmarks/knee_vs_oha.py                  # 3 rounds, ~15 min
    python benchmarks/knee_vs_oha.py --workload cpu --workers 2 --slo p99=50ms

oha is installed with ``cargo install oha --locked`` when it is not on PATH.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")
STACK = ("gunicorn-sync", "raw-wsgi")


def oha_path() -> str:
    """oha on PATH or in cargo's bin, installed from crates.io when missing."""
    found = shutil.which("oha") or shutil.which("oha", path=str(Path.home() / ".cargo/bin"))
    if found:
        return found
    print("installing oha from crates.io (cargo install oha --locked) ...", file=sys.stderr)
    subprocess.run(["cargo", "install", "oha", "--locked", "--quiet"], check=True, timeout=1800)
    found = shutil.which("oha", path=str(Path.home() / ".cargo/bin"))
    if not found:
        sys.exit("cargo install oha did not leave an oha binary in ~/.cargo/bin")
    return found


def pywebbench_knee(slo: str, workload: str, workers: int, conns: int, results: Path) -> float:
    """One single-stack study with the knee search; its knee in req/s."""
    server, framework = STACK
    cmd = [PYWEBBENCH, "run", "--python", "cpython3.11", "--server", server,
           "--framework", framework, "--workload", workload, "--slo", slo,
           "--workers", str(workers), "--connections", str(conns), "--replicates", "1",
           "--max-replicates", "1", "--no-report",
           "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        sys.exit(f"pywebbench run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    with sqlite3.connect(results / "pywebbench.sqlite") as db:
        row = db.execute("SELECT knee_rps, status FROM knees ORDER BY id DESC LIMIT 1").fetchone()
    if row is None or row[0] is None:
        sys.exit(f"the pywebbench run found no knee: {row}")
    return float(row[0])


def oha_probe(
    oha: str, url: str, rate: float, seconds: float, conns: int, label: str = "p99"
) -> dict[str, float]:
    """One oha open-loop window on core 1: achieved rate, the ``label`` percentile (p99,
    p95, ...) and p50 in us, errors."""
    cmd = ["taskset", "-c", "1", oha, "--no-tui", "--output-format", "json",
           "-q", f"{rate:.1f}", "-z", f"{seconds:.2f}s", "-w", "--latency-correction",
           "-c", str(conns), "--disable-keepalive", url]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=True)
    out = json.loads(proc.stdout)
    summary, pct = out["summary"], out["latencyPercentiles"]
    dist = out.get("statusCodeDistribution", {})
    errors = sum(out.get("errorDistribution", {}).values()) + sum(
        n for code, n in dist.items() if not code.startswith("2")
    )
    if errors:
        print(f"  oha errors: {out.get('errorDistribution')} {dist}", file=sys.stderr)
    return {
        "achieved": float(summary["requestsPerSec"]),
        "latency_us": float(pct[label]) * 1e6,
        "p50_us": float(pct["p50"]) * 1e6,
        "errors": float(errors),
    }


def oha_knee(
    oha: str, slo_text: str, workload: str, workers: int, conns: int, log_dir: Path
) -> tuple[float, float, float]:
    """The knee of a fresh server of the stack, each probe an oha window (module doc), and
    the closed-loop rates of pywebbench and of oha over the same connections before it."""
    from pywebbench.catalogue.interpreters import default_interpreters
    from pywebbench.catalogue.stacks import plan
    from pywebbench.catalogue.workloads import get
    from pywebbench.launch import start_server
    from pywebbench.provision.venv import provision
    from pywebbench.run.knee import SearchPlan, probe_verdict, search_knee, start_rate
    from pywebbench.run.slo import parse_slo
    from pywebbench.store import utcnow
    from pywebbench.store.knee_rows import KneeProbe

    slo = parse_slo(slo_text)
    interp = [i for i in default_interpreters() if i.name == "cpython3.11"]
    (cand,) = plan(interp, [STACK[0]], [STACK[1]], [workload])
    assert cand.stack is not None, cand.unavailable
    env = provision(cand.stack)
    with start_server(cand.stack, env, cpus=[0], workers=workers, log_dir=log_dir) as srv:
        url = srv.base_url.rstrip("/") + get(workload).request().path
        closed = subprocess.run(
            [PYWEBBENCH, "load", "--no-keepalive", "-c", str(conns), "-d", "3", "--cpus", "1",
             "--json", "-", url],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        closed_rps = float(json.loads(closed.stdout)["rps"])
        oha_closed = subprocess.run(
            ["taskset", "-c", "1", oha, "--no-tui", "--output-format", "json", "-z", "3s", "-w",
             "-c", str(conns), "--disable-keepalive", url],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        oha_closed_rps = float(json.loads(oha_closed.stdout)["summary"]["requestsPerSec"])
        print(f"  closed loop, {conns} connection(s): pywebbench {closed_rps:,.0f} req/s, "
              f"oha {oha_closed_rps:,.0f}", file=sys.stderr)  # fmt: skip
        search = SearchPlan(slo=slo, start_rps=start_rate([closed_rps]), budget_s=300.0)

        def probe(rate: float, phase: str) -> KneeProbe:
            oha_probe(oha, url, rate, search.warmup_s, conns)  # the probe's warm-up
            window = search.probe_s(rate)
            got = oha_probe(oha, url, rate, window, conns, slo.label)
            verdict = probe_verdict(
                slo, latency_us=got["latency_us"], errors=int(got["errors"]), offered=rate,
                achieved=got["achieved"],
            )  # fmt: skip
            print(f"  oha {phase:7} {rate:8.0f}/s: achieved {got['achieved']:8.0f}, "
                  f"{slo.label} {got['latency_us'] / 1000:7.2f} ms: {verdict}",
                  file=sys.stderr)  # fmt: skip
            return KneeProbe(
                id=None, cell_id=0, replicate=0, idx=0, phase=phase, started_at=utcnow(),
                rate_offered=rate, rate_achieved=got["achieved"], duration_s=window,
                requests=round(got["achieved"] * window), errors=int(got["errors"]),
                latency_us=got["latency_us"], latency_p50_us=got["p50_us"], samples=0,
                verdict=verdict,
            )  # fmt: skip

        result = search_knee(search, probe)
    if result.knee_rps is None:
        sys.exit("oha's search found no rate within the SLO")
    return float(result.knee_rps), closed_rps, oha_closed_rps


def arrival_gaps(oha: str, rate: float = 2000.0, conns: int = 64) -> dict[str, list[float]]:
    """Each tool's spacing of sends at ``rate`` (new connection per request): the gaps
    between connections accepted by a tiny server on core 0 that stamps each accept, over the
    middle half of a 2 s run. Constant arrivals are gaps of 1/rate; a tool that sends on a
    coarse timer sends in bursts, which queue at a one-at-a-time server below its capacity.
    The server's own handling (tens of microseconds) is the smallest gap it can see, so a
    burst shows as gaps of about that."""
    import socket
    import threading

    response = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    stamps: list[int] = []

    def serve() -> None:
        os.sched_setaffinity(0, {0})
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            stamps.append(time.perf_counter_ns())
            with conn:
                conn.recv(4096)
                conn.sendall(response)

    threading.Thread(target=serve, daemon=True).start()
    commands = {
        "pywebbench": [PYWEBBENCH, "load", "--no-keepalive", "-c", str(conns), "-d", "2",
                       "--cpus", "1", "--rate", f"{rate:.0f}", "--json", os.devnull, url],
        "oha": ["taskset", "-c", "1", oha, "--no-tui", "-q", f"{rate:.0f}", "-z", "2s", "-w",
                "--latency-correction", "-c", str(conns), "--disable-keepalive", url],
    }  # fmt: skip
    gaps: dict[str, list[float]] = {}
    for tool, cmd in commands.items():
        stamps.clear()
        subprocess.run(cmd, capture_output=True, timeout=60, check=True)
        time.sleep(0.2)  # the server finishes what the tool left in its accept queue
        done = list(stamps)
        mid = done[len(done) // 4 : 3 * len(done) // 4]
        gaps[tool] = sorted((b - a) / 1000 for a, b in itertools.pairwise(mid))
    listener.close()
    return gaps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each tool (default 3)")
    ap.add_argument("--slo", default="p99=20ms", help="the SLO (default %(default)s)")
    ap.add_argument("--workload", default="hello", help="workload (default %(default)s)")
    ap.add_argument("--workers", type=int, default=1, help="gunicorn workers (default 1)")
    ap.add_argument("--connections", type=int, default=64, help="both tools' (default 64)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    oha = oha_path()
    version = subprocess.run([oha, "--version"], capture_output=True, text=True).stdout.strip()
    for tool, gaps in arrival_gaps(oha).items():
        q = [gaps[round(p * (len(gaps) - 1))] for p in (0.1, 0.5, 0.9)]
        burst = sum(g < 100 for g in gaps) / len(gaps)
        print(f"{tool:10} sends at 2,000/s: gaps p10/p50/p90 {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f} us "
              f"(constant: 500); {burst:.0%} under 100 us")  # fmt: skip
    rng = random.Random(args.seed)
    knees: dict[str, list[float]] = {"pywebbench": [], "oha": []}
    closed: dict[str, list[float]] = {"pywebbench": [], "oha": []}
    with tempfile.TemporaryDirectory(prefix="pwb-knee-oha-") as tmp:
        for k in range(args.rounds):
            order = ["pywebbench", "oha"]
            rng.shuffle(order)
            for tool in order:
                t0 = time.monotonic()
                if tool == "pywebbench":
                    knee = pywebbench_knee(
                        args.slo, args.workload, args.workers, args.connections,
                        Path(tmp) / f"run{k}",
                    )  # fmt: skip
                else:
                    knee, ours, theirs = oha_knee(
                        oha, args.slo, args.workload, args.workers, args.connections, Path(tmp)
                    )
                    closed["pywebbench"].append(ours)
                    closed["oha"].append(theirs)
                knees[tool].append(knee)
                print(f"round {k} {tool:10}: knee {knee:8.0f} req/s "
                      f"({time.monotonic() - t0:.0f} s)", file=sys.stderr)  # fmt: skip
    ours, theirs = statistics.median(knees["pywebbench"]), statistics.median(knees["oha"])
    print(f"stack: cpython3.11 {'/'.join(STACK)} {args.workload}, {args.workers} worker(s), "
          f"{args.connections} connections, SLO {args.slo}, server on core 0, load on core 1; "
          f"{version}")  # fmt: skip
    for tool, values in knees.items():
        print(f"{tool:10} knees: {', '.join(f'{v:,.0f}' for v in values)}; "
              f"median {statistics.median(values):,.0f} req/s")  # fmt: skip
    ratio = ours / theirs
    capacity = statistics.median(closed["pywebbench"]) / statistics.median(closed["oha"])
    print(f"closed loop over the same connections, pywebbench / oha: {capacity:.3f} "
          f"(pywebbench {statistics.median(closed['pywebbench']):,.0f}, oha "
          f"{statistics.median(closed['oha']):,.0f} req/s)")  # fmt: skip
    print(f"pywebbench / oha: {ratio:.3f} (target: within 10%, 0.90-1.10)")
    return 0 if 0.9 <= ratio <= 1.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
