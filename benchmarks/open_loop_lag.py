"""Open-loop send precision: schedule lag of the load engine at several rates.

Starts the reference server (``pywebbench.refserver.RefServer``) pinned to one core and runs
open-loop loads (constant arrivals, 64 pooled connections) from this process with the
generator thread pinned to another core. For each rate and round it prints the schedule lag
(how late each send left after its intended time) p50/p90/p99/p99.9/max, the achieved rate,
the generator thread's busy share and spin share (CPU spent spinning for exact send times,
not counted as busy), the share of the time it waited for a CPU (run-queue delay: other
tasks on its core), and the 1-minute load average at the start of the run, so figures from
a shared machine can be judged. Rounds alternate over the rates.

    python benchmarks/open_loop_lag.py                         # 1k, 5k, 20k req/s, 3 x 3 s
    python benchmarks/open_loop_lag.py --rates 1000 --rounds 5 -d 5
"""

from __future__ import annotations

import argparse

from pywebbench.load import LoadSpec, run_load
from pywebbench.refserver import RefServer


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="1000,5000,20000", help="comma-separated requests/s")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-d", "--duration", type=float, default=3.0)
    ap.add_argument("-c", "--connections", type=int, default=64)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--generator-cpu", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        ap.error(f"--rates: expected numbers like 1000,5000, got {args.rates!r}")
    if args.rounds < 1 or args.duration <= 0 or any(r <= 0 for r in rates):
        ap.error("--rounds must be >= 1, --duration and --rates > 0")
    with RefServer(cpus=[args.server_cpu]) as srv:
        for rnd in range(1, args.rounds + 1):
            for rate in rates:
                load = _loadavg()
                r = run_load(
                    LoadSpec(
                        url=srv.url + "/hello",
                        rate=rate,
                        connections=args.connections,
                        duration_s=args.duration,
                        cpus=[args.generator_cpu],
                    )
                )
                lag = r.schedule_lag.summary if r.schedule_lag else None
                th = r.generator.threads[0]
                spin = th.spin_s / max(th.wall_s, 1e-9) * 100
                waited = (th.run_delay_s or 0.0) / max(th.wall_s, 1e-9) * 100
                if lag is None or r.open_loop is None:
                    print(f"round {rnd} {rate:>8,.0f}/s  no open-loop figures: {r.warnings}")
                    continue
                print(
                    f"round {rnd} {rate:>8,.0f}/s  load {load:>5}  schedule lag p50 {lag.p50:>5.0f}"
                    f" p90 {lag.p90:>5.0f} p99 {lag.p99:>6.0f} p99.9 {lag.p999:>6.0f}"
                    f" max {lag.max:>6.0f} us  achieved {r.open_loop.achieved_rate:>8,.0f}/s"
                    f"  busy {th.busy * 100:>3.0f}%  spin {spin:>3.0f}%  cpu-wait {waited:>4.1f}%"
                    f"  errors {r.errors}  generator_bound {r.generator.generator_bound}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
