"""Suite-wide guards.

Process census: every process started during the test session inherits ``PWB_TEST_SESSION``
in its environment. When the session ends, any such process still alive is a leak: it is
listed, killed by PID (it is ours), and the session fails.

Steal: a failed test's report gains a "host" section with the share of the machine's cores
the hypervisor gave to other machines from the test's setup to its failure (``/proc/stat``'s
steal). A VM's host took 24-48% of this project's 2-core machine for minutes at a time on 1
Dec 2026, and the timing tests that failed then said nothing of it.

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
from pywebbench.meter.interference import CoreTimes, core_times

_MARKER = "PWB_TEST_SESSION"
_VALUE = uuid.uuid4().hex
os.environ[_MARKER] = _VALUE
# Every Ray the tests start (local clusters, `--executor ray`, agents) binds and talks on
# 127.0.0.1 only, never on the host's network address. Set before anything imports ray.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # children start with SIG_DFL


_TIMES = pytest.StashKey[CoreTimes]()

#: Files whose tests take longest (seconds of one worker in a fresh clone's suite, 5 Dec
#: 2026), run first: under ``pytest -n 2 --dist loadfile --no-loadscope-reorder``
#: (scripts/test.sh) a worker takes the next file as it finishes one, and a long file left
#: to the end would leave the other worker idle. Longest first.
HEAVY_FIRST = [
    "tests/run/test_e2e.py",  # ~150 s
    "tests/ab/test_ab_cmd.py",  # ~95 s
    "tests/compare/test_compare_cmd.py",  # ~90 s, the session's stored runs included
    "tests/report/test_report_flame.py",  # ~70 s
    "tests/report/test_report_browser.py",  # ~60 s
    "tests/servers/test_adapters.py",  # ~55 s
    "tests/run/test_leak.py",  # ~52 s
    "tests/load/test_ray_executor.py",  # ~50 s
    "tests/run/test_interleaved.py",  # ~50 s
    "tests/load/test_ray_agents.py",  # ~50 s
    "tests/run/test_every_server.py",  # ~35 s
    "tests/faults/test_sweep.py",  # ~30 s
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of :data:`HEAVY_FIRST` first, in its order; the rest as collected. A
    file's own tests keep their order."""
    rank = {path: i for i, path in enumerate(HEAVY_FIRST)}
    position = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda it: (rank.get(it.nodeid.split("::")[0], len(rank)), position[id(it)]))


def _machine_times() -> CoreTimes | None:
    """Every core's busy, steal and idle time so far (the interference meter's reader)."""
    return core_times(range(os.cpu_count() or 1))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    times = _machine_times()
    if times is not None:
        item.stash[_TIMES] = times


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    outcome = yield
    report = outcome.get_result()
    before, now = item.stash.get(_TIMES, None), _machine_times()
    if report.failed and before is not None and now is not None:
        steal = now.steal_s - before.steal_s
        total = steal + (now.busy_s - before.busy_s) + (now.idle_s - before.idle_s)
        if total > 0:
            seconds = total / (os.cpu_count() or 1)
            said = (
                f"steal: the hypervisor took {steal / total:.0%} of this machine's cores over "
                f"the {seconds:.0f} s from the test's setup to its failure"
            )
            report.sections.append(("host", said))
    return None


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
