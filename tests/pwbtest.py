"""Helpers shared by test modules across folders (import as ``pwbtest``; never import a
``conftest`` by name: which one ``conftest`` means depends on collection order)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The pywebbench console script of the environment running the tests.
PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")

# Environment variable the runner tests mark their processes with (tests/run/conftest.py).
MARK_VAR = "PWB_TEST_MARK"


def valgrind_leftovers() -> set[str]:
    """The temporary directory's vgdb FIFOs and pywebbench's directories for them: a counted
    server is killed, and must not leave them behind (``instructions.pipes``)."""
    return {
        p.name
        for p in Path(tempfile.gettempdir()).iterdir()
        if p.name.startswith(("vgdb-pipe", "pwb-vgdb-"))
    }


# Cores for the load generator in tests: the server side gets core 0.
GEN_CPUS = [1] if (os.cpu_count() or 1) > 1 else [0]


def marked_processes(var: str, value: str) -> list[tuple[int, str]]:
    """Live, non-zombie processes (pid, command line) whose environment has ``var=value``,
    this process excepted."""
    needle = f"{var}={value}".encode()
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((int(entry.name), cmd.strip()))
    return found


def pwb(*args: str, results: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``pywebbench ARGS --results-dir RESULTS``, output captured, bounded in time."""
    return subprocess.run(
        [PYWEBBENCH, *args, "--results-dir", str(results)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def process_census() -> Iterator[str]:
    """A fresh marker put in this process's environment (inherited by everything started
    inside the block); after the block no process may still carry it."""
    mark = uuid.uuid4().hex
    old = os.environ.get(MARK_VAR)
    os.environ[MARK_VAR] = mark
    try:
        yield mark
    finally:
        if old is None:
            os.environ.pop(MARK_VAR, None)
        else:
            os.environ[MARK_VAR] = old
    left = marked_processes(MARK_VAR, mark)
    assert not left, f"processes left behind: {left}"


# The neighbour process of the interference benchmark (docs/interference.md).
NEIGHBOUR = Path(__file__).parents[1] / "benchmarks" / "neighbour.py"


@contextmanager
def neighbour(core: int, on: str = "1s", off: str = "0") -> Iterator[subprocess.Popen[bytes]]:
    """A neighbour spinning ``on`` then sleeping ``off`` on ``core`` for the duration
    (bounded: it stops by itself after 120 s); stopped and reaped on exit."""
    proc = subprocess.Popen(
        [sys.executable, str(NEIGHBOUR), "--cpu", str(core), "--on", on, "--off", off,
         "--for", "120s"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
