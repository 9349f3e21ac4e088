"""Many concurrent keep-alive connections from one generator process, and its memory.

Starts the reference server (``pywebbench.refserver.RefServer``, its own process, core 0)
and runs ``pywebbench load`` as a child process (core 1) with ``--connections`` keep-alive
connections (closed loop, one request in flight on each). Prints how many connections were
established, the errors, the requests/s and the generator's peak RSS (``ru_maxrss`` from
``wait4``, the Python interpreter included).

The memory per connection is measured, not assumed: a first run with ``--baseline``
connections gives the fixed part (interpreter, engine, buffers), and

    RSS per connection = (steady RSS - baseline steady RSS) / (connections - baseline)

where the steady RSS is the median of the child's VmRSS over the second half of its run,
with the pool open (the peak, ``ru_maxrss``, is set by the interpreter's imports and hides
the pool). The projection to 100,000 connections is the baseline plus 100,000 x that
(target < 300 MB).
Kernel socket memory is not in a process's RSS and is not counted. Above 10,000
connections to a loopback target the engine spreads them over several 127.0.0.x source
addresses (one source's cheap ephemeral ports run out near 14,000; see docs/load-engine.md).

    python benchmarks/many_connections.py                     # 19,000 connections, 3 s
    python benchmarks/many_connections.py -c 2000 -d 2        # smaller
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pywebbench.refserver import RefServer

TARGET_100K_MB = 300
PROJECT_TO = 100_000


def _run_load(
    url: str, connections: int, duration: float, args: argparse.Namespace
) -> tuple[dict[str, Any], float, float]:
    """One ``pywebbench load`` child: its result document, its peak RSS and its steady RSS
    with the pool open (median VmRSS over the second half of the run), in MB."""
    code = "from pywebbench.commands.load import command; command()"
    argv = [
        "taskset", "-c", str(args.generator_cpu), sys.executable, "-c", code,
        url, "-c", str(connections), "-t", str(args.threads),
        "-d", str(duration), "--timeout", "10", "-q", "--json", "-",
    ]  # fmt: skip
    if args.source_addresses:
        argv += ["--source-addresses", args.source_addresses]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err)
        samples: list[tuple[float, float]] = []
        start = time.monotonic()
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)  # reaps it, with its rusage
            if pid == p.pid:
                break
            samples.append((time.monotonic() - start, _proc_kb(p.pid, "VmRSS") / 1024))
            time.sleep(0.05)
        rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read()
        if not text:
            sys.exit(f"pywebbench load failed ({rc}):\n{err.read().decode()}")
        doc = json.loads(text)
        run_s = doc["duration_s"] + 1.0  # interpreter start and connect phase before it
        late = [mb for t, mb in samples if t >= run_s / 2 and mb > 0] or [0.0]
        return doc, ru.ru_maxrss / 1024, statistics.median(late)


def _proc_kb(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` figure in KB (VmRSS, VmHWM); 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-c", "--connections", type=int, default=19_000)
    ap.add_argument("-d", "--duration", type=float, default=3.0)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--baseline", type=int, default=100, help="connections of the baseline run")
    ap.add_argument("--source-addresses", default=None, help="passed to pywebbench load")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--generator-cpu", type=int, default=1)
    args = ap.parse_args(argv)
    if args.connections <= args.baseline or args.baseline < 1 or args.duration <= 0:
        ap.error("need --connections > --baseline >= 1 and --duration > 0")
    print(
        f"setup: reference server (own process) on CPU {args.server_cpu}, generator on CPU "
        f"{args.generator_cpu}, {args.threads} thread(s), closed loop, {args.duration:g} s"
    )
    with RefServer(cpus=[args.server_cpu]) as srv:
        url = f"{srv.url}/hello"
        _, base_peak_mb, base_mb = _run_load(url, args.baseline, args.duration, args)
        d, peak_mb, steady_mb = _run_load(url, args.connections, args.duration, args)
        server_stats = srv.stats()
        server_mb = _proc_kb(srv.pid, "VmHWM") / 1024
    c = d["connections"]
    sources = ", ".join(c.get("source_addresses", [])) or "kernel's choice"
    print(
        f"connections: {c['targeted']:,} targeted, {c['established']:,} established, "
        f"{c['reopened']:,} reopened; server accepted {server_stats['connections_accepted']:,}; "
        f"sources: {sources}"
    )
    print(
        f"requests: {d['requests']:,} in {d['duration_s']:.2f} s = {d['rps']:,.0f} req/s; "
        f"errors {d['errors']:,} {sorted(d['error_classes'])}; "
        f"p50 {d['latency']['summary']['p50']:,} us, p99 {d['latency']['summary']['p99']:,} us"
    )
    g = d["generator"]
    waited = sum(t.get("run_delay_s") or 0.0 for t in g["threads"])
    print(
        f"generator CPU {g['cpu_us_per_request']:.2f} us/request, {g['cpu_s']:.2f} CPU-s, "
        f"waited {waited:.2f} s for a CPU (other load on its core); "
        f"open-file limit {g['nofile_limit']:,}"
    )
    per_conn_kb = max(0.0, steady_mb - base_mb) * 1024 / (args.connections - args.baseline)
    projected_mb = max(base_peak_mb, base_mb + per_conn_kb * PROJECT_TO / 1024)
    verdict = "ok" if projected_mb < TARGET_100K_MB else "ABOVE TARGET"
    print(
        f"generator peak RSS: {peak_mb:.1f} MB at {args.connections:,} connections, "
        f"{base_peak_mb:.1f} MB at {args.baseline:,} (interpreter included); steady RSS "
        f"with the pool open: {steady_mb:.1f} MB vs {base_mb:.1f} MB"
    )
    print(
        f"RSS per connection: {per_conn_kb:.2f} KB; projected at {PROJECT_TO:,}: "
        f"{projected_mb:.0f} MB (target < {TARGET_100K_MB} MB: {verdict})"
    )
    print(f"reference server peak RSS: {server_mb:.1f} MB")
    ok = c["established"] >= args.connections and d["errors"] == 0
    return 0 if ok and projected_mb < TARGET_100K_MB else 1


if __name__ == "__main__":
    sys.exit(main())
