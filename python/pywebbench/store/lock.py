"""One writer per run: a run in progress holds an exclusive lock on a file beside the store.

A second ``pywebbench run --resume`` of the same run gets :class:`RunLocked`, naming the run
and the process that holds it, before it writes anything. The kernel drops the lock when the
holder exits, however it exits (even SIGKILL), so a crashed run can always be resumed.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pywebbench.store.db import StoreError


class RunLocked(StoreError):
    """Another live process is writing this run."""

    def __init__(self, run_id: str, pid: int | None) -> None:
        holder = f"process {pid}" if pid else "another process"
        super().__init__(f"run {run_id} is being written by {holder}; wait for it or stop it")
        self.run_id = run_id
        self.pid = pid


def lock_path(store_path: Path, run_id: str) -> Path:
    """The lock file of ``run_id`` for the store at ``store_path``."""
    return Path(store_path).parent / ".locks" / f"run-{run_id}.lock"


@contextmanager
def run_lock(store_path: Path, run_id: str) -> Iterator[None]:
    """Hold the run's lock for the block; :class:`RunLocked` if another process holds it.

    The holder's PID is written into the file so the refusal can name it. The file is left
    in place on release (removing it would let two writers lock two different files).
    """
    path = lock_path(store_path, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(run_id, _holder(fd)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
