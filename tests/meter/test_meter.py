"""Metering of a real process tree (a parent with two busy children)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
from pywebbench.meter import Sampler, snapshot
from pywebbench.meter.sampler import process_cpu_s, trees_cpu_s

TREE = r"""
import os, sys, time
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        junk = bytearray(30 * 1024 * 1024)  # touched: resident
        for i in range(0, len(junk), 4096):
            junk[i] = 1
        os.write(1, b"ready\n")  # once its memory is resident
        end = time.time() + 30
        while time.time() < end:
            pass
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
"""


def test_sampler_covers_the_whole_tree() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        # Each child says "ready" once its 30 MiB are touched: resident before the snapshot.
        assert proc.stdout is not None
        assert [proc.stdout.readline().strip() for _ in range(2)] == [b"ready", b"ready"]
        idle = snapshot(proc.pid)
        assert idle.processes == 3 and idle.alive
        assert idle.rss_bytes > 60 * 1024 * 1024
        procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children()]
        t_before = time.monotonic()
        before = sum(sum(p.cpu_times()[:2]) for p in procs)
        with Sampler(proc.pid, interval_s=0.1) as sampler:
            t_started = time.monotonic()
            time.sleep(1.0)
            t_stopping = time.monotonic()
        after = sum(sum(p.cpu_times()[:2]) for p in procs)
        t_after = time.monotonic()
        m = sampler.summary
        # two children spinning: the tree's CPU over the window, as psutil sees it directly.
        # The sampler's first and last reads lie within (t_before, t_started) and
        # (t_stopping, t_after) of psutil's; two spinning children use at most 2 CPU-seconds
        # a second between them, and each read is cut to clock ticks (10 ms; utime and stime
        # of 3 processes, at each end). A bound, not a statistic: a host that stalls this
        # thread between the reads widens it by what it stalled.
        gaps = (t_started - t_before) + (t_after - t_stopping)
        # The floor: two spinners get up to 2 CPU-s in the 1-s window; at 50% steal and
        # sharing the cores with the suite's other worker, still about 0.5, so 0.2 is missed
        # only if they were kept off the cores for 90% of the window: far rarer than 1 in
        # 10,000 (issue 52, docs/contributing.md).
        assert m.cpu_s is not None and m.cpu_s > 0.2
        assert abs(m.cpu_s - (after - before)) < 2 * gaps + 0.12, (m.cpu_s, after - before, gaps)
        assert m.processes_peak == 3
        assert m.rss_peak_bytes and m.rss_peak_bytes >= m.rss_end_bytes * 0.9
        assert m.uss_end_bytes is None or m.uss_end_bytes > 60 * 1024 * 1024
        assert m.pss_end_bytes is None or m.pss_end_bytes > 0
        assert m.threads_peak and m.threads_peak >= 3
        assert m.fds_peak and m.fds_peak > 0
        # ten 0.1-s intervals in the second; fewer than 2 needs the sampler's thread held off
        # its core for 0.8 s of it (steal comes in slices of milliseconds)
        assert 2 <= len(m.samples) <= 15
        assert [s.t_s for s in m.samples] == sorted(s.t_s for s in m.samples)
        assert m.alive_at_end
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    gone = snapshot(proc.pid)
    assert not gone.alive and gone.processes == 0


SPIN_THEN_SAY = r"""
import time
t = time.process_time()
while time.process_time() - t < 0.2:
    pass
print(time.process_time(), flush=True)
time.sleep(30)
"""


def test_a_trees_cpu_is_read_to_the_nanosecond_not_the_clock_tick() -> None:
    """Warm-up buckets are 0.25 s: a tick (10 ms) at each end is 8% of one, more than the
    interference threshold. The process's own CPU clock reads its time exactly."""
    lo = time.process_time()
    mine = process_cpu_s(os.getpid())
    hi = time.process_time()
    assert mine is not None and lo <= mine <= hi
    proc = subprocess.Popen(
        [sys.executable, "-c", SPIN_THEN_SAY], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        said = float(proc.stdout.readline())  # its CPU time, then it sleeps
        time.sleep(0.05)
        assert abs(trees_cpu_s([proc.pid]) - said) < 0.002, (trees_cpu_s([proc.pid]), said)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert process_cpu_s(proc.pid) is None  # reaped: no clock to read
