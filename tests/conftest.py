"""Suite-wide guards.

Process census: every process started during the test session inherits ``PWB_TEST_SESSION``
in its environment. When the session ends, any such process still alive is a leak: it is
listed, killed by PID (it is ours), and the session fails.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

_MARKER = "PWB_TEST_SESSION"
_TOKEN = f"{_MARKER}={uuid.uuid4().hex}".encode()
os.environ[_MARKER] = _TOKEN.decode().split("=", 1)[1]


def _marked_processes() -> list[tuple[int, str]]:
    """(pid, command line) of live processes carrying this session's marker, except us."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if _TOKEN not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie holds nothing; its parent reaps it
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((int(entry.name), cmd.strip()))
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    deadline = time.monotonic() + 5.0
    leaked = _marked_processes()
    while leaked and time.monotonic() < deadline:  # let stopping processes finish exiting
        time.sleep(0.2)
        leaked = _marked_processes()
    if not leaked:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"  pid {pid}: {cmd[:200]}" for pid, cmd in leaked]
    msg = "process census: processes started by the tests are still running:\n" + "\n".join(lines)
    if reporter is not None:
        reporter.write_line(msg, red=True)
    for pid, _ in leaked:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
