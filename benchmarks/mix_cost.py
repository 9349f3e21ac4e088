"""What does a traffic mix cost the load engine? (issue 53)

The engine's CPU per request (``generator.cpu_us_per_request``: the generator thread's CPU
time over its completed requests) with a 20-entry mix against the same with a single URL,
against the reference server (``taskset -c 0``; the engine's thread pinned to core 1),
closed loop, ``--connections`` (16) keep-alive connections for ``--duration`` (3 s) each,
in ``--rounds`` (5) alternating rounds (the order of the two swapped every round). The
mix's entries all ask for ``/hello`` (with a query, and headers, of their own) so the
responses are the same and the comparison is of the engine's work alone: drawing an entry
(one random number, one table look-up) and copying its bytes into the connection's write
buffer. Target (issue 53): the ratio of the medians within 10%.

Then ``--requests`` (10,000) requests of the mix, and each endpoint's share of the requests
sent beside its weight (target: within 1 percentage point).

    python benchmarks/mix_cost.py            # about 40 s
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pywebbench.catalogue.mix import MixEntry
from pywebbench.load import LoadResult, LoadSpec, run_load

PWB = str(Path(sys.executable).parent / "pywebbench")


def mix20() -> list[MixEntry]:
    """20 entries over 20 endpoints, weights 1..20 (shares 0.5% to 9.5%), each with a query
    and a header of its own, every one answered with the same ``Hello, World!``."""
    return [
        MixEntry(
            name=f"GET /hello?item={k}",
            weight=k,
            path=f"/hello?item={k}&sort=name",
            headers=[("X-Entry", str(k))],
            expect_status=[200],
        )
        for k in range(1, 21)
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def one(url: str, mix: list[MixEntry] | None, args: argparse.Namespace) -> LoadResult:
    spec = LoadSpec(
        url=url + ("" if mix else "/hello"),
        mix=mix or [],
        connections=args.connections,
        duration_s=args.duration,
        cpus=[1],
        expect_status=[] if mix else [200],
        io=args.io,
    )
    r = run_load(spec)
    if r.errors:
        raise SystemExit(f"errors in a run: {r.error_classes}")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--io", choices=["auto", "epoll", "uring"], default="auto")
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen(
        ["taskset", "-c", "0", PWB, "refserver", "--port", str(port), "--cpus", "0"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()
        if "listening" not in line:
            raise SystemExit(f"the reference server did not start: {line}")
        url = f"http://127.0.0.1:{port}"
        mix = mix20()
        one(url, None, args)  # a warm-up of both paths, not counted
        one(url, mix, args)
        single: list[float] = []
        mixed: list[float] = []
        print(f"I/O backend: {one(url, None, args).io}")
        print(f"{'round':>5} {'order':<12} {'single us/req':>13} {'mix us/req':>10} {'ratio':>6}")
        for i in range(args.rounds):
            order = ("single", "mix") if i % 2 == 0 else ("mix", "single")
            got: dict[str, LoadResult] = {}
            for what in order:
                got[what] = one(url, mix if what == "mix" else None, args)
            a = got["single"].generator.cpu_us_per_request
            b = got["mix"].generator.cpu_us_per_request
            single.append(a)
            mixed.append(b)
            print(
                f"{i + 1:>5} {'/'.join(order):<12} {a:>13.3f} {b:>10.3f} {b / a:>6.3f}   "
                f"({got['single'].rps:,.0f} and {got['mix'].rps:,.0f} req/s)"
            )
        ratio = statistics.median(mixed) / statistics.median(single)
        cost_ok = ratio <= 1.10
        print(
            f"median CPU per request: single {statistics.median(single):.3f} us, 20-entry mix "
            f"{statistics.median(mixed):.3f} us; ratio {ratio:.3f} (target <= 1.10): "
            f"{'PASS' if cost_ok else 'FAIL'}"
        )

        spec = LoadSpec(url=url, mix=mix, connections=args.connections, cpus=[1])
        r = run_load(spec.replace(max_requests=args.requests))
        worst = 0.0
        for e in r.endpoints:
            worst = max(worst, abs(100 * (e.requests / r.requests - e.weight_share)))
        share_ok = worst <= 1.0 and r.requests == args.requests
        print(
            f"{r.requests:,} requests of the mix (seed {spec.seed}): largest gap between an "
            f"endpoint's share of the requests and its weight {worst:.3f} pp (target <= 1): "
            f"{'PASS' if share_ok else 'FAIL'}"
        )
        print(
            json.dumps(
                {
                    "single_us": [round(x, 3) for x in single],
                    "mix_us": [round(x, 3) for x in mixed],
                    "ratio_of_medians": round(ratio, 4),
                    "worst_share_pp": round(worst, 4),
                }
            )
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        time.sleep(0.1)


if __name__ == "__main__":
    main()
