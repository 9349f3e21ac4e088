"""Where a server's CPU time goes under load (``--flamegraph``): a sampled, unmeasured window.

After a replicate's measured iterations, py-spy (PyPI) samples the stacks of every process of
the server's tree (``--subprocesses``: the workers too, with native frames where it can) while
the cell's load runs for a bounded window. py-spy pauses a process for each sample, so the
window's throughput is never stored as a figure of the stack (docs/flamegraphs.md).

py-spy sees only threads that run Python: a Rust or C server's own threads (granian's,
socketify's) have no Python thread state and are not sampled. So the window also reads the
CPU time of the whole tree from ``/proc`` (user and system, every thread), and what the samples
do not cover is accounted as *native, unsampled*: the breakdown adds up to the tree's CPU.

py-spy's samples count time a thread was not idle, which on a busy machine includes time it
waited for a core; so the samples only *apportion* each thread's CPU time (read per thread
from ``/proc/PID/task/TID/stat``) among the functions it ran, and a thread that has CPU time
but no samples is *native, unsampled*.

The stored document (per replicate): collapsed stacks (``thread (TID): name;frame;... ->
samples``), each thread's CPU seconds in the window, the sampling rate, the window's requests
and duration, and the tree's CPU seconds (user + system, and system alone).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Samples per second per thread (py-spy's default).
RATE_HZ = 100
#: How long py-spy gets to attach, and to write its file after SIGINT.
ATTACH_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: The categories of the breakdown, in the order shown.
CATEGORIES = (
    "server",
    "framework",
    "app",
    "libraries",
    "interpreter",
    "native",
    "native, unsampled",
)


class FlameError(Exception):
    """py-spy is missing, not permitted, or failed; one line naming why."""


@dataclass(frozen=True)
class FlameWindow:
    """One sampled window of a replicate."""

    stacks: dict[str, int]  # collapsed stack ("thread (TID): name" first, ";"-joined) -> samples
    thread_cpu_s: dict[str, float]  # TID -> CPU seconds in the window (every thread of the tree)
    rate_hz: int
    duration_s: float
    requests: int
    tree_cpu_s: float  # user + system CPU of every thread of the tree in the window
    tree_system_s: float
    sampler: str  # "py-spy 0.4.3"
    processes: int = 1
    #: Top-level module -> "server" or "framework" (the stack's pinned packages), and the
    #: paths whose files are the app's: how the breakdown names who the time belongs to.
    packages: dict[str, str] = field(default_factory=dict)
    app_paths: list[str] = field(default_factory=list)
    #: The server core's speed over the window (the core-speed probe's median loop rate,
    #: docs/interference.md#core-speed); None when not probed.
    core_rate: float | None = None

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    @property
    def sampled_s(self) -> float:
        """Thread-seconds the samples stand for (non-idle Python threads)."""
        return self.samples / self.rate_hz

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> FlameWindow:
        return cls(
            stacks={str(k): int(v) for k, v in dict(doc["stacks"]).items()},
            thread_cpu_s={str(k): float(v) for k, v in dict(doc["thread_cpu_s"]).items()},
            rate_hz=int(doc["rate_hz"]),
            duration_s=float(doc["duration_s"]),
            requests=int(doc["requests"]),
            tree_cpu_s=float(doc["tree_cpu_s"]),
            tree_system_s=float(doc["tree_system_s"]),
            sampler=str(doc.get("sampler", "")),
            processes=int(doc.get("processes", 1)),
            packages={str(k): str(v) for k, v in dict(doc.get("packages") or {}).items()},
            app_paths=[str(p) for p in doc.get("app_paths") or []],
            core_rate=float(doc["core_rate"]) if doc.get("core_rate") else None,
        )


def py_spy_path() -> str:
    """py-spy next to this interpreter (a pywebbench dependency), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    found = str(here) if here.exists() else shutil.which("py-spy")
    if found is None:
        raise FlameError("--flamegraph needs py-spy (pip install py-spy), which is not installed")
    return found


def parse_collapsed(text: str) -> dict[str, int]:
    """py-spy's raw output (flamegraph.pl's input: ``frame;frame;... count`` per line)."""
    stacks: dict[str, int] = {}
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] = stacks.get(stack, 0) + int(count)
    return stacks


def thread_cpu(pids: Iterable[int]) -> dict[str, tuple[float, float]]:
    """TID -> (user + system, system) CPU seconds so far, for every thread of ``pids``."""
    out: dict[str, tuple[float, float]] = {}
    for pid in pids:
        try:
            tids = [t.name for t in Path(f"/proc/{pid}/task").iterdir()]
        except OSError:
            continue  # exited meanwhile
        for tid in tids:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            utime, stime = int(fields[11]), int(fields[12])
            out[tid] = ((utime + stime) / _TICKS, stime / _TICKS)
    return out


@dataclass
class _Sampler:
    pid: int
    path: str
    native: bool
    dir: tempfile.TemporaryDirectory[str] = field(
        default_factory=lambda: tempfile.TemporaryDirectory(prefix="pwb-flame-")
    )
    proc: subprocess.Popen[bytes] | None = None

    @property
    def out(self) -> Path:
        return Path(self.dir.name) / "stacks.txt"

    @property
    def log(self) -> Path:
        return Path(self.dir.name) / "py-spy.log"

    def start(self) -> None:
        argv = [self.path, "record", "--pid", str(self.pid), "--subprocesses", "--format", "raw"]
        argv += ["--rate", str(RATE_HZ), "--nolineno", "--full-filenames", "--threads"]
        argv += ["-o", str(self.out)]
        argv += ["--native"] if self.native else []
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if "Sampling process" in text:
                return
            if self.proc.poll() is not None:
                raise FlameError(f"py-spy could not sample the server: {_last_line(text)}")
            time.sleep(0.02)
        raise FlameError(f"py-spy did not start sampling within {ATTACH_TIMEOUT_S:.0f} s")

    def stop(self) -> dict[str, int]:
        proc, self.proc = self.proc, None
        if proc is None:
            return {}
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise FlameError("py-spy did not stop in time") from None
        try:
            return parse_collapsed(self.out.read_text(errors="replace"))
        except OSError:
            raise FlameError(
                f"py-spy wrote no samples: {_last_line(self.log.read_text(errors='replace'))}"
            ) from None

    def close(self) -> None:
        try:
            self.stop()
        except FlameError:
            pass
        finally:
            self.dir.cleanup()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def sampled_window(
    pid: int,
    tree: Callable[[], list[int]],
    load: Callable[[], tuple[int, float]],
    *,
    packages: Mapping[str, str],
    app_paths: Sequence[str],
    native: bool = True,
) -> dict[str, Any]:
    """Sample the tree of ``pid`` while ``load()`` runs (it returns the requests completed and
    the seconds); ``tree()`` lists the tree's pids. Returns :class:`FlameWindow`'s document,
    or ``{"error": ...}`` when sampling failed (a sampled window is never a failure of the
    stack)."""
    try:
        sampler = _Sampler(pid, py_spy_path(), native)
    except FlameError as exc:
        return {"error": str(exc)}
    try:
        sampler.start()
        pids = tree()
        before = thread_cpu(pids)
        requests, duration_s = load()
        pids = sorted(set(pids) | set(tree()))
        after = thread_cpu(pids)
        stacks = sampler.stop()
    except FlameError as exc:
        return {"error": str(exc)}
    finally:
        sampler.close()
    zero = (0.0, 0.0)
    spent = {
        t: (c - before.get(t, zero)[0], s - before.get(t, zero)[1]) for t, (c, s) in after.items()
    }
    return FlameWindow(
        stacks=stacks,
        thread_cpu_s={t: round(c, 3) for t, (c, _) in spent.items() if c > 0},
        rate_hz=RATE_HZ,
        duration_s=round(duration_s, 3),
        requests=requests,
        tree_cpu_s=round(sum(c for c, _ in spent.values()), 3),
        tree_system_s=round(sum(s for _, s in spent.values()), 3),
        sampler=_version(sampler.path),
        processes=len(pids),
        packages=dict(packages),
        app_paths=list(app_paths),
    ).to_dict()


def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "py-spy"
    return out.stdout.strip() or "py-spy"
