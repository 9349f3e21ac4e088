"""pywebbench's h2c client against h2load (nghttp2), on the same server, on the same core.

Two modes:

- ``nginx`` (default): nginx (1 worker, ``listen ... http2``, ``return 200 "Hello, World!"``,
  access_log off, keepalive_requests raised so connections are not closed every 1,000
  requests) pinned to core 0. h2load (``-t1 -c16 -m10``) and ``pywebbench load --protocol
  h2c -c 16 --streams 10`` on each I/O backend run alternately pinned to core 1,
  ``--rounds`` rounds each. Targets (docs/http2.md): the engine at >= 1.3x h2load's
  requests/s and <= 0.75x its CPU per request. ``--response empty``: nginx answers 204
  instead (one HEADERS frame, no DATA: one frame a request instead of two), so that nginx
  is less likely to set the pace.
- ``hypercorn``: the same against hypercorn (a catalogue server, one worker, serving the
  catalogue's raw ASGI app: ``GET /hello``) on core 0, where the server is the bottleneck:
  both generators must measure the same requests/s, within 5%. (The CPU per request of a
  generator at ~1,500 requests/s is mostly its start-up and idle polling: not compared.)

pywebbench sends h2load's user-agent header and h2load pywebbench's HPACK table size (0, with
``--header-table-size=0``), so the server sees the same request headers and settings from
both (h2load indexes its request headers in HPACK's dynamic table, pywebbench encodes them
the same way on every stream). For each run: requests/s, the generator's CPU-microseconds
per request (CPU time of the generator process from ``wait4()``, user + system; for
pywebbench less its start-up CPU, measured on a 1-request run) and the kernel's share of it;
for h2load's runs also the server's share of its core (its process tree's CPU time over
the run's wall time): near 100%, the server, not h2load, set h2load's requests/s;
at the end the medians, and the median over the rounds of each round's ratio to h2load (a
pair of runs in a round saw the same machine: steadier than a ratio of medians when the
machine's load moves).

    python benchmarks/h2_vs_h2load.py                    # nginx, 10 s x 3 rounds
    python benchmarks/h2_vs_h2load.py --server hypercorn -d 5
    python benchmarks/h2_vs_h2load.py -d 3 -r 2          # quicker
    python benchmarks/h2_vs_h2load.py --response empty   # nginx answers 204

h2load comes from Debian's nghttp2-client (installed when missing).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pywebbench
from loadgen_vs_wrk import (
    HELLO,
    ensure_tool,
    free_port,
    run_child,
    start_nginx,
    stop,
    wait_listening,
)
from pywebbench.meter.sampler import trees_cpu_s

#: The catalogue's raw ASGI app (its ``/hello`` workload), run by hypercorn from its folder.
APPS = Path(pywebbench.__file__).parent / "inside" / "apps"

#: nginx mode: (minimum requests/s ratio, maximum CPU-per-request ratio) to h2load.
TARGET_NGINX = (1.3, 0.75)
#: hypercorn mode: the largest relative difference of requests/s from h2load's.
TARGET_AGREE = 0.05
IOS = ("epoll", "uring")


#: nginx's answers (``--response``): hello, and an empty 204 (one HEADERS frame, no DATA)
ANSWERS = {"hello": HELLO, "empty": "204"}


def start_server(
    kind: str, prefix: Path, port: int, cpu: int, response: str = "hello"
) -> subprocess.Popen[bytes]:
    """nginx (h2c, answering ``response``) or hypercorn (the catalogue's raw ASGI app) on
    ``port``, pinned to ``cpu``."""
    if kind == "nginx":
        return start_nginx(prefix, port, cpu, http2=True, answer=ANSWERS[response])
    # hypercorn closes an HTTP/2 connection after keep_alive_max_requests (1,000) and answers
    # the client's frames in flight with GOAWAY PROTOCOL_ERROR: raised, so that neither
    # generator's figures carry those errors and reconnects.
    config = prefix / "hypercorn.toml"
    config.write_text("keep_alive_max_requests = 1000000000\n")
    hypercorn = str(Path(sys.executable).parent / "hypercorn")
    argv = [hypercorn, "--bind", f"127.0.0.1:{port}", "--log-level", "warning",
            "--config", str(config), "pwb_raw_asgi:app"]  # fmt: skip
    p = subprocess.Popen(
        ["taskset", "-c", str(cpu), *argv],
        cwd=APPS,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_listening(p, port, kind, timeout=15)
    return p


def run_h2load(
    h2load: str, url: str, cpu: int, conns: int, streams: int, duration: float
) -> tuple[float, float, float]:
    """One h2load run; (rps, CPU-us per request, system share of its CPU)."""
    # --header-table-size=0: the SETTINGS_HEADER_TABLE_SIZE pywebbench sends, so the server
    # encodes its responses for both clients alike.
    argv = ["taskset", "-c", str(cpu), h2load, "-t1", f"-c{conns}", f"-m{streams}",
            f"-D{max(1, round(duration))}", "--header-table-size=0", url]  # fmt: skip
    out, err, cpu_s, rc, sys_s = run_child(argv)
    m = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out)
    n = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if rc != 0 or not m or not n or int(n.group(2)) == 0:
        sys.exit(f"h2load failed ({rc}):\n{out}\n{err}")
    if int(n.group(1)) != int(n.group(2)):
        print(f"  h2load: {int(n.group(1)) - int(n.group(2))} requests failed", flush=True)
    return float(m.group(1)), cpu_s * 1e6 / int(n.group(1)), sys_s / max(cpu_s, 1e-9)


def h2load_user_agent(h2load: str) -> str:
    """The user-agent h2load sends (``h2load nghttp2/1.52.0``): pywebbench sends the same, so
    that the server decodes the same request headers from both."""
    out = subprocess.run([h2load, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"nghttp2/[\w.]+", out)
    return f"h2load {m.group(0)}" if m else "h2load"


def run_pwb(
    url: str,
    cpu: int,
    conns: int,
    streams: int,
    duration: float | None,
    io: str,
    user_agent: str,
) -> tuple[dict[str, object], float, float]:
    """One ``pywebbench load --protocol h2c`` run: (result, process CPU s, system CPU s)."""
    code = "from pywebbench.commands.load import command; command()"
    bound = ["-d", str(duration)] if duration else ["-n", "1"]
    argv = [
        "taskset", "-c", str(cpu), sys.executable, "-c", code, url, "--protocol", "h2c",
        "--streams", str(streams), "-t", "1", "-c", str(conns), *bound, "--cpus", str(cpu),
        "--io", io, "-H", f"user-agent: {user_agent}", "-q", "--json", "-",
    ]  # fmt: skip
    out, err, cpu_s, rc, sys_s = run_child(argv)
    if rc != 0:
        sys.exit(f"pywebbench load failed ({rc}):\n{err}")
    d = json.loads(out)
    if d.get("io") != io:
        sys.exit(f"pywebbench load ran on {d.get('io')!r}, not {io!r}")
    return d, cpu_s, sys_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=["nginx", "hypercorn"], default="nginx")
    ap.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per run (10)")
    ap.add_argument("-r", "--rounds", type=int, default=3, help="rounds of each tool (3)")
    ap.add_argument("-c", "--connections", type=int, default=16, help="connections (16)")
    ap.add_argument("-m", "--streams", type=int, default=10, help="streams per connection (10)")
    ap.add_argument(
        "--response",
        choices=list(ANSWERS),
        default="hello",
        help="nginx's answer: hello (default), or empty: a 204, one HEADERS frame and no DATA "
        "(one frame a request instead of two), meant to take nginx out of the way (on the "
        "machine of docs/http2.md it was still 99%% busy)",
    )
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--generator-cpu", type=int, default=1)
    args = ap.parse_args(argv)
    if args.duration < 1 or args.rounds < 1:
        ap.error("--duration must be >= 1 and --rounds >= 1")
    if args.server != "nginx" and args.response != "hello":
        ap.error("--response is nginx's: hypercorn serves the catalogue's hello")
    h2load = ensure_tool("h2load", "nghttp2-client")
    agent = h2load_user_agent(h2load)
    port = free_port()
    url = f"http://127.0.0.1:{port}/" + ("hello" if args.server == "hypercorn" else "")
    gen, c, m = args.generator_cpu, args.connections, args.streams
    names = ["h2load", *(f"pywebbench-{io}" for io in IOS)]
    rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    server_busy: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pwb-h2-") as tmp:
        server = start_server(args.server, Path(tmp), port, args.server_cpu, args.response)
        try:
            print(f"{args.server} (h2c, {args.response}) on core {args.server_cpu} at {url}; "
                  f"generators on core {gen}, -c {c} -m {m}, {args.duration:g} s, "
                  f"{args.rounds} rounds")  # fmt: skip
            run_h2load(h2load, url, gen, c, m, 1)  # warm-up of the server
            startups = [run_pwb(url, gen, 1, 1, None, "epoll", agent) for _ in range(3)]
            _, startup, startup_sys = min(startups, key=lambda s: s[1])
            print(f"pywebbench start-up CPU (1 request, subtracted): {startup * 1000:.0f} ms")
            for i in range(args.rounds):
                # The server's share of its core while h2load ran (h2load starts in
                # milliseconds, so the wall time is the load's): near 100%, the server
                # and not h2load set h2load's requests/s.
                server_s, wall = trees_cpu_s([server.pid]), time.monotonic()
                rps, cpr, kernel = run_h2load(h2load, url, gen, c, m, args.duration)
                busy = (trees_cpu_s([server.pid]) - server_s) / (time.monotonic() - wall)
                server_busy.append(busy)
                rows["h2load"].append((rps, cpr, kernel))
                print(f"round {i + 1}  {'h2load':<18}{rps:>10,.0f} req/s  {cpr:6.2f} "
                      f"CPU-us/req  kernel {kernel:4.0%} (h2load busy {rps * cpr / 1e6:.0%}, "
                      f"{args.server} busy {busy:.0%})", flush=True)  # fmt: skip
                for io in IOS:
                    d, cpu_s, sys_s = run_pwb(url, gen, c, m, args.duration, io, agent)
                    load_cpu = max(cpu_s - startup, 1e-9)
                    requests = max(1, int(d["requests"]))  # type: ignore[call-overload]
                    cpr = load_cpu * 1e6 / requests
                    kernel = min(max(sys_s - startup_sys, 0.0) / load_cpu, 1.0)
                    rps = float(d["rps"])  # type: ignore[arg-type]
                    rows[f"pywebbench-{io}"].append((rps, cpr, kernel))
                    busy = d["generator"]["threads"][0]["busy"]  # type: ignore[index]
                    print(f"round {i + 1}  {'pywebbench-' + io:<18}{rps:>10,.0f} req/s  "
                          f"{cpr:6.2f} CPU-us/req  kernel {kernel:4.0%} (busy {busy:.0%}; "
                          f"errors {d['errors']})", flush=True)  # fmt: skip
                    for cls, e in d["error_classes"].items():  # type: ignore[attr-defined]
                        print(f"  {cls}: {e['count']}, e.g. {e['example']}", flush=True)
        finally:
            stop(server)
    print()
    med = {name: tuple(statistics.median(r[k] for r in v) for k in range(3))
           for name, v in rows.items()}  # fmt: skip
    for name, (rps, cpr, kernel) in med.items():
        print(f"median {name:<18}{rps:>10,.0f} req/s  {cpr:6.2f} CPU-us/req  kernel {kernel:4.0%}")
    print(f"{args.server} busy while h2load ran: {statistics.median(server_busy):.0%} of its core "
          "(median): at ~100% the server, not h2load, set h2load's requests/s")  # fmt: skip
    for io in IOS:
        name = f"pywebbench-{io}"
        # Ratios within each round (the rounds alternate, so each pair saw the same machine),
        # then their median: steadier than a ratio of medians on a machine whose load moves.
        pairs = list(zip(rows[name], rows["h2load"], strict=True))
        rps_ratio = statistics.median(a[0] / b[0] for a, b in pairs)
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in pairs)
        if args.server == "nginx":
            min_rps, max_cpu = TARGET_NGINX
            ok_rps = "ok" if rps_ratio >= min_rps else "BELOW TARGET"
            ok_cpu = "ok" if cpu_ratio <= max_cpu else "ABOVE TARGET"
            print(f"{name} / h2load: requests/s {rps_ratio:.2f}x (target >= {min_rps}: "
                  f"{ok_rps}), CPU per request {cpu_ratio:.2f}x (target <= {max_cpu}: "
                  f"{ok_cpu})")  # fmt: skip
        else:
            ok = "ok" if abs(rps_ratio - 1) <= TARGET_AGREE else "DISAGREE"
            print(f"{name} / h2load: requests/s {rps_ratio:.3f}x (agree within "
                  f"{TARGET_AGREE:.0%}: {ok})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
