"""The knee (the highest rate whose p99 meets an SLO, docs/slo.md) against an independent
open-loop tool on the same stack, the same machine, in alternating rounds: oha (crates.io, by
default) or vegeta (the Go module proxy).

Each round, in random order:

- **pywebbench**: ``pywebbench run --python cpython3.11 --server gunicorn-sync --framework
  raw-wsgi --workload hello --slo p99=20ms --replicates 1`` (its own fresh server on core 0,
  the engine on core 1); the knee is read from its store;
- **the peer**: the same stack started by pywebbench's launcher on core 0 (same catalogue
  command, same venv), after a 3 s closed loop of each tool, then the same search as the
  knee's (``pywebbench.run.knee.search_knee``: bracket from the closed-loop rate, bisect to
  5%), each probe a window of the peer pinned to core 1 after a 1 s warm-up at that rate
  (``slo_warmup_s``), judged by the knee's own verdict (``probe_verdict``: no errors, p99
  within the SLO, 90% of the rate achieved), 3 probes per rate, each window as long as the
  knee's (``SearchPlan.probe_s``: 100 samples beyond the percentile). Each request's latency
  counts from when it was due, not from when it was sent: oha's ``--latency-correction``;
  for vegeta, the same correction computed here from its per-request records (``Vegeta``).

gunicorn's sync worker closes the connection after every response, so both tools open a
new connection per request when it is due, over the same N connections (``--connections``,
the knee's default 64; docs/slo.md). The script first prints each tool's spacing of sends
at 2,000 req/s, and after each round each tool's closed-loop rate over those connections on
the same server: what each can drive through it. A round whose search finds no knee (either
tool's: no rate met the SLO on a noisy hour, or the search's budget ended) is shown as "none"
and the run goes on; the ratio is of the medians of the knees found, and there is none if a
tool found none.

    python benchmarks/knee_vs_peer.py                  # oha, 3 rounds, ~15 min
    python benchmarks/knee_vs_peer.py --peer vegeta
    python benchmarks/knee_vs_peer.py --workload cpu --workers 2 --slo p99=50ms

A missing peer is installed: ``cargo install oha --locked``, ``go install
github.com/tsenart/vegeta/v12@v12.13.0``. On this machine vegeta is not a fair peer for this
stack: with a new connection per request its own work per request is about the server's, so
its knee is the generator's (docs/slo.md).
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")
STACK = ("gunicorn-sync", "raw-wsgi")


def _installed(name: str, bindir: Path, install: list[str]) -> str:
    """``name`` on PATH or in ``bindir``, installed with ``install`` when missing."""
    found = shutil.which(name) or shutil.which(name, path=str(bindir))
    if found:
        return found
    print(f"installing {name} ({' '.join(install)}) ...", file=sys.stderr)
    subprocess.run(install, check=True, timeout=1800)
    found = shutil.which(name, path=str(bindir))
    if not found:
        sys.exit(f"{' '.join(install)} did not leave a {name} binary in {bindir}")
    return found


def _quantile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (sorted here)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Oha:
    """oha (crates.io): ``-q`` paces sends, ``--latency-correction`` measures each request
    from when it was due. Its sends leave in groups on a timer of about 1.2 ms (docs/slo.md)."""

    name = "oha"

    def __init__(self) -> None:
        self.path = _installed(
            "oha", Path.home() / ".cargo/bin", ["cargo", "install", "oha", "--locked", "--quiet"]
        )

    def version(self) -> str:
        return subprocess.run([self.path, "--version"], capture_output=True, text=True).stdout

    def _json(self, url: str, flags: list[str], seconds: float, conns: int) -> dict[str, Any]:
        cmd = ["taskset", "-c", "1", self.path, "--no-tui", "--output-format", "json",
               *flags, "-z", f"{seconds:.2f}s", "-w", "-c", str(conns),
               "--disable-keepalive", url]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=True)
        out: dict[str, Any] = json.loads(proc.stdout)
        return out

    def closed(self, url: str, seconds: float, conns: int) -> float:
        """Requests/s of a closed loop over ``conns`` connections."""
        return float(self._json(url, [], seconds, conns)["summary"]["requestsPerSec"])

    def probe(
        self, url: str, rate: float, seconds: float, conns: int, label: str = "p99"
    ) -> dict[str, float]:
        """One open-loop window on core 1: achieved rate, the ``label`` percentile (p99,
        p95, ...) and p50 in us, errors."""
        out = self._json(url, ["-q", f"{rate:.1f}", "--latency-correction"], seconds, conns)
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

    def paced(self, url: str, rate: float, seconds: float, conns: int) -> None:
        """Send at ``rate`` for ``seconds``, results discarded."""
        self._json(url, ["-q", f"{rate:.0f}", "--latency-correction"], seconds, conns)


class Vegeta:
    """vegeta (the Go module proxy, pinned): a constant pacer that sleeps until each request
    is due, ``-workers`` = ``-max-workers`` = the connections. vegeta times a request from when
    a worker takes it, so a request that waited for a free worker would read fast; the
    latency is corrected here as wrk2 does: request *k* (vegeta's sequence number) was due at
    ``began + (k + 1) / rate``, and ``began`` is the earliest ``sent_k - (k + 1) / rate``
    (vegeta never sends early)."""

    name = "vegeta"
    module = "github.com/tsenart/vegeta/v12@v12.13.0"

    def __init__(self) -> None:
        gobin = Path(os.environ.get("GOBIN") or Path.home() / "go/bin")
        self.path = _installed("vegeta", gobin, ["go", "install", self.module])

    def version(self) -> str:
        out = subprocess.run([self.path, "-version"], capture_output=True, text=True).stdout
        return "vegeta " + " ".join(out.split())

    def _attack(self, url: str, rate: float, seconds: float, conns: int) -> list[list[str]]:
        """vegeta's results as CSV rows (timestamp ns, code, latency ns, ..., error, ..., seq)."""
        with tempfile.TemporaryDirectory(prefix="pwb-vegeta-") as tmp:
            out = Path(tmp) / "results.bin"
            cmd = ["taskset", "-c", "1", self.path, "attack", f"-rate={round(rate)}/1s",
                   f"-duration={seconds:.3f}s", f"-workers={conns}", f"-max-workers={conns}",
                   "-keepalive=false", "-timeout=30s", f"-output={out}"]  # fmt: skip
            subprocess.run(
                cmd, input=f"GET {url}\n", capture_output=True, text=True,
                timeout=seconds + 60, check=True,
            )  # fmt: skip
            csv_text = subprocess.run(
                [self.path, "encode", "-to", "csv", str(out)],
                capture_output=True, text=True, timeout=60, check=True,
            ).stdout  # fmt: skip
        return list(csv.reader(io.StringIO(csv_text)))

    def closed(self, url: str, seconds: float, conns: int) -> float:
        """Requests/s of a closed loop over ``conns`` workers (``-rate=0``)."""
        rows = self._attack(url, 0, seconds, conns)
        return sum(row[1].startswith("2") for row in rows) / seconds

    def probe(
        self, url: str, rate: float, seconds: float, conns: int, label: str = "p99"
    ) -> dict[str, float]:
        """One open-loop window on core 1: achieved rate, the ``label`` percentile and p50 of
        the corrected latency in us (class doc), errors."""
        rows = self._attack(url, rate, seconds, conns)
        if not rows:
            sys.exit(f"vegeta sent nothing at {rate:.0f}/s")
        interval_ns = 1e9 / round(rate)
        due = [(int(r[8]) + 1) * interval_ns for r in rows]  # after began
        began = min(int(r[0]) - d for r, d in zip(rows, due, strict=True))
        latency_us = [
            (int(r[0]) + int(r[2]) - began - d) / 1000 for r, d in zip(rows, due, strict=True)
        ]
        ok = [r[1].startswith("2") and not r[5] for r in rows]
        errors = len(rows) - sum(ok)
        if errors:
            kinds = sorted({r[5] or r[1] for r, good in zip(rows, ok, strict=True) if not good})
            print(f"  vegeta errors: {errors} ({'; '.join(kinds)[:300]})", file=sys.stderr)
        return {
            "achieved": sum(ok) / seconds,
            "latency_us": _quantile(latency_us, float(label[1:]) / 100),
            "p50_us": _quantile(latency_us, 0.5),
            "errors": float(errors),
        }

    def paced(self, url: str, rate: float, seconds: float, conns: int) -> None:
        """Send at ``rate`` for ``seconds``, results discarded."""
        self._attack(url, rate, seconds, conns)


PEERS = {"vegeta": Vegeta, "oha": Oha}
Peer = Oha | Vegeta


def pywebbench_knee(
    slo: str, workload: str, workers: int, conns: int, results: Path
) -> float | None:
    """One single-stack study with the knee search; its knee in req/s, None when its search
    found no rate within the SLO."""
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
    if row is None:
        sys.exit("the pywebbench run stored no knee search")
    return None if row[0] is None else float(row[0])


def peer_knee(
    peer: Peer, slo_text: str, workload: str, workers: int, conns: int, log_dir: Path
) -> tuple[float | None, float, float]:
    """The knee of a fresh server of the stack, each probe a window of ``peer`` (module doc;
    None when the search found no rate within the SLO), and the closed-loop rates of
    pywebbench and of the peer over the same connections before it."""
    from pywebbench.catalogue.interpreters import default_interpreters
    from pywebbench.catalogue.stacks import plan
    from pywebbench.catalogue.workloads import get
    from pywebbench.launch import start_server
    from pywebbench.provision.venv import provision
    from pywebbench.run.knee import SearchPlan, probe_verdict, search_knee, start_rate
    from pywebbench.store import utcnow
    from pywebbench.store.knee_rows import KneeProbe
    from pywebbench.study.slo import parse_slo

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
        peer_closed_rps = peer.closed(url, 3.0, conns)
        print(f"  closed loop, {conns} connection(s): pywebbench {closed_rps:,.0f} req/s, "
              f"{peer.name} {peer_closed_rps:,.0f}", file=sys.stderr)  # fmt: skip
        search = SearchPlan(slo=slo, start_rps=start_rate([closed_rps]), budget_s=300.0)

        def probe(rate: float, phase: str) -> KneeProbe:
            peer.paced(url, rate, search.warmup_s, conns)  # the probe's warm-up
            window = search.probe_s(rate)
            got = peer.probe(url, rate, window, conns, slo.label)
            verdict = probe_verdict(
                slo, latency_us=got["latency_us"], errors=int(got["errors"]), offered=rate,
                achieved=got["achieved"],
            )  # fmt: skip
            print(f"  {peer.name} {phase:7} {rate:8.0f}/s: achieved {got['achieved']:8.0f}, "
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
    knee = None if result.knee_rps is None else float(result.knee_rps)
    return knee, closed_rps, peer_closed_rps


def arrival_gaps(peer: Peer, rate: float = 2000.0, conns: int = 64) -> dict[str, list[float]]:
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

    def ours() -> None:
        subprocess.run(
            [PYWEBBENCH, "load", "--no-keepalive", "-c", str(conns), "-d", "2", "--cpus", "1",
             "--rate", f"{rate:.0f}", "--json", os.devnull, url],
            capture_output=True, timeout=60, check=True,
        )  # fmt: skip

    threading.Thread(target=serve, daemon=True).start()
    senders: dict[str, Callable[[], None]] = {
        "pywebbench": ours,
        peer.name: lambda: peer.paced(url, rate, 2.0, conns),
    }
    gaps: dict[str, list[float]] = {}
    for tool, send in senders.items():
        stamps.clear()
        send()
        time.sleep(0.2)  # the server finishes what the tool left in its accept queue
        done = list(stamps)
        mid = done[len(done) // 4 : 3 * len(done) // 4]
        gaps[tool] = sorted((b - a) / 1000 for a, b in itertools.pairwise(mid))
    listener.close()
    return gaps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--peer", choices=sorted(PEERS), default="oha",
                    help="the independent open-loop tool (default %(default)s)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each tool (default 3)")
    ap.add_argument("--slo", default="p99=20ms", help="the SLO (default %(default)s)")
    ap.add_argument("--workload", default="hello", help="workload (default %(default)s)")
    ap.add_argument("--workers", type=int, default=1, help="gunicorn workers (default 1)")
    ap.add_argument("--connections", type=int, default=64, help="both tools' (default 64)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    peer: Peer = PEERS[args.peer]()
    for tool, gaps in arrival_gaps(peer).items():
        q = [gaps[round(p * (len(gaps) - 1))] for p in (0.1, 0.5, 0.9)]
        burst = sum(g < 100 for g in gaps) / len(gaps)
        print(f"{tool:10} sends at 2,000/s: gaps p10/p50/p90 {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f} us "
              f"(constant: 500); {burst:.0%} under 100 us")  # fmt: skip
    rng = random.Random(args.seed)
    tools = ["pywebbench", peer.name]
    # None: that round's search found no rate within the SLO (a noisy hour can do that to
    # either tool); it is reported, and the medians are of the knees found
    knees: dict[str, list[float | None]] = {tool: [] for tool in tools}
    closed: dict[str, list[float]] = {tool: [] for tool in tools}
    with tempfile.TemporaryDirectory(prefix="pwb-knee-peer-") as tmp:
        for k in range(args.rounds):
            order = list(tools)
            rng.shuffle(order)
            for tool in order:
                t0 = time.monotonic()
                if tool == "pywebbench":
                    knee = pywebbench_knee(
                        args.slo, args.workload, args.workers, args.connections,
                        Path(tmp) / f"run{k}",
                    )  # fmt: skip
                else:
                    knee, ours, theirs = peer_knee(
                        peer, args.slo, args.workload, args.workers, args.connections, Path(tmp)
                    )
                    closed["pywebbench"].append(ours)
                    closed[peer.name].append(theirs)
                knees[tool].append(knee)
                said = "no knee found" if knee is None else f"knee {knee:8.0f} req/s"
                print(f"round {k} {tool:10}: {said} ({time.monotonic() - t0:.0f} s)",
                      file=sys.stderr)  # fmt: skip
    print(f"stack: cpython3.11 {'/'.join(STACK)} {args.workload}, {args.workers} worker(s), "
          f"{args.connections} connections, SLO {args.slo}, server on core 0, load on core 1; "
          f"{peer.version().strip()}")  # fmt: skip
    found = {tool: [v for v in knees[tool] if v is not None] for tool in tools}
    for tool, values in knees.items():
        median = f"median {statistics.median(found[tool]):,.0f} req/s" if found[tool] else "none"
        shown = ", ".join("none" if v is None else f"{v:,.0f}" for v in values)
        print(f"{tool:10} knees: {shown}; {median}")
    if not all(found.values()):
        print("a tool found no knee in any round: no ratio", file=sys.stderr)
        return 1
    ratio = statistics.median(found["pywebbench"]) / statistics.median(found[peer.name])
    capacity = statistics.median(closed["pywebbench"]) / statistics.median(closed[peer.name])
    print(f"closed loop over the same connections, pywebbench / {peer.name}: {capacity:.3f} "
          f"(pywebbench {statistics.median(closed['pywebbench']):,.0f}, {peer.name} "
          f"{statistics.median(closed[peer.name]):,.0f} req/s)")  # fmt: skip
    print(f"pywebbench / {peer.name}: {ratio:.3f} (target: within 10%, 0.90-1.10)")
    return 0 if 0.9 <= ratio <= 1.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
