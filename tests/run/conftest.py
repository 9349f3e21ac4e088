"""Shared helpers of the runner tests: a process census by environment marker."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")
MARK_VAR = "PWB_TEST_MARK"


def marked_processes(mark: str) -> list[tuple[int, str]]:
    """Live processes whose environment carries ``PWB_TEST_MARK=mark`` (pid, cmdline)."""
    needle = f"{MARK_VAR}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            if needle not in env.split(b"\0"):
                continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
            if state == b"Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((int(entry), cmd))
    return found


@pytest.fixture
def census() -> Iterator[str]:
    """A fresh marker put in this process's environment (inherited by everything the test
    starts); after the test no process may still carry it."""
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
    left = marked_processes(mark)
    assert not left, f"processes left behind: {left}"
