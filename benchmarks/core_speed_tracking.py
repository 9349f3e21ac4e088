"""Does a server's speed follow its core's? The evidence behind ``load.core_speed``.

A single-threaded stdlib HTTP server (deterministic fib(20) per request, or a bare hello) is
pinned to core 0 and loaded by the engine from core 1 (one connection, closed loop), while
the core-speed probe of ``pywebbench.meter.core_speed`` samples core 0 (2 ms of CPU every
100 ms, as in a study). Per window of ``--window`` seconds it records the server's requests
per CPU-second of its own (``/proc/PID/schedstat``: the server's work per CPU-second) and
the probe's median rate, each as a ratio to its median over the run, and prints:

- the correlation of the two series;
- the spread (standard deviation) of the server's speed raw and divided by the probe's,
  which is what ``core_speed`` does to a study's req/s;
- the probe's range (how much the core's speed moved).

    python benchmarks/core_speed_tracking.py --workload cpu --seconds 120
    python benchmarks/core_speed_tracking.py --workload hello --seconds 60

The load goes to 127.0.0.1 only; the server is stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pywebbench import _engine
from pywebbench.meter.core_speed import CoreSpeedProbe

SERVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = str(fib(20)).encode() if sys.argv[2] == "cpu" else b"hello"
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
        self.wfile.write(head + body)  # one write: no delayed-ACK stall
    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def _cpu_s(pid: int) -> float:
    """The process's main thread's CPU time, in ns precision (schedstat)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _sd(values: list[float]) -> float:
    return statistics.pstdev(values) if len(values) > 1 else 0.0


def track(workload: str, seconds: float, window: float, port: int) -> dict[str, object]:
    """Run the server under load with the probe; the per-window series and their figures."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), workload],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    points: list[tuple[float, int, float]] = []  # (monotonic, requests, server CPU s)
    probe = CoreSpeedProbe([0])
    try:
        os.sched_setaffinity(server.pid, {0})
        time.sleep(1.0)  # listening

        def progress(snapshot: str) -> None:
            doc = json.loads(snapshot)
            points.append((time.monotonic(), int(doc["requests"]), _cpu_s(server.pid)))

        spec = {
            "url": f"http://127.0.0.1:{port}/",
            "connections": 1,
            "duration_s": seconds,
            "cpus": [1],
        }
        probe.start()
        _engine.run_load(json.dumps(spec), progress, window)
    finally:
        probe.stop()
        server.terminate()
        server.wait(timeout=10)
    speed, core = [], []
    for (t0, r0, c0), (t1, r1, c1) in zip(points, points[1:], strict=False):
        rates = [r for t, r in probe.readings if t0 <= t < t1]
        if c1 > c0 and rates:
            speed.append((r1 - r0) / (c1 - c0))
            core.append(statistics.median(rates))
    if len(speed) < 3:
        raise SystemExit("too few windows: lengthen --seconds")
    s_mid, c_mid = statistics.median(speed), statistics.median(core)
    speed = [s / s_mid for s in speed]
    core = [c / c_mid for c in core]
    scaled = [s / c for s, c in zip(speed, core, strict=True)]
    return {
        "workload": workload,
        "windows": len(speed),
        "window_s": window,
        "correlation": round(statistics.correlation(speed, core), 3),
        "server_sd": round(_sd(speed), 4),
        "scaled_sd": round(_sd(scaled), 4),
        "core_min": round(min(core), 3),
        "core_max": round(max(core), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=["cpu", "hello"], default="cpu")
    ap.add_argument("--seconds", type=float, default=60.0, help="loaded seconds (default 60)")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per window (default 1)")
    ap.add_argument("--port", type=int, default=18731)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if not 5 <= args.seconds <= 600 or not 0.25 <= args.window <= 10:
        ap.error("--seconds must be in [5, 600] and --window in [0.25, 10]")
    if len(os.sched_getaffinity(0)) < 2:
        ap.error("needs cores 0 and 1 (server on 0, generator on 1)")
    found = track(args.workload, args.seconds, args.window, args.port)
    if args.json:
        print(json.dumps(found))
        return
    print(
        f"{found['workload']}: {found['windows']} windows of {found['window_s']} s; "
        f"core speed {found['core_min']}-{found['core_max']}x its median; "
        f"correlation {found['correlation']}; server speed spread (sd) "
        f"{found['server_sd']:.1%} raw, {found['scaled_sd']:.1%} divided by the core's"
    )


if __name__ == "__main__":
    main()
