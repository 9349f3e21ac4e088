"""Quick check: is the reference server at least as fast as nginx ``return 200`` on one core?

Runs nginx (1 worker, ``return 200 "Hello, World!"``) and the reference server, each pinned
to CPU 0, and drives each with ``wrk -t1 -c64`` pinned to CPU 1, alternating, for a few
rounds. Prints requests/s and the server's CPU time per request (user+system of its process
group, which is robust to a busy machine). Not a pytest test: run it by hand::

    .venv/bin/python tests/refserver/bench_nginx_vs_refserver.py --rounds 3 --duration 5
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pywebbench.refserver import RefServer

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 10000000;
  server {{
    listen 127.0.0.1:{port};
    location / {{ default_type text/plain; return 200 "Hello, World!"; }}
  }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_cpu_seconds(pgid: int) -> float:
    """User+system CPU seconds of every live process in a process group."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def wrk(url: str, duration: int, cpu: int) -> tuple[float, int]:
    out = subprocess.run(
        ["taskset", "-c", str(cpu), "wrk", "-t1", "-c64", f"-d{duration}s", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    n = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return rps, n


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--wrk-cpu", type=int, default=1)
    args = ap.parse_args()
    for tool in ("nginx", "wrk", "taskset"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            sys.exit(f"{tool} is not installed (scripts/setup.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="pwb-nginx-")
    port = free_port()
    Path(tmp, "nginx.conf").write_text(NGINX_CONF.format(dir=tmp, port=port))
    nginx = subprocess.Popen(
        ["taskset", "-c", str(args.server_cpu), "nginx", "-p", tmp, "-c", f"{tmp}/nginx.conf"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    results: dict[str, list[tuple[float, float]]] = {"nginx": [], "refserver": []}
    try:
        wait_port(port)
        with RefServer(cpus=[args.server_cpu]) as rs:
            targets = {
                "nginx": (f"http://127.0.0.1:{port}/", nginx.pid),
                "refserver": (rs.url + "/hello", rs.pid),
            }
            for r in range(args.rounds):
                for name, (url, pgid) in targets.items():
                    c0 = group_cpu_seconds(pgid)
                    rps, n = wrk(url, args.duration, args.wrk_cpu)
                    cpu_us = (group_cpu_seconds(pgid) - c0) * 1e6 / max(n, 1)
                    results[name].append((rps, cpu_us))
                    print(f"round {r + 1} {name:9s} {rps:10.0f} req/s  {cpu_us:5.2f} CPU-us/req")
    finally:
        os.killpg(nginx.pid, signal.SIGTERM)
        nginx.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    med = {
        k: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v))
        for k, v in results.items()
    }
    for name, (rps, cpu) in med.items():
        print(f"median {name:9s} {rps:10.0f} req/s  {cpu:5.2f} CPU-us/req")
    ratio = med["refserver"][0] / med["nginx"][0]
    cpu_ratio = med["refserver"][1] / med["nginx"][1]
    print(f"refserver/nginx: {ratio:.2f}x req/s, {cpu_ratio:.2f}x CPU per request")


if __name__ == "__main__":
    main()
