"""Process trees read cheaply (meter/sampler.py Trees): the members one /proc scan finds,
their CPU and memory against psutil's reading of the same trees, and a new worker found at
the next scan."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
from pywebbench.meter.sampler import Trees, snapshot, trees_cpu_s

#: A root that spins, with one child that spins; a line on stdin makes the root fork a second.
TREE = """
import os, subprocess, sys, time
spin = ("import time\\nt = time.time()\\nwhile True:\\n"
        "    if time.time() - t > 0.2: time.sleep(0.05); t = time.time()")
kids = [subprocess.Popen([sys.executable, "-c", spin])]
print("ready", flush=True)
sys.stdin.readline()
kids.append(subprocess.Popen([sys.executable, "-c", spin]))
print("forked", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    for p in psutil.Process(proc.pid).children(recursive=True):
        p.kill()
    proc.kill()
    proc.wait(timeout=10)


def test_members_cpu_and_memory_are_psutils_reading(tree: subprocess.Popen[str]) -> None:
    trees = Trees([tree.pid, 999_999_999])  # the second root does not exist
    members = trees.members()
    expected = {tree.pid, *(p.pid for p in psutil.Process(tree.pid).children(recursive=True))}
    assert set(members[0]) == expected and members[0][0] == tree.pid and len(expected) == 2
    assert members[1] == []
    cpu, ours = trees_cpu_s([tree.pid]), trees.cpu_s()[0]
    assert ours == pytest.approx(cpu, abs=0.05)  # read a moment apart, two spinning
    # memory read back to back until two readings agree (a child just started still grows)
    deadline = time.monotonic() + 10
    while True:
        rss = trees.rss()
        theirs = snapshot(tree.pid, memory_detail=False).rss_bytes
        if rss[0] == pytest.approx(theirs, rel=0.02) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert rss[1] is None
    assert rss[0] == pytest.approx(theirs, rel=0.02)


def test_a_worker_forked_later_is_found_at_the_next_scan(tree: subprocess.Popen[str]) -> None:
    trees = Trees([tree.pid], members_every_s=0.2)
    assert len(trees.members()[0]) == 2
    assert tree.stdin is not None and tree.stdout is not None
    tree.stdin.write("\n")
    tree.stdin.flush()
    assert tree.stdout.readline().strip() == "forked"
    assert len(trees.members()[0]) == 2  # not scanned again yet
    time.sleep(0.25)
    assert len(trees.members()[0]) == 3


def test_a_member_gone_makes_the_next_reading_scan_again(tree: subprocess.Popen[str]) -> None:
    trees = Trees([tree.pid], members_every_s=3600)
    (root, child) = trees.members()[0]
    psutil.Process(child).kill()  # a zombie until its parent reaps it: gone all the same
    time.sleep(0.2)
    trees.cpu_s()  # the child is gone: the members are read again next time
    assert child not in trees.members()[0] and root in trees.members()[0]


def test_threads_yield_the_core_and_are_put_back() -> None:
    """``yield_to_others``: the threads named run under SCHED_IDLE until restored."""
    import os
    import threading

    from pywebbench.meter.sampler import yield_to_others

    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="waiting")
    other.start()
    try:
        assert other.native_id is not None
        before = os.sched_getscheduler(other.native_id)
        restore = yield_to_others([0, other.native_id])
        assert restore is not None
        assert os.sched_getscheduler(0) == os.SCHED_IDLE
        assert os.sched_getscheduler(other.native_id) == os.SCHED_IDLE
        restore()
        assert os.sched_getscheduler(0) == before == os.sched_getscheduler(other.native_id)
        assert yield_to_others([999_999_999]) is None  # no such thread: nothing changed
    finally:
        stop.set()
        other.join(timeout=10)
