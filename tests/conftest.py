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

import pytest
from pwbtest import marked_processes

_MARKER = "PWB_TEST_SESSION"
_VALUE = uuid.uuid4().hex
os.environ[_MARKER] = _VALUE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    deadline = time.monotonic() + 5.0
    leaked = marked_processes(_MARKER, _VALUE)
    while leaked and time.monotonic() < deadline:  # let stopping processes finish exiting
        time.sleep(0.2)
        leaked = marked_processes(_MARKER, _VALUE)
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
