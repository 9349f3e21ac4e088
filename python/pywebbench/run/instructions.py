"""Instructions per request (``--instructions``): a deterministic cost, counted under valgrind.

For a cell, a separate server of the cell's stack is started under Debian's valgrind
(``callgrind``, every child process traced, instrumentation off at start), with what would
make the count vary fixed (``PYTHONHASHSEED=0``). A warm-up batch of requests runs
uninstrumented; then ``callgrind_control`` switches instrumentation on in every process of
the server's tree and zeroes its counters, a fixed batch of requests runs (closed loop, one
connection), and the user-space instructions executed by every thread of every process are
read back and divided by the requests completed.

The server under valgrind runs tens of times slower: nothing of it is a timed figure, and it
is never stored as an iteration. Method and limits: docs/instructions.md.
"""

from __future__ import annotations

import math
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.load import LoadResult, LoadSpec
    from pywebbench.run.config import LoadConfig
    from pywebbench.run.matrix import CellPlan

#: How long one ``callgrind_control`` command may take (it reaches a process blocked in a
#: syscall through valgrind's gdbserver, which takes a few hundred milliseconds).
CONTROL_TIMEOUT_S = 30.0
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

_RUN = re.compile(r"^PID (?P<pid>\d+):", re.MULTILINE)
_THREAD = re.compile(r"^\s*Th\s+\d+\s+(?P<ir>[\d,]+)\s*$", re.MULTILINE)
_PID_BLOCK = re.compile(r"^PID (?P<pid>\d+):.*?(?=^PID \d+:|\Z)", re.MULTILINE | re.DOTALL)


class InstructionsError(Exception):
    """valgrind is missing, cannot run the stack, or failed; the message is one line."""


def valgrind_tools() -> tuple[str, str]:
    """The ``valgrind`` and ``callgrind_control`` executables; :class:`InstructionsError`
    when they are not installed."""
    valgrind = shutil.which("valgrind")
    control = shutil.which("callgrind_control")
    if valgrind is None or control is None:
        raise InstructionsError(
            "--instructions needs valgrind, which is not installed "
            "(Debian: apt-get install valgrind)"
        )
    return valgrind, control


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
    """Before a study starts: valgrind and callgrind_control are installed and run."""
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


def wrapper(*, jit: bool = False, valgrind: str | None = None) -> list[str]:
    """The command a counted server's argv is prefixed with (``jit``: the interpreter writes
    machine code at run time, which valgrind must re-check: ``--smc-check=all``)."""
    return [
        "env",
        *(f"{k}={v}" for k, v in COUNT_ENV.items()),
        valgrind or valgrind_tools()[0],
        "--tool=callgrind",
        "--trace-children=yes",
        "--instr-atstart=no",
        "--callgrind-out-file=/dev/null",
        "--error-limit=no",
        *(["--smc-check=all"] if jit else []),
    ]


def active_runs(pids: Sequence[int], *, control: str | None = None) -> list[int]:
    """Which of ``pids`` are callgrind runs answering ``callgrind_control``."""
    out = _control([], control=control)
    runs = {int(m["pid"]) for m in _RUN.finditer(out)}
    return [p for p in pids if p in runs]


def _control(args: Sequence[str], *, control: str | None = None) -> str:
    argv = [control or valgrind_tools()[1], *args]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CONTROL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise InstructionsError(f"callgrind_control {' '.join(args)} timed out") from None
    except OSError as exc:
        raise InstructionsError(f"callgrind_control: {exc}") from None
    return done.stdout


def parse_counts(text: str) -> dict[int, list[int]]:
    """``callgrind_control -e Ir``'s output: per process, the instructions of each thread
    that executed any (callgrind lists no row for a thread, or a process, that executed none
    since the counters were zeroed: an empty list then)."""
    counts: dict[int, list[int]] = {}
    for block in _PID_BLOCK.finditer(text):
        if "Totals:" not in block.group(0):
            continue
        threads = [int(m["ir"].replace(",", "")) for m in _THREAD.finditer(block.group(0))]
        counts[int(block["pid"])] = threads
    return counts


@dataclass(frozen=True)
class Batch:
    """What a load batch did: the requests it completed, its errors and its seconds."""

    requests: int
    errors: int
    duration_s: float


def _read(runs: Sequence[int], control: str | None) -> dict[int, list[int]]:
    """Every process's per-thread counts since they were zeroed."""
    counts = parse_counts(_control(["-e", "Ir", *map(str, runs)], control=control))
    missing = [p for p in runs if p not in counts]
    if missing:
        raise InstructionsError(f"no instruction count from process(es) {missing}")
    return counts


def batch_size(probe_instructions: int, probe_requests: int, most: int) -> int:
    """Requests of the counted batch: enough for :data:`BATCH_INSTRUCTIONS` at the probe's
    instructions per request, at least :data:`LEAST_REQUESTS`, at most ``most``."""
    per_request = probe_instructions / max(probe_requests, 1)
    wanted = math.ceil(BATCH_INSTRUCTIONS / per_request) if per_request > 0 else most
    return max(min(wanted, most), min(LEAST_REQUESTS, most))


def count_batch(
    pids: Callable[[], Sequence[int]],
    warm: Callable[[], Batch],
    batch: Callable[[int], Batch],
    *,
    most: int,
    idle_s: float = IDLE_S,
    control: str | None = None,
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
    runs = active_runs(pids(), control=control)
    if not runs:
        raise InstructionsError("no process of the server answers callgrind_control")
    ids = [str(p) for p in runs]
    _control(["--instr=on", *ids], control=control)
    _control(["--zero", *ids], control=control)
    probe = batch(PROBE_REQUESTS)
    # the busiest process: a master's timer work, which follows the wall time, must not
    # change the batch's size from one count to the next
    size = batch_size(max(map(sum, _read(runs, control).values())), probe.requests, most)
    _control(["--zero", *ids], control=control)
    counted = batch(size)
    counts = _read(runs, control)
    if counted.requests == 0:
        raise InstructionsError("the counted batch completed no request")
    busy = {p: sum(counts[p]) for p in runs}
    idle_elapsed = 0.0
    apart: list[int] = []
    if sum(1 for n in busy.values() if n) > 1:  # one process ran everything: it served
        _control(["--zero", *ids], control=control)
        started = time.monotonic()
        time.sleep(idle_s)
        idle = _read(runs, control)
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


def counted(
    pids: Callable[[], Sequence[int]],
    warm: Callable[[], Batch],
    batch: Callable[[int], Batch],
    *,
    most: int,
) -> dict[str, Any]:
    """:func:`count_batch`, or ``{"error": ...}`` when counting failed (the study carries
    on: a count is never a failure of the stack)."""
    try:
        doc = count_batch(pids, warm, batch, most=most)
    except InstructionsError as exc:
        return {"error": str(exc)}
    doc["valgrind"] = valgrind_version()
    return doc


def count_server(
    server: RunningServer,
    cell: CellPlan,
    load: LoadConfig,
    generator_cpus: Sequence[int],
    run: Callable[[LoadSpec], LoadResult],
) -> dict[str, Any]:
    """Count ``cell`` on ``server``, a server of its stack started under :func:`wrapper`:
    its batches are the cell's request on one connection, closed loop, run by ``run`` (which
    raises to interrupt); the server is killed at once after (nothing of a counted server
    needs a graceful exit). Returns :func:`counted`'s document."""
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

    doc = counted(
        lambda: [p.pid for p in tree(server.pid)],
        lambda: batch(load.instructions_warmup_requests),
        batch,
        most=load.instructions_requests,
    )
    server.group.stop(0.0, signal.SIGKILL)
    return doc
