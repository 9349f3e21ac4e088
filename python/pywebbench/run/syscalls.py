"""Syscalls per request (``--syscalls``): a traced, unmeasured load window per replicate.

After a replicate's measured iterations, Debian's ``strace -f -c`` attaches to every process
of the server's tree (``-p`` each: master and the workers it forked before the attach; ``-f``
follows the workers forked afterwards), the cell's load runs for a bounded window, strace
detaches, and its counts are divided by the requests the engine saw completed in that window.

Tracing stops the server at every syscall, so the window's throughput is not a figure of the
stack: it is never stored as an iteration. Method and limits: docs/syscalls.md.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: How long strace gets to attach to every process, and to detach and write its summary.
ATTACH_TIMEOUT_S = 10.0
DETACH_TIMEOUT_S = 15.0
#: Syscalls listed by time in the report.
TOP_BY_TIME = 5

_PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
# strace's line for a process it could not attach to, and the permission error among them.
_ATTACH_FAILED = re.compile(r"^.*attach: ptrace.*$", re.MULTILINE)
_NOT_PERMITTED = re.compile(r"Operation not permitted|EPERM")
_ROW = re.compile(
    r"^\s*(?P<pct>[\d.]+)\s+(?P<seconds>[\d.]+)\s+(?P<usecs>\d+)\s+(?P<calls>\d+)"
    r"\s+(?:(?P<errors>\d+)\s+)?(?P<name>[a-z_0-9]+)\s*$"
)


class SyscallsError(Exception):
    """strace is missing, not permitted, or failed; the message is one line naming why."""


@dataclass(frozen=True)
class SyscallCount:
    """One row of ``strace -c``: a syscall's calls, failed calls and system time."""

    name: str
    calls: int
    errors: int
    seconds: float


def strace_path() -> str:
    """The strace executable; :class:`SyscallsError` when it is not installed."""
    found = shutil.which("strace")
    if found is None:
        raise SyscallsError(
            "--syscalls needs strace, which is not installed (Debian: apt-get install strace)"
        )
    return found


def _not_permitted(detail: str) -> SyscallsError:
    scope = "unknown"
    try:
        scope = _PTRACE_SCOPE.read_text().strip()
    except OSError:
        scope = "absent (no Yama)"
    return SyscallsError(
        "--syscalls: tracing the server is not permitted (ptrace: "
        f"{detail.strip() or 'operation not permitted'}); kernel.yama.ptrace_scope is {scope}: "
        "set it to 0 (sysctl kernel.yama.ptrace_scope=0), or give pywebbench CAP_SYS_PTRACE "
        "(containers: --cap-add SYS_PTRACE, and a seccomp profile that allows ptrace)"
    )


def preflight() -> None:
    """Before a study starts: strace is there and may attach to a process pywebbench
    started (as the servers are: a sibling of strace, which Yama's scope 1 forbids)."""
    strace = strace_path()
    target = subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL)
    try:
        with tracing([target.pid], strace=strace) as tracer:
            pass
        if tracer.error:
            raise tracer.error
    finally:
        target.kill()
        target.wait()


def parse_summary(text: str) -> list[SyscallCount]:
    """The rows of strace's ``-c`` table (any column layout strace 5-6 prints by default)."""
    rows = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if m is None or m["name"] == "total":
            continue
        rows.append(
            SyscallCount(m["name"], int(m["calls"]), int(m["errors"] or 0), float(m["seconds"]))
        )
    return rows


class Tracer:
    """A running ``strace -f -c`` attached to a set of processes (see :func:`tracing`)."""

    def __init__(self, pids: Sequence[int], *, strace: str | None = None) -> None:
        self.pids = list(pids)
        self.strace = strace or strace_path()
        self._dir = tempfile.TemporaryDirectory(prefix="pwb-strace-")
        self.summary_path = Path(self._dir.name) / "summary.txt"
        self.log_path = Path(self._dir.name) / "strace.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.counts: list[SyscallCount] = []
        self.error: SyscallsError | None = None

    def _log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> None:
        """Attach to every pid; returns once strace says it is attached to all of them."""
        argv = [self.strace, "-f", "-c", "-o", str(self.summary_path)]
        for pid in self.pids:
            argv += ["-p", str(pid)]
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            log_text = self._log()
            failed = _ATTACH_FAILED.findall(log_text)
            refused = [line for line in failed if _NOT_PERMITTED.search(line)]
            if self._proc.poll() is not None:
                if refused:
                    raise _not_permitted(refused[0])
                raise SyscallsError(f"strace exited at attach: {log_text.strip()[:300]}")
            attached = log_text.count(" attached")
            # A process that exited since it was listed (a worker being recycled, a zombie)
            # fails the attach too: only a trace with nothing attached is not permitted.
            if attached + len(failed) >= len(self.pids):
                if not attached:
                    raise _not_permitted(refused[0] if refused else "")
                return
            time.sleep(0.02)
        raise SyscallsError(f"strace did not attach within {ATTACH_TIMEOUT_S:.0f} s")

    def stop(self) -> list[SyscallCount]:
        """Detach (SIGINT makes strace detach and write its summary) and parse the counts."""
        proc = self._proc
        if proc is None:
            return []
        self._proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=DETACH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise SyscallsError("strace did not detach in time") from None
        try:
            self.counts = parse_summary(self.summary_path.read_text(errors="replace"))
        except OSError:
            self.counts = []
        return self.counts

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self._dir.cleanup()


class tracing:  # noqa: N801 - used like a function: ``with tracing(pids) as t``
    """``with tracing(pids) as tracer:`` strace runs attached for the block; afterwards
    ``tracer.counts`` holds its summary, or ``tracer.error`` why there is none."""

    def __init__(self, pids: Sequence[int], *, strace: str | None = None) -> None:
        self.tracer = Tracer(pids, strace=strace)

    def __enter__(self) -> Tracer:
        try:
            self.tracer.start()
        except SyscallsError as exc:
            self.tracer.error = exc
        return self.tracer

    def __exit__(self, *exc: object) -> None:
        try:
            self.tracer.stop()
        except SyscallsError as err:
            self.tracer.error = self.tracer.error or err
        finally:
            self.tracer.close()


def per_request(
    counts: Sequence[SyscallCount], requests: int, *, duration_s: float, processes: int
) -> dict[str, Any]:
    """The stored figures of one traced window: per syscall and in total, divided by the
    requests completed in it; plus the top syscalls by time."""
    by_calls = sorted(counts, key=lambda c: (-c.calls, c.name))
    total_calls = sum(c.calls for c in counts)
    total_s = sum(c.seconds for c in counts)
    return {
        "requests": requests,
        "duration_s": round(duration_s, 3),
        "processes": processes,
        "total_calls": total_calls,
        "total_seconds": round(total_s, 6),
        "per_request": round(total_calls / requests, 3) if requests else None,
        "syscalls": [
            {**asdict(c), "per_request": round(c.calls / requests, 4) if requests else None}
            for c in by_calls
        ],
        "top_by_time": [c.name for c in sorted(counts, key=lambda c: -c.seconds)[:TOP_BY_TIME]],
    }


def traced_window(pids: Sequence[int], load: Callable[[], tuple[int, float]]) -> dict[str, Any]:
    """Trace ``pids`` while ``load()`` runs; ``load`` returns (requests completed, seconds).

    Returns :func:`per_request`'s document, or ``{"error": ...}`` when tracing failed (the
    study carries on: a traced window is never a failure of the stack)."""
    with tracing(pids) as tracer:
        if tracer.error is None:
            requests, duration_s = load()
    if tracer.error is not None:
        return {"error": str(tracer.error)}
    return per_request(tracer.counts, requests, duration_s=duration_s, processes=len(pids))
