"""Reading sampled stacks (:mod:`pywebbench.meter.flame`): who the time belongs to, a
function's share, several windows merged, and what grew between two of them.

A frame is py-spy's ``function (path)`` (``--nolineno``): a Python function and its file, or a
native symbol (or address) and its shared object; each stack starts with its thread,
``thread (TID): name``. A thread's CPU seconds in the window are shared among its stacks in
proportion to their samples (:func:`stack_seconds`); self time goes to the category of the
leaf frame, inclusive time to every distinct function on the stack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pywebbench.analysis.elasticity import speed_factor
from pywebbench.analysis.ratio import ratio
from pywebbench.meter.flame import CATEGORIES, FlameWindow

_SITE = re.compile(r"/(?:site|dist)-packages/([^/]+)")
_THREAD = re.compile(r"^thread \((\d+)\)")
APP_MARKERS = ("/inside/apps/",)


def split_frame(frame: str) -> tuple[str, str]:
    """(function, where) of ``"fib (/path/app.py)"``."""
    name, sep, where = frame.rpartition(" (")
    if not sep:
        return frame, ""
    return name, where[:-1] if where.endswith(")") else where


def function_of(frame: str) -> str:
    """A frame without its path: ``fib``, ``Flask.wsgi_app`` (addresses kept as they are)."""
    return split_frame(frame)[0]


def normalize(name: str) -> str:
    """A package or module name as compared: lower case, ``-`` as ``_``, no suffix."""
    return name.split(".")[0].lower().replace("-", "_")


def category(frame: str, packages: Mapping[str, str], app_markers: Sequence[str]) -> str:
    """The category of a frame: ``packages`` maps top-level module names to "server" or
    "framework"; a file under one of ``app_markers`` is the app's."""
    _, where = split_frame(frame)
    if where.endswith(".py") or ".py:" in where or "<frozen" in where:
        if any(marker in where for marker in app_markers):
            return "app"
        site = _SITE.search(where)
        if site is not None:
            return packages.get(normalize(site.group(1)), "libraries")
        return "interpreter"  # the standard library, frozen modules
    base = where.rsplit("/", 1)[-1]
    if base.startswith(("libpython", "python", "pypy", "libpypy")):
        return "interpreter"
    return "native"


def split_thread(stack: str) -> tuple[str | None, list[str]]:
    """(TID, frames root first) of a collapsed stack: its ``process PID:"cmdline"``
    frames (py-spy ``--subprocesses``: a worker's nest under its parent's) and its thread frame
    dropped (TID None without a thread frame)."""
    frames = stack.split(";")
    while frames and frames[0].startswith("process "):
        frames = frames[1:]
    match = _THREAD.match(frames[0]) if frames else None
    if match is None:
        return None, frames
    return match.group(1), frames[1:]


#: Native leaf functions that wait in the kernel (py-spy's idle test can miss a thread
#: blocked in them, as in a socket timeout's poll): such samples are idle, not CPU.
WAITING = frozenset(
    {
        "poll",
        "__poll",
        "ppoll",
        "select",
        "pselect",
        "epoll_wait",
        "epoll_pwait",
        "accept",
        "accept4",
        "recv",
        "recvfrom",
        "read",
        "nanosleep",
        "clock_nanosleep",
        "futex",
        "__futex_abstimed_wait_common",
        "__futex_abstimed_wait_common64",
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "sem_wait",
        "sem_timedwait",
    }
)


def waiting(frame: str) -> bool:
    """A native frame of a function that waits in the kernel (see :data:`WAITING`)."""
    name, where = split_frame(frame)
    return ".so" in where and name in WAITING


def stack_seconds(window: FlameWindow) -> list[tuple[list[str], float]]:
    """Each stack's frames and the CPU seconds it stands for: its thread's CPU in the window
    times the stack's share of that thread's samples (samples waiting in the kernel left
    out: :func:`waiting`)."""
    per_thread: dict[str | None, int] = {}
    parsed = []
    for stack, count in window.stacks.items():
        tid, frames = split_thread(stack)
        if frames and waiting(frames[-1]):
            continue
        per_thread[tid] = per_thread.get(tid, 0) + count
        parsed.append((tid, frames, count))
    return [
        (frames, window.thread_cpu_s.get(tid or "", 0.0) * count / per_thread[tid])
        for tid, frames, count in parsed
        if frames
    ]


def unsampled_s(window: FlameWindow) -> float:
    """CPU seconds of the threads with no sample (no Python on them: a native server's own)."""
    sampled = {split_thread(stack)[0] for stack in window.stacks}
    return sum(cpu for tid, cpu in window.thread_cpu_s.items() if tid not in sampled)


@dataclass(frozen=True)
class Breakdown:
    """Shares of the tree's CPU time in a window, by category (fractions summing to 1), and
    the kernel's share of the same CPU time (from the threads' system time: it overlaps)."""

    shares: dict[str, float]
    kernel: float | None
    cpu_s_per_request: float | None


def breakdown(windows: Sequence[FlameWindow]) -> Breakdown:
    """Self time by the leaf frame's category over ``windows`` (a cell's replicates), plus
    *native, unsampled*: the CPU of the threads the sampler could not see. Each window names
    its stack's server and framework packages and the app's paths."""
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    for window in windows:
        markers = [*APP_MARKERS, *window.app_paths]
        for frames, secs in stack_seconds(window):
            seconds[category(frames[-1], window.packages, markers)] += secs
        seconds["native, unsampled"] += unsampled_s(window)
    total = sum(seconds.values())
    cpu = sum(w.tree_cpu_s for w in windows)
    requests = sum(w.requests for w in windows)
    return Breakdown(
        shares={k: (v / total if total > 0 else 0.0) for k, v in seconds.items()},
        kernel=sum(w.tree_system_s for w in windows) / cpu if cpu > 0 else None,
        cpu_s_per_request=cpu / requests if requests else None,
    )


def merged_seconds(windows: Iterable[FlameWindow]) -> dict[str, float]:
    """CPU seconds per stack (threads dropped, frames ";"-joined) over ``windows``."""
    out: dict[str, float] = {}
    for window in windows:
        for frames, secs in stack_seconds(window):
            key = ";".join(frames)
            out[key] = out.get(key, 0.0) + secs
    return out


def per_request(windows: Sequence[FlameWindow], *, own: bool = False) -> dict[str, float]:
    """CPU seconds per request of every function over ``windows``: with everything it called
    (inclusive), or ``own`` time only (the leaf frame's)."""
    requests = sum(w.requests for w in windows)
    if not requests:
        return {}
    out: dict[str, float] = {}
    for window in windows:
        for frames, secs in stack_seconds(window):
            names = {function_of(frames[-1])} if own else {function_of(f) for f in frames}
            for fn in names:
                out[fn] = out.get(fn, 0.0) + secs
    return {fn: s / requests for fn, s in out.items()}


@dataclass(frozen=True)
class Growth:
    """A function's CPU seconds per request, with what it called, in BASE and NEW windows."""

    function: str
    base_s: float
    new_s: float

    @property
    def ratio(self) -> float | None:
        """NEW / BASE seconds per request (None when BASE spent none)."""
        return ratio(self.new_s, self.base_s)

    @property
    def delta_s(self) -> float:
        return self.new_s - self.base_s


def growth(base: Sequence[FlameWindow], new: Sequence[FlameWindow], top: int = 5) -> list[Growth]:
    """The functions whose own CPU per request changed most (absolute change, largest first:
    where the change happened, not its callers, which all change as much), each with its
    inclusive CPU per request on both sides."""
    own_b, own_n = per_request(base, own=True), per_request(new, own=True)
    moved = sorted(
        set(own_b) | set(own_n), key=lambda f: (-abs(own_n.get(f, 0.0) - own_b.get(f, 0.0)), f)
    )
    b, n = per_request(base), per_request(new)
    return [Growth(fn, b.get(fn, 0.0), n.get(fn, 0.0)) for fn in moved[:top]]


def tree_cpu_per_request(windows: Sequence[FlameWindow]) -> float | None:
    """The tree's CPU seconds per request over ``windows``."""
    requests = sum(w.requests for w in windows)
    return sum(w.tree_cpu_s for w in windows) / requests if requests else None


def probed(windows: Sequence[FlameWindow]) -> bool:
    """Every window has its core's speed (what :func:`cpu_at_one_speed` needs)."""
    return bool(windows) and all(w.core_rate for w in windows)


def cpu_at_one_speed(
    windows: Sequence[FlameWindow], reference: float, elasticity: float = 1.0
) -> list[FlameWindow]:
    """``windows`` with their CPU times put at the ``reference`` core rate: each times
    ``(rate / reference) ** elasticity``. With elasticity 1, a CPU-second of a core running
    at 0.7 of the reference did 0.7 of its work (docs/interference.md#core-speed; the
    elasticity is the one the cell's req/s are scaled with, so that CPU per request and
    req/s are put at one speed alike). Samples stay as they are (shares within a window do
    not change). Callers scale all the windows they compare or none (:func:`probed`)."""
    out = []
    for w in windows:
        assert w.core_rate, "a window without its core's speed cannot be scaled"
        f = speed_factor(w.core_rate, reference, -elasticity)
        out.append(
            replace(
                w,
                thread_cpu_s={t: c * f for t, c in w.thread_cpu_s.items()},
                tree_cpu_s=w.tree_cpu_s * f,
                tree_system_s=w.tree_system_s * f,
            )
        )
    return out
