"""Watchdog of one process group: stop the group when the process that started it dies.

Run by :meth:`pywebbench.launch.process.ProcessGroup.start` as a separate, tiny process
(``python -I -S watchdog.py PGID SIGNAL GRACE_S [PATH ...]``, standard library only, in its
own session) whose stdin is the read end of a pipe only the starting process holds open. It
blocks reading:

- a byte arrives: the starter stopped the group itself (it disarms us); exit quietly;
- end of file without a byte: the starter is gone, whatever killed it (SIGKILL, a crash, an
  interpreter exit that skipped cleanup). Send ``SIGNAL`` to the group, wait up to ``GRACE_S``
  for it to empty, then SIGKILL it, and remove each ``PATH`` (a file or a directory tree) that
  only the group used: a PostgreSQL data directory, a log in the system's temp directory.

A pipe, unlike ``PR_SET_PDEATHSIG``, does not depend on which thread started the group, still
works after the server switched user, and reaches every member of the group (workers too) and
servers that ignore SIGTERM.
"""

import os
import shutil
import signal
import sys
import time


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(pgid: int, sig: int, grace_s: float) -> None:
    for s, wait_s in ((sig, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, s)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not _group_exists(pgid):
                return
            time.sleep(0.05)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """Wait for the starter to disarm us or die; on death stop the group, then remove its
    paths."""
    pgid, sig, grace_s = int(argv[1]), int(argv[2]), float(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        data = os.read(0, 1)
    except OSError:
        data = b""
    if data:
        return 0
    _stop(pgid, sig, grace_s)
    for path in argv[4:]:
        _remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
