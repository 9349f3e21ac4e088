"""Aggregate requests/s of 1, 2 and 4 load agents on Ray against the reference server, and
the overhead of going through Ray.

Starts the reference server (``pywebbench.refserver.RefServer``, pinned to ``--server-cpus``)
and one local Ray instance for the whole benchmark. Each round runs every agent count once,
in alternating order (1, 2, 4, then 4, 2, 1, ...), so drift of the machine hits every count
alike; the figure per count is the median over ``--rounds`` rounds. Then it compares the wall
time of one ``--overhead-duration`` load run through Ray (agents already started, as in a
study) and locally (``run_load`` in this process).

On a machine with few cores, expect no gain past the core count: the agents, the server and
Ray itself share the same cores. Real gains need agents on other hosts (docs/scale-out.md).

    python benchmarks/ray_scaleout.py                    # 3 rounds of 3 s loads
    python benchmarks/ray_scaleout.py --rounds 5 -d 5 -c 64
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from pywebbench.load import LoadSpec, run_load
from pywebbench.load.ray_agents import AgentPool, assign_cpus, ray_session, split_spec
from pywebbench.refserver import RefServer


def _agents_rps(ray: object, count: int, spec: LoadSpec) -> tuple[float, float | None]:
    """Merged req/s of ``count`` agents (a pool started for this count) and the start skew."""
    with AgentPool(ray, count) as pool:  # type: ignore[arg-type]
        cores = assign_cpus(pool.places, 1, spec.cpus)
        specs = [s.replace(cpus=c) for s, c in zip(split_spec(spec, count), cores, strict=True)]
        load = pool.run(specs)
    if load.merged is None:
        raise SystemExit(f"{count} agents: {load.failure_message()}")
    return load.merged.rps, load.start_skew_ms


def _overhead(ray: object, spec: LoadSpec) -> tuple[float, float, float]:
    """Wall seconds of one load run through one Ray agent (agent started for it, and agent
    already up), and locally."""
    t0 = time.monotonic()
    with AgentPool(ray, 1) as pool:  # type: ignore[arg-type]
        t1 = time.monotonic()
        pool.run([spec])
        t2 = time.monotonic()
    cold, warm = t2 - t0, t2 - t1
    t0 = time.monotonic()
    run_load(spec)
    return cold, warm, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default="1,2,4", help="Agent counts to compare.")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-d", "--duration", type=float, default=3.0)
    ap.add_argument("-c", "--connections", type=int, default=32)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--generator-cpus", default="", help="Pool of agent cores (default: all).")
    ap.add_argument("--overhead-duration", type=float, default=2.0)
    args = ap.parse_args(argv)
    counts = [int(c) for c in args.agents.split(",")]
    if args.rounds < 1 or args.duration <= 0 or min(counts) < 1:
        ap.error("--rounds and --agents must be >= 1, --duration > 0")
    server_cpus = [int(c) for c in args.server_cpus.split(",")]
    gen_cpus = [int(c) for c in args.generator_cpus.split(",") if c]
    figures: dict[int, list[float]] = {c: [] for c in counts}
    skews: list[float] = []
    with RefServer(cpus=server_cpus) as srv, ray_session(local_cpus=max(counts)) as ray:
        spec = LoadSpec(
            url=srv.url + "/hello",
            connections=args.connections,
            duration_s=args.duration,
            cpus=gen_cpus,
        )
        for r in range(args.rounds):
            for count in counts if r % 2 == 0 else list(reversed(counts)):
                rps, skew = _agents_rps(ray, count, spec)
                figures[count].append(rps)
                if skew is not None and count > 1:
                    skews.append(skew)
                print(f"round {r + 1}: {count} agent(s): {rps:,.0f} req/s", flush=True)
        cold, warm, local = _overhead(ray, spec.replace(duration_s=args.overhead_duration))
    print(f"\nreference server on CPUs {server_cpus}; {os.cpu_count()} CPUs on this machine")
    base = statistics.median(figures[counts[0]])
    for count in counts:
        med = statistics.median(figures[count])
        print(
            f"  {count} agent(s): median {med:>10,.0f} req/s over {args.rounds} rounds "
            f"({med / base:.2f}x of {counts[0]})"
        )
    if skews:
        print(f"  start skew between agents: median {statistics.median(skews):.3f} ms, "
              f"max {max(skews):.3f} ms")  # fmt: skip
    print(
        f"  a {args.overhead_duration:g} s load: {local:.2f} s wall locally; via Ray "
        f"{warm:.2f} s with the agent up ({warm - local:+.2f} s), {cold:.2f} s starting "
        f"the agent for it ({cold - local:+.2f} s; a local Ray itself takes longer to start)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
