"""Suite-wide guards.

Process census: every process started during the test session inherits ``PWB_TEST_SESSION``
in its environment. When the session ends, any such process still alive is a leak: it is
listed, killed by PID (it is ours), and the session fails.

Ctrl-C: a suite started in the background of a non-interactive shell (``./scripts/test.sh &``,
some CI runners) inherits SIGINT ignored, and every child would inherit that too, so the tests
that press Ctrl-C on a run or a load would wait for nothing. The session takes SIGINT back.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from pwbtest import marked_processes, stop_zygote

_MARKER = "PWB_TEST_SESSION"
_VALUE = uuid.uuid4().hex
os.environ[_MARKER] = _VALUE
# Every Ray the tests start (local clusters, `--executor ray`, agents) binds and talks on
# 127.0.0.1 only, never on the host's network address. Set before anything imports ray.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # children start with SIG_DFL


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stop_zygote()  # the one process of the tests' own meant to live until now
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
