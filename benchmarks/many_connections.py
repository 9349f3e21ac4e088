"""10,000 concurrent keep-alive connections from one generator process, and its peak RSS.

Starts the reference server (``pywebbench.refserver.RefServer``, core 0) and runs
``pywebbench load`` as a child process (core 1) with ``--connections`` keep-alive
connections (closed loop, one request in flight on each). Prints the requests/s, how many
connections were established, and the generator's peak RSS (``ru_maxrss`` from ``wait4``,
the Python interpreter included). Target: all connections established, peak RSS < 150 MB.

    python benchmarks/many_connections.py               # 10,000 connections, 5 s
    python benchmarks/many_connections.py -c 2000 -d 2  # smaller
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from pywebbench.refserver import RefServer

TARGET_MB = 150


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-c", "--connections", type=int, default=10_000)
    ap.add_argument("-d", "--duration", type=float, default=5.0)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--generator-cpu", type=int, default=1)
    args = ap.parse_args(argv)
    if args.connections < 1 or args.duration <= 0:
        ap.error("--connections must be >= 1 and --duration > 0")
    code = "from pywebbench.commands.load import command; command()"
    with RefServer(cpus=[args.server_cpu]) as srv:
        argv_ = [
            "taskset", "-c", str(args.generator_cpu), sys.executable, "-c", code,
            f"{srv.url}/hello", "-c", str(args.connections), "-t", str(args.threads),
            "-d", str(args.duration), "--timeout", "10", "-q", "--json", "-",
        ]  # fmt: skip
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.Popen(argv_, stdout=out, stderr=err)
            _, status, ru = os.wait4(p.pid, 0)
            rc = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            if rc != 0:
                sys.exit(f"pywebbench load failed ({rc}):\n{err.read().decode()}")
            d = json.loads(out.read())
        server_stats = srv.stats()
    peak_mb = ru.ru_maxrss / 1024
    c = d["connections"]
    print(
        f"connections: {c['targeted']:,} targeted, {c['established']:,} established, "
        f"{c['reopened']:,} reopened; server accepted {server_stats['connections_accepted']:,}"
    )
    print(
        f"requests: {d['requests']:,} in {d['duration_s']:.2f} s = {d['rps']:,.0f} req/s; "
        f"errors {d['errors']:,}; p50 {d['latency']['summary']['p50']:,} us, "
        f"p99 {d['latency']['summary']['p99']:,} us"
    )
    print(
        f"generator CPU {d['generator']['cpu_us_per_request']:.2f} us/request; "
        f"open-file limit {d['generator']['nofile_limit']:,}"
    )
    verdict = "ok" if peak_mb < TARGET_MB else "ABOVE TARGET"
    print(
        f"generator peak RSS: {peak_mb:.1f} MB (target < {TARGET_MB} MB: {verdict}), "
        f"{peak_mb * 1024 / max(1, args.connections):.2f} KB per connection, interpreter included"
    )
    return 0 if c["established"] >= args.connections and peak_mb < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
