"""The interference guard's measurement: CPU other processes took from pinned cores."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from pwbtest import neighbour
from pywebbench.meter import Sampler
from pywebbench.meter.interference import Interference, core_times

SPIN = "import time\nend = time.time() + 20\nwhile time.time() < end: pass\n"

STAT = """cpu  900 0 300 5000 10 0 5 40 0 0
cpu0 400 10 100 2500 5 0 3 20 0 0
cpu1 500 0 200 2500 5 0 2 20 0 0
intr 12345
"""


def test_core_times_sum_busy_and_steal_of_the_cores_asked(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    hz = os.sysconf("SC_CLK_TCK")
    one = core_times([0], str(stat))
    assert one is not None
    assert one.busy_s == (400 + 10 + 100) / hz and one.steal_s == 20 / hz
    both = core_times([0, 1], str(stat))
    assert both is not None and both.busy_s == (510 + 700) / hz
    assert core_times([7], str(stat)) is None  # no such core
    assert core_times([0], str(tmp_path / "missing")) is None


def test_share_is_of_one_core_over_the_window() -> None:
    x = Interference(window_s=2.0, others_cpu_s=0.2, steal_s=0.06)
    assert abs(x.share - 0.13) < 1e-12
    assert x.interfered(0.05) and not x.interfered(0.2)
    assert Interference(window_s=0.0, others_cpu_s=1.0, steal_s=0.0).share == 0.0
    # load agents in their own processes: their CPU is the generator's, taken off others'
    assert abs(x.without(0.15).others_cpu_s - 0.05) < 1e-12 and x.without(0.15).steal_s == 0.06
    assert x.without(1.0).others_cpu_s == 0.0 and x.without(-1.0) == x


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def test_a_neighbour_on_the_servers_core_is_counted_and_the_server_is_not() -> None:
    """A spinning "server" and a neighbour spinning on the same core: the neighbour's CPU
    shows as others' time, the server's does not (others + server fit in the window)."""
    core = sorted(os.sched_getaffinity(0))[0]
    server = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
    try:
        with neighbour(core) as spinner:
            os.sched_setaffinity(server.pid, {core})
            time.sleep(0.5)
            before = _cpu(spinner.pid)
            with Sampler(server.pid, cpus=[core], interval_s=0.1) as sampler:
                time.sleep(2.0)
            got = _cpu(spinner.pid) - before
            x = sampler.summary.interference
            server_cpu = sampler.summary.cpu_s
            assert x is not None and server_cpu is not None
            # Clock ticks are 10 ms; the sampler's reads lie a few ms outside psutil's.
            tolerance = 0.1
            assert x.others_cpu_s >= got - tolerance, (x, got)
            assert x.others_cpu_s + server_cpu <= x.window_s + tolerance, (x, server_cpu)
            # The neighbour ran: what it took is others' (on a busy machine others take more
            # still, so the share only grows). No figure here depends on how busy the machine
            # is: the checks are accounting identities, up to clock ticks.
            assert got > 0 and x.share >= got / x.window_s - tolerance
    finally:
        server.kill()
        server.wait(timeout=10)
