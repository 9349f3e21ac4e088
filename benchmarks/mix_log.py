"""Does ``pywebbench mix from-log`` recover a log's endpoints and weights? (issue 53)

Generates an nginx ``combined`` access log of ``--lines`` lines (20,000) over httpbin's
routes with known proportions over 11 endpoints: ids, UUIDs and hex hashes in paths, query
strings, a 5% share of 404s, HEAD requests, plus POSTs (which ``from-log`` drops as unsafe)
and unreadable lines. Each endpoint's count is exact (its share times the replayable
lines), and the lines are shuffled with a seed. Then runs ``pywebbench mix from-log`` on it
and checks that every endpoint comes back with its weight within 0.5 percentage points.

With ``--httpbin`` it also serves httpbin (the third-party app on PyPI, not written here)
with gunicorn (sync worker, core 0) from a virtualenv of its own (built with uv under
``$PWB_CACHE_DIR/bench/httpbin``, or ``--venv``), loads it with the recovered mix for
``--requests`` (10,000) requests on core 1, and reports each endpoint's share of the
requests sent beside its weight (the issue's target: within 1 percentage point).

    python benchmarks/mix_log.py --httpbin          # about 30 s once httpbin is installed
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pywebbench.catalogue.mix import load_mix
from pywebbench.load import LoadSpec, run_load
from pywebbench.load.mix import verify_endpoints
from pywebbench.provision.venv import cache_dir

PWB = str(Path(sys.executable).parent / "pywebbench")

#: (endpoint as from-log names it, share in percent, a function of k making the k-th
#: request's method, target and status). The shares of the replayable requests sum to 100.
ENDPOINTS: list[tuple[str, float, object]] = [
    ("GET /get", 20.0, lambda k: ("GET", f"/get?page={k % 9}&sort=name", 200)),
    ("GET /anything/items/{id}", 16.0, lambda k: ("GET", f"/anything/items/{k % 500}", 200)),
    ("GET /anything/users/{uuid}", 10.0, lambda k: ("GET", f"/anything/users/{_uuid(k)}", 200)),
    ("GET /etag/{hash}", 8.0, lambda k: ("GET", f"/etag/{_hash(k)}", 200)),
    ("GET /bytes/{id}", 9.0, lambda k: ("GET", f"/bytes/{64 << (k % 4)}", 200)),
    ("GET /json", 8.0, lambda k: ("GET", "/json", 200)),
    ("GET /uuid", 7.0, lambda k: ("GET", "/uuid", 200)),
    ("GET /headers", 6.0, lambda k: ("GET", "/headers", 200)),
    ("GET /html", 6.0, lambda k: ("GET", "/html", 200)),
    ("GET /old-shop/{id}", 5.0, lambda k: ("GET", f"/old-shop/{k % 50}", 404)),
    ("HEAD /get", 5.0, lambda k: ("HEAD", "/get", 200)),
]
#: Lines beside the replayable ones, as shares of all lines: dropped POSTs, unreadable.
POST_SHARE = 0.04
UNREADABLE_SHARE = 0.001
#: The issue's tolerance for recovered weights (percentage points).
TOLERANCE_PP = 0.5


def _uuid(k: int) -> str:
    return f"{k:08x}-1234-4abc-8def-{k * 7919:012x}"[-36:]


def _hash(k: int) -> str:
    """An ETag-like hex hash (32 characters; one with no letter, which would read as an id,
    is about as likely as (10/16)**32, 3e-7)."""
    return hashlib.md5(str(k).encode()).hexdigest()


def log_line(method: str, target: str, status: int, rng: random.Random) -> str:
    """One nginx combined line."""
    ip = f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    size = 0 if status == 404 else rng.randrange(100, 5000)
    agent = rng.choice(["Mozilla/5.0 (X11; Linux x86_64)", "curl/8.5.0", "python-requests/2.32"])
    return (
        f"{ip} - - [05/Dec/2026:10:{rng.randrange(60):02d}:{rng.randrange(60):02d} +0000] "
        f'"{method} {target} HTTP/1.1" {status} {size} "-" "{agent}"'
    )


def generate(lines: int, seed: int) -> tuple[list[str], dict[str, float]]:
    """The log's lines (shuffled) and each endpoint's exact share of the replayable ones."""
    rng = random.Random(seed)
    replayable = round(lines * (1 - POST_SHARE - UNREADABLE_SHARE))
    counts = [round(replayable * share / 100) for _, share, _ in ENDPOINTS]
    counts[0] += replayable - sum(counts)
    out: list[str] = []
    for (_name, _, make), n in zip(ENDPOINTS, counts, strict=True):
        for k in range(n):
            method, target, status = make(k)  # type: ignore[operator]
            out.append(log_line(method, target, status, rng))
    for k in range(round(lines * POST_SHARE)):
        out.append(log_line("POST", f"/anything/items/{k % 500}", 201, rng))
    while len(out) < lines:
        out.append("2026/12/05 10:00:00 [error] 12#12: *1 upstream timed out")
    rng.shuffle(out)
    truth = {name: 100 * n / replayable for (name, _, _), n in zip(ENDPOINTS, counts, strict=True)}
    return out, truth


def httpbin_venv(venv: Path | None) -> Path:
    """A virtualenv with httpbin and gunicorn from PyPI (built once, with uv)."""
    venv = venv or cache_dir() / "bench" / "httpbin"
    python = venv / "bin" / "python"
    if not (venv / "bin" / "gunicorn").exists():
        uv = [sys.executable, "-m", "uv"]
        subprocess.run([*uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        subprocess.run(
            [*uv, "pip", "install", "-q", "--python", str(python), "httpbin", "gunicorn"],
            check=True,
        )
    return venv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def load_httpbin(mix_file: Path, venv: Path, requests: int) -> None:
    """Serve httpbin (gunicorn sync, core 0), load it with the mix (core 1), print shares."""
    port = free_port()
    server = subprocess.Popen(
        ["taskset", "-c", "0", str(venv / "bin" / "gunicorn"), "-w", "2"]
        + ["-b", f"127.0.0.1:{port}", "--log-level", "warning", "httpbin:app"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    err = server.stderr.read().decode() if server.stderr else ""
                    raise SystemExit(f"httpbin did not start: {err[-500:]}") from None
                time.sleep(0.1)
        spec = LoadSpec(
            url=f"http://127.0.0.1:{port}",
            mix=load_mix(mix_file),
            connections=4,
            max_requests=requests,
            cpus=[1],
            timeout_s=10,
        )
        problems = verify_endpoints(spec)
        print(f"verification against httpbin: {'; '.join(problems) or 'every endpoint passed'}")
        r = run_load(spec)
        print(
            f"\nhttpbin (gunicorn sync x2, core 0), {r.requests:,} requests, {r.rps:,.0f} req/s, "
            f"{r.errors} errors"
        )
        print(f"  {'endpoint':<28} {'weight':>7} {'sent':>7} {'diff':>6}  p50")
        worst = 0.0
        for e in r.endpoints:
            sent = 100 * e.requests / max(r.requests, 1)
            diff = sent - 100 * e.weight_share
            worst = max(worst, abs(diff))
            print(
                f"  {e.name:<28} {100 * e.weight_share:>6.2f}% {sent:>6.2f}% {diff:>+5.2f}  "
                f"{e.latency.summary.p50 / 1000:.2f} ms  statuses {dict(e.status_counts)}"
            )
        verdict = "PASS" if worst <= 1.0 else "FAIL"
        print(f"largest share error {worst:.2f} pp (target <= 1 pp): {verdict}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=53)
    ap.add_argument("--httpbin", action="store_true", help="also load httpbin with the mix")
    ap.add_argument("--venv", type=Path, default=None, help="httpbin's virtualenv")
    ap.add_argument("--requests", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pwb-mix-log-") as tmp:
        log = Path(tmp) / "access.log"
        lines, truth = generate(args.lines, args.seed)
        log.write_text("\n".join(lines) + "\n")
        mix_file = Path(tmp) / "mix.toml"
        t0 = time.perf_counter()
        done = subprocess.run(
            [PWB, "mix", "from-log", str(log), "-o", str(mix_file)],
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - t0
        print(done.stdout, end="")
        if done.returncode != 0:
            raise SystemExit(f"from-log failed ({done.returncode}): {done.stderr}")
        got: dict[str, float] = {}
        for e in load_mix(mix_file):
            got[e.name] = got.get(e.name, 0.0) + e.weight
        print(f"\n{len(lines):,} lines read in {took:.2f} s (the command, start-up included)")
        print(f"  {'endpoint':<28} {'truth':>7} {'weight':>7} {'diff':>6}")
        worst = 0.0
        missing = [name for name in truth if name not in got]
        for name, share in truth.items():
            w = got.get(name, float("nan"))
            worst = max(worst, abs(w - share))
            print(f"  {name:<28} {share:>6.2f}% {w:>6.2f}% {w - share:>+5.2f}")
        extra = sorted(set(got) - set(truth))
        ok = not missing and not extra and worst <= TOLERANCE_PP
        print(
            f"{len(truth)} endpoints, missing {missing or 'none'}, unexpected {extra or 'none'}, "
            f"largest weight error {worst:.3f} pp (target <= {TOLERANCE_PP}): "
            f"{'PASS' if ok else 'FAIL'}"
        )
        print(json.dumps({"lines": len(lines), "worst_pp": round(worst, 4), "pass": ok}))
        if args.httpbin:
            load_httpbin(mix_file, httpbin_venv(args.venv), args.requests)


if __name__ == "__main__":
    main()
