"""pywebbench's load generator against wrk, on the same nginx, on the same core.

nginx (1 worker, ``return 200 "Hello, World!"``, access_log off) runs pinned to core 0 from
its own temporary prefix on a free loopback port. wrk (``-t1 -c64``) and ``pywebbench load``
(1 thread, 64 connections) on each of its I/O backends (``--io epoll``, ``--io uring``) run
alternately pinned to core 1, ``--rounds`` rounds each. For each run it prints requests/s,
the generator's CPU-microseconds per request (CPU time of the generator process from
``wait4()``, user + system) and the kernel's share of that CPU (system / (user + system)),
and at the end the medians as ratios to wrk's. Targets: the io_uring backend at >= 1.3x
wrk's requests/s and <= 0.75x its CPU per request; the epoll backend at >= 1.0x and <= 0.9x.

    python benchmarks/loadgen_vs_wrk.py                # 10 s x 3 rounds
    python benchmarks/loadgen_vs_wrk.py -d 3 -r 2      # quicker

wrk is installed from Debian (apt-get install wrk) when missing.
"""

from __future__ import annotations

import argparse
import json
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

#: nginx's ``return`` for the hello answer
HELLO = '200 "Hello, World!"'
NGINX_CONF = """\
worker_processes 1;
daemon off;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    server {{
        listen 127.0.0.1:{port}{http2};
        location / {{ return {answer}; }}
    }}
}}
"""


#: Generators, in the order of each round, with their targets relative to wrk:
#: (minimum requests/s ratio, maximum CPU-per-request ratio).
GENERATORS: dict[str, tuple[float, float]] = {
    "wrk": (1.0, 1.0),
    "pywebbench-epoll": (1.0, 0.9),
    "pywebbench-uring": (1.3, 0.75),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_tool(tool: str, package: str) -> str:
    """The path of ``tool``, installing Debian's ``package`` first when it is missing."""
    path = shutil.which(tool)
    if path:
        return path
    print(f"{tool} not found: installing it from Debian (apt-get install -y {package})", flush=True)
    subprocess.run(["apt-get", "install", "-y", "-q", package], check=True)
    path = shutil.which(tool)
    if not path:
        sys.exit(f"{tool} is still missing after apt-get install {package}")
    return path


def ensure_wrk() -> str:
    return ensure_tool("wrk", "wrk")


def start_nginx(
    prefix: Path, port: int, cpu: int, http2: bool = False, answer: str = HELLO
) -> subprocess.Popen:
    """nginx (1 worker, ``return <answer>``: hello by default) on loopback ``port`` pinned to
    ``cpu``; ``http2``: h2c with prior knowledge instead of HTTP/1.1 (``keepalive_requests``
    covers HTTP/2 connections too)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        sys.exit("nginx is missing: apt-get install nginx (or run scripts/setup.sh)")
    conf = prefix / "nginx.conf"
    http2_listen = " http2" if http2 else ""
    conf.write_text(NGINX_CONF.format(prefix=prefix, port=port, http2=http2_listen, answer=answer))
    p = subprocess.Popen(
        ["taskset", "-c", str(cpu), nginx, "-p", str(prefix), "-c", str(conf)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_listening(p, port, f"nginx (see {prefix}/error.log)")
    return p


def wait_listening(p: subprocess.Popen, port: int, what: str, timeout: float = 10) -> None:
    """Wait until ``p`` accepts connections on loopback ``port``; stop it and exit if not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    stop(p)
    sys.exit(f"{what} did not listen on port {port}")


def stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def run_child(argv: list[str]) -> tuple[str, str, float, int, float]:
    """Run argv to completion; (stdout, stderr, CPU seconds, exit status, system CPU seconds)
    via wait4."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(argv, stdout=fo, stderr=fe)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return (
            fo.read().decode(errors="replace"),
            fe.read().decode(errors="replace"),
            ru.ru_utime + ru.ru_stime,
            p.returncode,
            ru.ru_stime,
        )


def run_wrk(
    wrk: str, url: str, cpu: int, conns: int, duration: float
) -> tuple[float, float, float]:
    """One wrk run; (rps, CPU-us per request, system share of its CPU)."""
    argv = ["taskset", "-c", str(cpu), wrk, "-t1", f"-c{conns}", f"-d{duration:g}s", url]
    out, err, cpu_s, rc, sys_s = run_child(argv)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    n = re.search(r"(\d+) requests in", out)
    if rc != 0 or not m or not n:
        sys.exit(f"wrk failed ({rc}):\n{out}\n{err}")
    return float(m.group(1)), cpu_s * 1e6 / int(n.group(1)), sys_s / max(cpu_s, 1e-9)


def run_pwb(
    url: str, cpu: int, conns: int, duration: float | None, io: str, startup_cpu_s: float = 0.0
) -> tuple[float, float, dict]:
    """One ``pywebbench load --io <io>`` run; (rps, process CPU-us per request, result; the
    result's ``process_cpu_s`` and ``process_sys_s`` are the process's CPU and system CPU).

    The process CPU (wait4) minus ``startup_cpu_s`` (what the same command costs for a single
    request: interpreter start-up and imports), divided by the requests.
    """
    # The `pywebbench load` command itself, without importing every other subcommand.
    code = "from pywebbench.commands.load import command; command()"
    bound = ["-d", str(duration)] if duration else ["-n", "1"]
    argv = [
        "taskset", "-c", str(cpu), sys.executable, "-c", code, url,
        "-t", "1", "-c", str(conns), *bound, "--cpus", str(cpu), "--io", io, "-q", "--json", "-",
    ]  # fmt: skip
    out, err, cpu_s, rc, sys_s = run_child(argv)
    if rc != 0:
        sys.exit(f"pywebbench load failed ({rc}):\n{err}")
    d = json.loads(out)
    if d.get("io") != io:
        sys.exit(f"pywebbench load ran on {d.get('io')!r}, not {io!r}")
    d["process_cpu_s"] = cpu_s
    d["process_sys_s"] = sys_s
    return d["rps"], max(0.0, cpu_s - startup_cpu_s) * 1e6 / max(1, d["requests"]), d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per run (10)")
    ap.add_argument("-r", "--rounds", type=int, default=3, help="rounds of each tool (3)")
    ap.add_argument("-c", "--connections", type=int, default=64, help="connections (64)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--generator-cpu", type=int, default=1)
    args = ap.parse_args(argv)
    if args.duration <= 0 or args.rounds < 1:
        ap.error("--duration must be > 0 and --rounds >= 1")
    wrk = ensure_wrk()
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with tempfile.TemporaryDirectory(prefix="pwb-nginx-") as tmp:
        nginx = start_nginx(Path(tmp), port, args.server_cpu)
        try:
            print(
                f"nginx on core {args.server_cpu} at {url}; generators on core "
                f"{args.generator_cpu}, {args.connections} connections, {args.duration:g} s"
            )
            # Short warm-up of nginx itself; start-up CPU of `pywebbench load` (1 request).
            run_wrk(wrk, url, args.generator_cpu, args.connections, 1)
            startups = [run_pwb(url, args.generator_cpu, 1, None, "epoll")[2] for _ in range(3)]
            first = min(startups, key=lambda d: d["process_cpu_s"])
            startup, startup_sys = first["process_cpu_s"], first["process_sys_s"]
            print(f"pywebbench start-up CPU (1 request, subtracted): {startup * 1000:.0f} ms")
            rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in GENERATORS}
            busy_of: dict[str, list[float]] = {name: [] for name in GENERATORS}
            for i in range(args.rounds):
                rps, cpr, kernel = run_wrk(
                    wrk, url, args.generator_cpu, args.connections, args.duration
                )
                rows["wrk"].append((rps, cpr, kernel))
                print(f"round {i + 1}  {'wrk':<16}{rps:>10,.0f} req/s  {cpr:6.2f} CPU-us/req  "
                      f"kernel {kernel:4.0%}", flush=True)  # fmt: skip
                for io in ("epoll", "uring"):
                    rps, cpr, d = run_pwb(
                        url, args.generator_cpu, args.connections, args.duration, io, startup
                    )
                    # The kernel's share of the load's CPU (start-up CPU taken out of both).
                    load_cpu = max(d["process_cpu_s"] - startup, 1e-9)
                    kernel = max(d["process_sys_s"] - startup_sys, 0.0) / load_cpu
                    rows[f"pywebbench-{io}"].append((rps, cpr, kernel))
                    eng = d["generator"]["cpu_us_per_request"]
                    bound = " GENERATOR-BOUND" if d["generator"]["generator_bound"] else ""
                    busy = d["generator"]["threads"][0]["busy"]
                    busy_of[f"pywebbench-{io}"].append(busy)
                    print(
                        f"round {i + 1}  {'pywebbench-' + io:<16}{rps:>10,.0f} req/s  "
                        f"{cpr:6.2f} CPU-us/req  kernel {kernel:4.0%} (engine thread "
                        f"{eng:.2f}, busy {busy:.0%}; errors {d['errors']}){bound}",
                        flush=True,
                    )
        finally:
            stop(nginx)
    print()
    med = {name: tuple(statistics.median(r[k] for r in v) for k in range(3))
           for name, v in rows.items()}  # fmt: skip
    for name, (rps, cpr, kernel) in med.items():
        print(f"median {name:<16}{rps:>10,.0f} req/s  {cpr:6.2f} CPU-us/req  kernel {kernel:4.0%}")
    for name, (min_rps, max_cpu) in GENERATORS.items():
        if name == "wrk":
            continue
        rps_ratio = med[name][0] / med["wrk"][0]
        cpu_ratio = med[name][1] / med["wrk"][1]
        ok_rps = "ok" if rps_ratio >= min_rps else "BELOW TARGET"
        ok_cpu = "ok" if cpu_ratio <= max_cpu else "ABOVE TARGET"
        print(f"{name} / wrk: requests/s {rps_ratio:.2f}x (target >= {min_rps}: {ok_rps}), "
              f"CPU per request {cpu_ratio:.2f}x (target <= {max_cpu}: {ok_cpu})")  # fmt: skip
        # The honest ceilings: the kernel's TCP work is a floor under CPU per request that no
        # user-space change removes, and an engine thread that is not busy all the time was
        # waiting for the server, so its requests/s are the server's, not the generator's.
        kernel_cpr = med[name][1] * med[name][2]
        print(f"  kernel floor: the kernel alone spent {kernel_cpr:.2f} CPU-us/req = "
              f"{kernel_cpr / med['wrk'][1]:.2f}x wrk's whole CPU per request; with no "
              "user-space time at all the ratio could not go lower")  # fmt: skip
        busy = statistics.median(busy_of[name])
        if busy < 0.95:
            print(f"  server-bound: the engine thread was busy {busy:.0%} of the run (median), "
                  f"waiting on nginx on core {args.server_cpu} the rest: requests/s measure "
                  "the server's ceiling, not the generator's")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
