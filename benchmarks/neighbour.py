"""A neighbour process: spins on one core with a duty cycle, for a bounded time.

It stands for the other work of a shared machine in the interference benchmark
(benchmarks/interference.py) and the tests of the interference guard
(docs/interference.md):

    python benchmarks/neighbour.py --cpu 0 --on 30ms --off 70ms --for 120s   # steady
    python benchmarks/neighbour.py --cpu 0 --on 2s --off 8s --for 300s       # bursty

Every period it spins for ``--on`` (pure CPU, no system calls) and sleeps for ``--off``;
``--delay`` sleeps first (where in its period a study meets it). It stops after ``--for``
(at most an hour, the delay included) or on SIGTERM/SIGINT. It prints one line at the
end: the CPU time it got and the wall time it ran.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time

MAX_FOR_S = 3600.0
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$")


def parse_duration(text: str) -> float:
    """``"30ms"`` -> 0.03, ``"2s"`` or ``"2"`` -> 2.0; ValueError otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration such as 30ms or 2s")
    value = float(m.group(1))
    return value / 1000.0 if m.group(2) == "ms" else value


def spin(on_s: float, off_s: float, for_s: float, delay_s: float = 0.0) -> float:
    """Sleep ``delay_s``, then spin ``on_s`` and sleep ``off_s`` in turn, until ``for_s``
    has passed since the start; the CPU time used."""
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    start = time.monotonic()
    end = start + for_s
    cpu0 = time.process_time()
    resume = min(start + delay_s, end)
    while not stopping and time.monotonic() < resume:  # short naps: a signal ends it soon
        time.sleep(min(0.1, max(0.0, resume - time.monotonic())))
    while not stopping:
        now = time.monotonic()
        if now >= end:
            break
        busy_until = min(now + on_s, end)
        x = 0
        while time.monotonic() < busy_until and not stopping:
            for _ in range(1000):
                x += 1
        pause = min(off_s, end - time.monotonic())
        if pause > 0 and not stopping:
            time.sleep(pause)
    return time.process_time() - cpu0


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments (one line and exit 2 when bad) and spin."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, required=True, help="The core to spin on.")
    parser.add_argument("--on", default="30ms", help="Spin this long each period (30ms, 2s).")
    parser.add_argument("--off", default="70ms", help="Then sleep this long (70ms, 8s).")
    parser.add_argument(
        "--for", dest="for_", default="60s", help="Stop after this long (at most 1 hour)."
    )
    parser.add_argument("--delay", default="0", help="Sleep this long before the first spin.")
    args = parser.parse_args(argv)
    try:
        on_s, off_s, for_s, delay_s = (
            parse_duration(v) for v in (args.on, args.off, args.for_, args.delay)
        )
    except ValueError as exc:
        parser.error(str(exc))
    if on_s <= 0 or off_s < 0:
        parser.error(f"--on must be above 0 and --off at least 0, got {args.on} and {args.off}")
    if not 0 < for_s <= MAX_FOR_S:
        parser.error(f"--for: {args.for_} is not between 0 and {MAX_FOR_S:.0f}s")
    try:
        os.sched_setaffinity(0, {args.cpu})
    except (OSError, ValueError) as exc:
        parser.error(f"--cpu {args.cpu}: {exc}")
    started = time.monotonic()
    cpu = spin(on_s, off_s, for_s, delay_s)
    wall = time.monotonic() - started
    print(f"neighbour on core {args.cpu}: {cpu:.2f} s CPU in {wall:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
