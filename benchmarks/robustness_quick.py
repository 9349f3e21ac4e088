"""Robustness of the quick profile's stacks under the default fault mix; prints a Markdown table.

For every available stack of the quick profile (servers x frameworks on the running CPython,
``hello`` workload): start the server pinned to CPU 0, measure the good clients (engine on
CPU 1) clean, then again with the fault mix running beside them, check the server still
answers, and score it (docs/faults.md). Provisioning is cached as for ``pywebbench run``.

    python benchmarks/robustness_quick.py                 # default mix, quick profile
    python benchmarks/robustness_quick.py --faults slowloris=64 --servers gunicorn-sync,uvicorn-h11
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pywebbench import _engine
from pywebbench.faults import (
    KINDS,
    FaultMixError,
    format_mix,
    measure_of,
    measure_robustness,
    parse_mix,
)


def good_load(url: str, seconds: float, connections: int) -> dict[str, Any]:
    """The well-behaved clients: a closed loop on CPU 1."""
    spec = {"url": url, "connections": connections, "duration_s": seconds, "timeout_s": 2.0,
            "cpus": [1]}  # fmt: skip
    return json.loads(_engine.run_load(json.dumps(spec)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--faults", default="default", help="fault mix (default: %(default)s)")
    ap.add_argument("--servers", help="comma-separated server names (default: the quick profile)")
    ap.add_argument("--frameworks", help="comma-separated frameworks (default: the quick profile)")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per load run")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    try:
        specs = parse_mix(args.faults)
    except FaultMixError as e:
        ap.error(f"--faults: {e}")

    from pywebbench.catalogue.interpreters import default_interpreters
    from pywebbench.catalogue.stacks import plan
    from pywebbench.launch import LaunchError, start_server
    from pywebbench.provision.venv import ProvisionError, provision
    from pywebbench.study.profiles import PROFILE_DATA

    quick = PROFILE_DATA["quick"]["matrix"]
    servers = args.servers.split(",") if args.servers else quick["servers"]
    frameworks = args.frameworks.split(",") if args.frameworks else quick["frameworks"]
    interp = [i for i in default_interpreters() if not i.is_pypy][:1]
    try:
        candidates = plan(interp, servers, frameworks, ["hello"])
    except (ValueError, KeyError, ImportError) as e:
        print(f"cannot resolve the quick profile's stacks: {e}", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    log_dir = Path(tempfile.mkdtemp(prefix="pwb-robustness-"))
    print(f"fault mix: {args.faults} ({len(specs)} kinds); logs in {log_dir}", file=sys.stderr)
    for cand in candidates:
        if not cand.available or cand.stack is None:
            print(f"skip {cand.name}: {cand.unavailable}", file=sys.stderr)
            continue
        label = f"{cand.server.name} / {cand.framework.name}"
        t0 = time.monotonic()
        try:
            env = provision(cand.stack)
            with start_server(cand.stack, env, cpus=[0], log_dir=log_dir) as srv:
                url = srv.base_url.rstrip("/") + "/hello"
                run = measure_robustness(
                    url,
                    specs,
                    lambda url=url: good_load(url, args.duration, args.connections),
                    alive=srv.alive,
                )
        except (ProvisionError, LaunchError) as e:
            print(f"{label}: failed: {e}", file=sys.stderr)
            rows.append({"stack": label, "failed": str(e).splitlines()[0]})
            continue
        clean, faulted, rob = measure_of(run.clean), measure_of(run.faulted), run.robustness
        row = {
            "stack": label,
            "clean_rps": clean.rps,
            "faulted_rps": faulted.rps,
            **rob.to_dict(),
            "recovery_s": run.recovery_s,
            "findings": [f"{f.kind}: {f.what} ({f.status})" for f in run.report.findings],
        }
        rows.append(row)
        print(f"{label}: score {rob.score} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    print(table(rows))
    print(
        f"\nGood clients: {args.connections} connections, {args.duration:g} s, GET /hello "
        f"({interp[0].name}); server pinned to CPU 0, load generator to CPU 1. Fault mix: "
        f"`{args.faults}` = `{format_mix(specs)}`."
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _ms(v: float | None) -> str:
    return f"{v:.1f}" if v is not None else "-"


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the rows, best score first."""
    head = (
        "| stack | clean rps | faulted rps | retained | p99 clean ms | p99 faulted ms "
        "| good errors | survived | answered after | malformed accepted | score |\n"
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|"
    )
    lines = [head]
    ok = sorted((r for r in rows if "score" in r), key=lambda r: -r["score"])
    for r in ok:
        accepted = ", ".join(r["malformed_accepted"]) or "none"
        lines.append(
            f"| {r['stack']} | {r['clean_rps']:,.0f} | {r['faulted_rps']:,.0f} "
            f"| {r['retained_pct']:.0f}% | {_ms(r['p99_clean_ms'])} | {_ms(r['p99_faulted_ms'])} "
            f"| {r['good_errors']} | {'yes' if r['survived'] else 'NO'} "
            f"| {'yes' if r['answered_after'] else 'NO'} | {accepted} | {r['score']:.0f} |"
        )
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['stack']} | failed: {r['failed']} |||||||||")
    found = [r for r in ok if r["findings"]]
    if found:
        lines.append("\nMalformed requests accepted (first answer status; docs/faults.md):\n")
        lines += [f"- {r['stack']}: " + "; ".join(r["findings"]) for r in found]
    kinds = ", ".join(KINDS)
    lines.append(f"\nFault kinds: {kinds}. Formula: docs/faults.md.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
