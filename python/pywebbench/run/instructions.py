"""Instructions per request (``--instructions``): a deterministic cost, counted under valgrind.

For a cell, a separate server of the cell's stack is started under Debian's valgrind
(``callgrind``, every child process traced, instrumentation off at start), with what would
make the count vary fixed (``PYTHONHASHSEED=0``). A warm-up batch of requests runs
uninstrumented; then valgrind's gdbserver (``vgdb``) switches instrumentation on in every
process of the server's tree and zeroes its counters, a fixed batch of requests runs (closed
loop, one connection), and the user-space instructions executed by every thread of every
process are read back and divided by the requests completed.

The server under valgrind runs tens of times slower: nothing of it is a timed figure, and it
is never stored as an iteration. Method and limits: docs/instructions.md.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.load import LoadResult, LoadSpec
    from pywebbench.study.config import LoadConfig
    from pywebbench.study.matrix import CellPlan

#: How long one ``vgdb`` call may take (it reaches a process blocked in a syscall through
#: valgrind's gdbserver, forcing it with ptrace after :data:`INVOKE_MS`).
CONTROL_TIMEOUT_S = 30.0
#: How long ``vgdb`` waits for a process to reach valgrind's scheduler before it forces it
#: (vgdb's own default is 100 ms; a counted server between batches is always blocked in a
#: syscall, so the wait is only latency).
INVOKE_MS = 10
#: The environment of a counted server: what would make the count vary, fixed.
COUNT_ENV: Mapping[str, str] = {"PYTHONHASHSEED": "0"}
#: A counted server starts this many times slower than a plain one, at most.
START_SLOWDOWN = 10.0
#: The longest a batch may run: it ends at its request count, or at this bound.
BATCH_CAP_S = 300.0
#: The idle window after the counted batch that tells the processes only keeping house.
IDLE_S = 2.0
#: Counted requests that size the batch, and the instructions a batch aims at: enough that
#: a few thousand instructions of timer work in a serving process stay below 0.01%.
PROBE_REQUESTS = 5
BATCH_INSTRUCTIONS = 50_000_000
#: The fewest requests of a batch, however heavy each is.
LEAST_REQUESTS = 10

_RUN = re.compile(r"^use --pid=(?P<pid>\d+) for ", re.MULTILINE)
_THREAD_TOTAL = re.compile(r"^events-(?P<tid>\d+): (?P<ir>\d+)", re.MULTILINE)


class InstructionsError(Exception):
    """valgrind is missing, cannot run the stack, or failed; the message is one line."""


def valgrind_tools() -> tuple[str, str]:
    """The ``valgrind`` and ``vgdb`` executables (Debian's valgrind package has both);
    :class:`InstructionsError` when they are not installed."""
    valgrind = shutil.which("valgrind")
    vgdb = shutil.which("vgdb")
    if valgrind is None or vgdb is None:
        raise InstructionsError(
            "--instructions needs valgrind, which is not installed "
            "(Debian: apt-get install valgrind)"
        )
    return valgrind, vgdb


def valgrind_version() -> str:
    """``valgrind --version`` (e.g. ``valgrind-3.19.0``), or "" when it cannot run."""
    valgrind, _ = valgrind_tools()
    try:
        out = subprocess.run(
            [valgrind, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip()


def preflight() -> None:
    """Before a study starts: valgrind and vgdb are installed, and valgrind runs."""
    if not valgrind_version():
        raise InstructionsError("--instructions: valgrind --version failed")


def cannot_count(is_pypy: bool) -> str | None:
    """Why a stack's instructions are not counted, or None when they are.

    PyPy was tried (docs/instructions.md): valgrind runs it with ``--smc-check=all``, but its
    JIT's counts of one cell moved by a third between fresh servers, so it is refused rather
    than reported."""
    if is_pypy:
        return (
            "PyPy is not counted: under valgrind its JIT's instructions per request moved by "
            "up to 33% between fresh servers (docs/instructions.md)"
        )
    return None


@contextmanager
def pipes() -> Iterator[str]:
    """A directory of its own for the FIFOs through which ``vgdb`` reaches a counted
    server's processes (valgrind's ``--vgdb-prefix``), removed at the end: a counted server
    is killed, and a process killed under valgrind leaves its FIFOs behind (three a process,
    in ``/tmp`` by default), where ``vgdb -l`` would list them for a pid used again later.
    Yields the prefix that :func:`wrapper` and :func:`count_server` take."""
    directory = tempfile.mkdtemp(prefix="pwb-vgdb-")
    try:
        yield os.path.join(directory, "vgdb-pipe")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def wrapper(prefix: str, *, jit: bool = False, valgrind: str | None = None) -> list[str]:
    """The command a counted server's argv is prefixed with (``prefix``: from :func:`pipes`;
    ``jit``: the interpreter writes machine code at run time, which valgrind must re-check:
    ``--smc-check=all``)."""
    return [
        "env",
        *(f"{k}={v}" for k, v in COUNT_ENV.items()),
        valgrind or valgrind_tools()[0],
        "--tool=callgrind",
        "--trace-children=yes",
        "--instr-atstart=no",
        "--callgrind-out-file=/dev/null",
        "--error-limit=no",
        f"--vgdb-prefix={prefix}",
        *(["--smc-check=all"] if jit else []),
    ]


@dataclass(frozen=True)
class Control:
    """``vgdb`` commands to the callgrind runs behind one prefix (:func:`pipes`)."""

    prefix: str
    vgdb: str = ""

    def _argv(self, *args: str) -> list[str]:
        return [self.vgdb or valgrind_tools()[1], f"--vgdb-prefix={self.prefix}", *args]

    def runs(self, pids: Sequence[int]) -> list[int]:
        """Which of ``pids`` are callgrind runs that ``vgdb`` can reach."""
        (listed,) = self._wait([self._start(self._argv("-l"))])
        found = {int(m["pid"]) for m in _RUN.finditer(listed)}
        return [p for p in pids if p in found]

    def send(self, runs: Sequence[int], *commands: str) -> dict[int, str]:
        """``commands``, in order, to every process of ``runs`` at once: each one's output."""
        started = []
        for pid in runs:
            args = [f"--pid={pid}", f"--max-invoke-ms={INVOKE_MS}"]
            for command in commands:
                args += ["-c", command]
            started.append(self._start(self._argv(*args)))
        return dict(zip(runs, self._wait(started), strict=True))

    @staticmethod
    def _start(argv: list[str]) -> subprocess.Popen[str]:
        try:
            return subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
        except OSError as exc:
            raise InstructionsError(f"vgdb: {exc}") from None

    @staticmethod
    def _wait(started: list[subprocess.Popen[str]]) -> list[str]:
        deadline = time.monotonic() + CONTROL_TIMEOUT_S
        outs: list[str] = []
        try:
            for proc in started:
                out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
                outs.append(out)
        except subprocess.TimeoutExpired:
            raise InstructionsError("a counted process did not answer vgdb in time") from None
        finally:
            for proc in started:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return outs

    def read(self, runs: Sequence[int], *then: str) -> dict[int, list[int]]:
        """Every process's per-thread counts since they were zeroed (``status internal``),
        then ``then`` (e.g. ``zero``) in the same call."""
        outs = self.send(runs, "status internal", *then)
        counts = {pid: thread_counts(out) for pid, out in outs.items()}
        missing = [p for p, c in counts.items() if c is None]
        if missing:
            raise InstructionsError(f"no instruction count from process(es) {missing}")
        return {p: c for p, c in counts.items() if c is not None}


def thread_counts(status: str) -> list[int] | None:
    """The instructions of each thread of one process since its counters were zeroed, from
    callgrind's ``status internal`` answer (its ``events-TID: N`` lines, Ir the only event),
    or None when the process gave no status with instrumentation on."""
    if "instrumentation: on" not in status:
        return None
    return [int(m["ir"]) for m in _THREAD_TOTAL.finditer(status)]


@dataclass(frozen=True)
class Batch:
    """What a load batch did: the requests it completed, its errors and its seconds."""

    requests: int
    errors: int
    duration_s: float


def batch_size(probe_instructions: int, probe_requests: int, most: int) -> int:
    """Requests of the counted batch: enough for :data:`BATCH_INSTRUCTIONS` at the probe's
    instructions per request, at least :data:`LEAST_REQUESTS`, at most ``most``."""
    per_request = probe_instructions / max(probe_requests, 1)
    wanted = math.ceil(BATCH_INSTRUCTIONS / per_request) if per_request > 0 else most
    return max(min(wanted, most), min(LEAST_REQUESTS, most))


def count_batch(
    control: Control,
    pids: Callable[[], Sequence[int]],
    warm: Callable[[], Batch],
    batch: Callable[[int], Batch],
    *,
    most: int,
    idle_s: float = IDLE_S,
) -> dict[str, Any]:
    """Warm up uninstrumented; count a probe of :data:`PROBE_REQUESTS` requests, whose
    busiest process sizes the batch (:func:`batch_size`, at most ``most`` requests); count
    the batch in every process; then, when several processes ran instructions in it, an
    idle window of ``idle_s`` seconds tells the ones that only keep house on a timer
    (:func:`housekeeping`).

    ``batch(n)`` runs ``n`` requests. ``pids()`` lists the server's process tree (called
    after the warm-up, so workers forked late are in it). Counting is left on: the caller
    stops the server. Returns the stored document; raises :class:`InstructionsError`."""
    warmed = warm()
    if warmed.requests == 0:
        raise InstructionsError("the warm-up batch completed no request")
    runs = control.runs(pids())
    if not runs:
        raise InstructionsError("no process of the server answers vgdb")
    control.send(runs, "instrumentation on", "zero")
    probe = batch(PROBE_REQUESTS)
    # the busiest process: a master's timer work, which follows the wall time, must not
    # change the batch's size from one count to the next
    probed = control.read(runs, "zero")
    size = batch_size(max(map(sum, probed.values())), probe.requests, most)
    counted = batch(size)
    counts = control.read(runs, "zero")  # zeroed for the idle window, if one is needed
    started = time.monotonic()
    if counted.requests == 0:
        raise InstructionsError("the counted batch completed no request")
    busy = {p: sum(counts[p]) for p in runs}
    idle_elapsed = 0.0
    apart: list[int] = []
    if sum(1 for n in busy.values() if n) > 1:  # one process ran everything: it served
        time.sleep(max(0.0, idle_s - (time.monotonic() - started)))
        idle = control.read(runs)
        idle_elapsed = time.monotonic() - started
        scale = counted.duration_s / max(idle_elapsed, 1e-3)
        apart = housekeeping(busy, {p: sum(idle[p]) for p in runs}, scale)
    total = sum(n for p, n in busy.items() if p not in apart)
    return {
        "tool": "callgrind",
        "warmup_requests": warmed.requests,
        "probe_requests": probe.requests,
        "requests": counted.requests,
        "errors": counted.errors,
        "duration_s": round(counted.duration_s, 3),
        "processes": len(runs) - len(apart),
        "threads": sum(len(counts[p]) for p in runs if p not in apart),
        "instructions": total,
        "per_request": round(total / counted.requests, 1),
        "by_process": [busy[p] for p in runs],
        "housekeeping": [busy[p] for p in apart],
        "idle_s": round(idle_elapsed, 3),
    }


def housekeeping(busy: Mapping[int, int], idle: Mapping[int, int], scale: float) -> list[int]:
    """The processes whose count over the batch is mostly what they do with no request at
    all: their idle window's count, scaled to the batch's length, is at least half of it.

    A prefork master (gunicorn's arbiter) wakes once a second to check its workers: its
    count follows the wall time of the batch, which valgrind stretches tens of times and a
    busy machine more, not the requests. It is left out of the per-request figure (and
    stored apart); a process that served requests keeps its own timer work, small beside
    them."""
    return [p for p, n in busy.items() if n and idle.get(p, 0) * scale >= n / 2]


#: ``start(wrapper, start_timeout_s)``: a server of the cell's stack, its argv prefixed with
#: ``wrapper``, running inside the block; raises :class:`pywebbench.bringup.StackFailure`
#: when it does not start.
StartCounted = Callable[[list[str], float], AbstractContextManager["RunningServer"]]


def count_fresh_server(
    start: StartCounted,
    start_timeout_s: float,
    cell: CellPlan,
    load: LoadConfig,
    generator_cpus: Sequence[int],
    run: Callable[[LoadSpec], LoadResult],
) -> dict[str, Any]:
    """Start a fresh server of ``cell``'s stack under valgrind with ``start`` (its plain
    start timeout ``start_timeout_s``, :data:`START_SLOWDOWN` times longer under valgrind)
    and count it (:func:`count_server`). The document also holds ``start_s`` (the counted
    server's start) and ``study_s`` (start, batches and stop); it is ``{"error": ...}`` when
    the server did not start under valgrind."""
    from pywebbench.bringup import StackFailure

    started = time.monotonic()
    jit = cell.variant.stack.interpreter.is_pypy
    with pipes() as prefix:
        try:
            with start(wrapper(prefix, jit=jit), start_timeout_s * START_SLOWDOWN) as server:
                start_s = time.monotonic() - started
                doc = count_server(server, prefix, cell, load, generator_cpus, run)
                doc["start_s"] = round(start_s, 3)
        except StackFailure as exc:
            doc = {"error": f"the server did not start under valgrind: {exc.reason}"}
    doc["study_s"] = round(time.monotonic() - started, 3)
    return doc


def count_server(
    server: RunningServer,
    prefix: str,
    cell: CellPlan,
    load: LoadConfig,
    generator_cpus: Sequence[int],
    run: Callable[[LoadSpec], LoadResult],
) -> dict[str, Any]:
    """Count ``cell`` on ``server``, a server of its stack started under :func:`wrapper`
    with ``prefix``: its batches are the cell's request on one connection, closed loop, run
    by ``run`` (which raises to interrupt); the server is killed at once after (nothing of a
    counted server needs a graceful exit). Returns :func:`count_batch`'s document, or
    ``{"error": ...}`` when counting failed (the study carries on: a count is never a
    failure of the stack)."""
    from pywebbench.load import iteration_figures
    from pywebbench.meter import tree

    def batch(requests: int) -> Batch:
        spec = cell.load_spec(
            server.base_url,
            load,
            generator_cpus,
            duration_s=BATCH_CAP_S,
            connections=1,
            rate=None,
            max_requests=requests,
        )
        result = run(spec)
        errors = int(iteration_figures(result)["errors"])
        return Batch(result.requests, errors, result.duration_s)

    try:
        doc = count_batch(
            Control(prefix),
            lambda: [p.pid for p in tree(server.pid)],
            lambda: batch(load.instructions_warmup_requests),
            batch,
            most=load.instructions_requests,
        )
        doc["valgrind"] = valgrind_version()
    except InstructionsError as exc:
        doc = {"error": str(exc)}
    finally:
        server.group.stop(0.0, signal.SIGKILL)
    return doc
