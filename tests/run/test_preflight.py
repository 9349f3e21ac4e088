"""Pre-flight (docs/interference.md): what will disturb a study, one line each; it warns and
never blocks."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
from pwbtest import command, neighbour
from pywebbench.run.preflight import BUSY_SHARE, preflight


def test_a_busy_neighbour_and_aslr_are_named_with_what_to_do() -> None:
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    with neighbour(0) as spinner:
        time.sleep(0.3)
        proc = psutil.Process(spinner.pid)
        before = sum(proc.cpu_times()[:2])
        started = time.monotonic()
        findings = preflight([0], sample_s=1.0)
        share = (sum(proc.cpu_times()[:2]) - before) / (time.monotonic() - started)
    checks = {f.check: f for f in findings}
    assert all(f.problem and f.advice and f.line().startswith(f.check + ": ") for f in findings)
    assert ("aslr" in checks) == (aslr != "0")
    if "aslr" in checks:
        assert "randomize_va_space" in checks["aslr"].advice
    # The spinner shows as busy whenever it got clearly more than the threshold; on a machine
    # so loaded that it did not, the check is right not to name it.
    if share > 1.5 * BUSY_SHARE:
        assert "busy" in checks and spinner.pid in checks["busy"].pids, (share, checks)


def test_the_command_warns_and_exits_0_and_bad_input_is_one_line() -> None:
    ok = command(["preflight", "--sample", "0.2"], timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("pre-flight of server cores [0]")
    bad = command(
        ["preflight", "--server-cpus", "zero"],
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--server-cpus" in bad.stderr
