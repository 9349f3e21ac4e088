"""A study of a real app under a traffic mix, and compare naming the endpoint made slower
(issue 53's acceptance; docs/mix.md).

httpbin (the third-party app on PyPI, not written here) is a bring-your-own app of two
studies on gunicorn-gthread and granian-wsgi, loaded with the mix ``pywebbench mix
from-log`` recovers from the nginx log benchmarks/mix_log.py generates (11 endpoints, ids,
UUIDs and hashes in paths, query strings, a 404 share). Both studies serve httpbin through a
module of the same name in a project folder of their own; in the second, a WSGI middleware
burns CPU on one route (``SLOWED``) before httpbin answers it. Then:

- the first study's report must show the per-endpoint table (every endpoint of the mix);
- ``pywebbench compare FIRST SECOND`` must name ``SLOWED`` as the endpoint whose latency
  grew most, in every cell (both servers).

    python benchmarks/mix_study.py                  # 2-4 min (the first time: installs)

The studies run on the running CPython in the default design (interleaved groups, two
processes a stack) with a short group budget, at 4 connections (``-c``); the slowed route
sums 100,000 squares per request (``--burn``, several milliseconds). In a closed loop on one
server core every request also waits for those ahead of it, on every endpoint alike: the
more connections, the more that shared wait dilutes an endpoint's own ratio (at 16
connections and 30,000 squares the slowed endpoint still grew most, 2.45x against the next
2.35x on granian). The verdict is one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pywebbench.catalogue.interpreters import default_interpreters

sys.path.insert(0, str(Path(__file__).parent))
from mix_log import generate  # noqa: E402  (the log generator of the from-log benchmark)

PWB = str(Path(sys.executable).parent / "pywebbench")
#: The running CPython only (a JIT's groups take minutes more).
CPYTHON = default_interpreters()[0].name
SERVERS = "gunicorn-gthread,granian-wsgi"
#: The route given extra CPU work in the second study, and the endpoint from-log names it.
SLOWED = "/uuid"
SLOWED_ENDPOINT = "GET /uuid"

#: The app module of both studies: httpbin, with CPU burnt on SLOWED when BURN > 0.
APP = """
import httpbin

BURN = {burn}


def app(environ, start_response):
    if BURN and environ.get("PATH_INFO") == "{slowed}":
        sum(i * i for i in range(BURN))  # CPU work on this route only
    return httpbin.app(environ, start_response)
"""


def pwb(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([PWB, *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(
            f"pywebbench {' '.join(args[:2])} failed ({done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


def study(root: Path, name: str, burn: int, mix_file: Path, results: Path, args: Any) -> str:
    """One study of httpbin (CPU burnt on SLOWED when ``burn``) with the mix; its run id."""
    project = root / name
    project.mkdir()
    (project / "mixbench.py").write_text(APP.format(burn=burn, slowed=SLOWED))
    requirements = root / "requirements.txt"
    requirements.write_text("httpbin\n")
    t0 = time.monotonic()
    done = pwb(
        "run", "--app", "mixbench:app", "--interface", "wsgi", "--project", str(project),
        "--requirements", str(requirements), "--mix", str(mix_file), "--server", SERVERS,
        "--python", CPYTHON, "-c", str(args.connections), "--group-budget", args.group_budget,
        "--no-report",
        "--results-dir", str(results),
    )  # fmt: skip
    run_id = next(
        line.split()[1].rstrip(":")
        for line in done.stdout.splitlines()
        if line.startswith("run ") and ": completed" in line
    )
    print(f"study {name} (burn {burn}): run {run_id}, {time.monotonic() - t0:.0f} s")
    return run_id


def endpoints_section(markdown: str) -> str:
    """The report's "Endpoints of the mix" section."""
    start = markdown.index("## Endpoints of the mix")
    end = markdown.find("\n## ", start + 1)
    rest = markdown[start:end] if end > 0 else markdown[start:]
    return rest.split("\nReq/s: ")[0].rstrip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--burn", type=int, default=100_000, help="squares summed per slowed request")
    ap.add_argument(
        "-c",
        "--connections",
        type=int,
        default=4,
        help="connections (a closed loop on one core: each request waits for the ones "
        "ahead of it, on every endpoint alike; the fewer, the more an endpoint's own time "
        "shows in its latency)",
    )
    ap.add_argument("--group-budget", default="20", help="seconds of load per group")
    ap.add_argument("--keep", type=Path, default=None, help="keep the results here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pwb-mix-study-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        log = root / "access.log"
        lines, truth = generate(args.lines, 53)
        log.write_text("\n".join(lines) + "\n")
        mix_file = root / "mix.toml"
        pwb("mix", "from-log", str(log), "-o", str(mix_file))
        print(f"mix from a {len(lines):,}-line nginx log: {len(truth)} endpoints")
        results = root / "results"
        base = study(root, "plain", 0, mix_file, results, args)
        slowed = study(root, "slowed", args.burn, mix_file, results, args)
        reports = root / "reports"
        pwb("report", base, "--results-dir", str(results), "-o", str(reports))
        markdown = next(reports.glob(f"report-{base}*.md")).read_text()
        section = endpoints_section(markdown)
        print("\n" + section + "\n")
        tables = section.count("| endpoint | weight | share sent |")
        shown = all(f"| {name} |" in section for name in truth)
        cmp = json.loads(
            pwb("compare", base, slowed, "--results-dir", str(results), "--format", "json").stdout
        )
        named = {}
        for cell in cmp["cells"]:
            top = cell["endpoint_grew_most"]
            named[cell["stack"]] = top["name"] if top else None
            ratios = {e["name"]: e["p50"]["ratio"] for e in cell["endpoints"]}
            runner_up = max(r for n, r in ratios.items() if n != SLOWED_ENDPOINT)
            print(
                f"compare {cell['stack']}: grew most {named[cell['stack']]} (p50 "
                f"{ratios.get(SLOWED_ENDPOINT, float('nan')):.2f}x; the next "
                f"{runner_up:.2f}x); req/s {cell['rps']['ratio']:.2f}x, verdict {cell['verdict']}"
            )
        print(pwb("compare", base, slowed, "--results-dir", str(results)).stdout[-1500:])
        ok = tables == 2 and shown and named and all(v == SLOWED_ENDPOINT for v in named.values())
        print(
            json.dumps(
                {
                    "endpoint_tables": tables,
                    "every_endpoint_shown": shown,
                    "named": named,
                    "pass": bool(ok),
                }
            )
        )
        if not ok:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
