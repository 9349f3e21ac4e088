"""Property-based fuzzing of the HTTP parsers at scale: millions of generated cases.

Runs the proptest properties of the engine's HTTP/1.1 response parser
(crates/engine/tests/parser_props.rs), its HTTP/2 frame and HPACK parser
(crates/engine/tests/h2_props.rs), its WebSocket frame and handshake-answer parsers
(crates/engine/tests/ws_props.rs) and the reference server's request parser
(crates/refserver/src/request_props.rs) with many more cases than CI does (the case count of a
property comes from ``PWB_FUZZ_CASES``). The cases are shared out by weight: the properties
that split each input at every byte boundary cost hundreds of parses per case and get fewer.
Properties run in parallel (``--jobs``), each in its own ``cargo test`` process, at low
priority. Prints, per property and in total: cases run, failures, wall time; a failing
property prints proptest's minimal case. Exit status 1 when any property failed.

    python benchmarks/fuzz_parsers.py                      # 10M cases
    python benchmarks/fuzz_parsers.py --cases 100000 --jobs 1
    python benchmarks/fuzz_parsers.py --only ws --cases 2000000   # the WebSocket ones only
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Property:
    """One proptest property: where it lives and its share of the cases."""

    crate: str
    target: list[str]
    name: str
    weight: float


ENGINE = ["--test", "parser_props"]
H2 = ["--test", "h2_props"]
WS = ["--test", "ws_props"]
REFSERVER = ["--lib"]
PROPERTIES = [
    Property("pywebbench-engine", ENGINE, "valid_responses_parse_to_what_was_sent", 0.12),
    Property("pywebbench-engine", ENGINE, "split_at_random_points_equals_whole", 0.15),
    Property("pywebbench-engine", ENGINE, "hostile_bytes_split_equals_whole", 0.15),
    Property("pywebbench-engine", ENGINE, "split_at_every_boundary_equals_whole", 0.01),
    Property("pywebbench-engine", H2, "valid_conversations_parse_to_what_was_sent", 0.07),
    Property("pywebbench-engine", H2, "split_at_random_points_equals_whole", 0.07),
    Property("pywebbench-engine", H2, "hostile_bytes_split_equals_whole", 0.07),
    Property("pywebbench-engine", H2, "split_at_every_boundary_equals_whole", 0.01),
    Property("pywebbench-engine", H2, "junk_after_settings_is_a_protocol_error_at_worst", 0.005),
    Property("pywebbench-engine", H2, "junk_header_blocks_are_refused_cleanly", 0.005),
    Property("pywebbench-engine", WS, "valid_conversations_parse_to_what_was_sent", 0.04),
    Property("pywebbench-engine", WS, "split_at_random_points_equals_whole", 0.04),
    Property("pywebbench-engine", WS, "hostile_bytes_split_equals_whole", 0.04),
    Property("pywebbench-engine", WS, "split_at_every_boundary_equals_whole", 0.005),
    Property("pywebbench-engine", WS, "junk_is_a_protocol_error_at_worst", 0.02),
    Property("pywebbench-engine", WS, "handshake_answers_split_equal_whole", 0.02),
    Property(
        "pywebbench-refserver",
        REFSERVER,
        "request_props::split_at_random_points_equals_whole",
        0.15,
    ),
    Property(
        "pywebbench-refserver", REFSERVER, "request_props::hostile_bytes_split_equals_whole", 0.15
    ),
    Property(
        "pywebbench-refserver", REFSERVER, "request_props::valid_requests_are_each_answered", 0.03
    ),
    Property(
        "pywebbench-refserver",
        REFSERVER,
        "request_props::split_at_every_boundary_equals_whole",
        0.01,
    ),
]


#: The parser a property fuzzes, by its test target (``--only``).
GROUPS = {"parser_props": "http1", "h2_props": "h2", "ws_props": "ws", "--lib": "refserver"}


def _group(p: Property) -> str:
    return GROUPS[p.target[-1]]


@dataclass
class Outcome:
    """What one property's run found."""

    prop: Property
    cases: int
    failed: bool
    seconds: float
    detail: str


def _cargo(prop: Property, extra: list[str]) -> list[str]:
    return [
        "nice",
        "-n",
        "10",
        "cargo",
        "test",
        "--release",
        "-q",
        "-p",
        prop.crate,
        *prop.target,
        *extra,
    ]


def run_property(prop: Property, cases: int) -> Outcome:
    """Run one property with ``cases`` cases; the case count is what proptest ran (all of them
    on success, the successes before the failure otherwise)."""
    env = {**os.environ, "PWB_FUZZ_CASES": str(cases)}
    start = time.monotonic()
    proc = subprocess.run(
        _cargo(prop, ["--", "--exact", prop.name]),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - start
    out = proc.stdout + proc.stderr
    if proc.returncode == 0 and "1 passed" in out:
        return Outcome(prop, cases, False, seconds, "")
    ran = re.search(r"successes: (\d+)", out)
    lines = [line[:300] for line in out.splitlines() if line.strip()]
    verdict = [line for line in lines if re.search(r"Test failed|left|right|panicked", line)]
    detail = "\n".join(verdict[:8] + ["..."] + lines[-40:])
    return Outcome(prop, int(ran.group(1)) + 1 if ran else 0, True, seconds, detail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000_000, help="cases in all properties")
    ap.add_argument("--jobs", type=int, default=2, help="properties run at the same time")
    ap.add_argument(
        "--only",
        choices=sorted(set(GROUPS.values())),
        default=None,
        help="only the properties of one parser (the cases are shared among them)",
    )
    args = ap.parse_args(argv)
    props = [p for p in PROPERTIES if args.only in (None, _group(p))]
    if args.cases < len(props) or args.jobs < 1:
        ap.error(f"--cases must be >= {len(props)} and --jobs >= 1")
    total_weight = sum(p.weight for p in props)
    plan = [(p, max(1, round(args.cases * p.weight / total_weight))) for p in props]
    print(f"building the test binaries (release); {args.cases:,} cases, {args.jobs} job(s)")
    for crate in sorted({p.crate for p in props}):
        build = subprocess.run(
            ["nice", "cargo", "test", "--release", "-q", "-p", crate, "--no-run"], cwd=ROOT
        )
        if build.returncode != 0:
            print(f"error: cannot build the tests of {crate}", file=sys.stderr)
            return 2
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda pc: run_property(*pc), plan))
    wall = time.monotonic() - start
    print(f"\n{'crate':<22} {'property':<55} {'cases':>12} {'failed':>6} {'time':>8}")
    for o in outcomes:
        name = o.prop.name.removeprefix("request_props::")
        if _group(o.prop) in ("h2", "ws"):
            name = f"{_group(o.prop)}: {name}"
        print(
            f"{o.prop.crate:<22} {name:<55} {o.cases:>12,} {'yes' if o.failed else 'no':>6} "
            f"{o.seconds:>7.0f}s"
        )
    failures = [o for o in outcomes if o.failed]
    cases = sum(o.cases for o in outcomes)
    print(f"\ntotal: {cases:,} cases, {len(failures)} failing properties, {wall:.0f} s wall")
    for o in failures:
        print(f"\n--- {o.prop.crate} {o.prop.name}: minimal failing case ---\n{o.detail}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
