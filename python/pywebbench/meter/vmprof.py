"""The sampled window of ``--flamegraph`` on PyPy: vmprof, switched on inside the server.

py-spy reads CPython's frame structures, which PyPy does not have; PyPy's profiler is vmprof
(built into PyPy as ``_vmprof``). It cannot attach from outside, so a PyPy server started for
a study with ``--flamegraph`` gets a start-up hook (``inside/hooks/sitecustomize.py``, put on
its PYTHONPATH with ``PWB_VMPROF_DIR``) through which a real-time signal starts and stops
vmprof in each process of the tree. vmprof samples on CPU time (``ITIMER_PROF``), per process;
the files are read with the ``vmprof`` package's reader and turned into the same collapsed
stacks py-spy gives, so the breakdown, the flame graph and ``compare`` read both alike.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pywebbench.catalogue.base import Stack
from pywebbench.meter.flame import RATE_HZ, FlameWindow, thread_cpu

#: The signal the hook listens to (a real-time one: servers use the classic ones).
SIGNAL = int(signal.SIGRTMIN) + 7
#: vmprof's sampling period inside the server (s): 1,000 samples per CPU-second.
PERIOD_S = 0.001
#: How long the processes get to stop vmprof and close their files.
STOP_TIMEOUT_S = 10.0


def vmprof_dir() -> Path:
    """Where the servers' vmprof files go (named by process id), private to this user."""
    return Path(tempfile.gettempdir()) / f"pwb-vmprof-{os.getuid()}"


def vmprof_env(flamegraph: bool, stack: Stack) -> dict[str, str]:
    """The environment that installs the hook in a PyPy server of a ``--flamegraph`` study
    (empty otherwise)."""
    if not (flamegraph and stack.interpreter.is_pypy):
        return {}
    where = vmprof_dir()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {"PWB_VMPROF_DIR": str(where), "PWB_VMPROF_SIGNAL": str(SIGNAL)}


def _signal(pids: Sequence[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, SIGNAL)
        except ProcessLookupError:
            pass


def frame_of(name: str) -> str:
    """vmprof's ``py:function:line:file`` as py-spy's ``function (file)``; anything else
    (a native symbol) as ``name (native)``."""
    kind, _, rest = name.partition(":")
    if kind != "py":
        return f"{name} (native)"
    function, _, rest = rest.partition(":")
    _, _, path = rest.partition(":")
    return f"{function} ({path})"


def read_stacks(path: Path, pid: int) -> dict[str, int]:
    """One process's vmprof file as collapsed stacks, under a ``thread (PID)`` root frame.

    vmprof's own call tree is read (it maps the JIT's machine code back to the Python
    functions it was traced from; a function the JIT inlined counts as its caller's)."""
    import vmprof  # type: ignore[import-untyped]  # the reader (PyPI; a pywebbench dependency)
    from vmprof.stats import EmptyProfileFile  # type: ignore[import-untyped]

    stacks: dict[str, int] = {}
    try:
        tree = vmprof.read_profile(str(path)).get_tree()
    except EmptyProfileFile:
        return stacks  # a process that ran no CPU in the window (an idle master)
    pending = [(tree, [f"thread ({pid}): process"])]
    while pending:
        node, above = pending.pop()
        here = [*above, frame_of(node.name)]
        children = list(node.children.values())
        own = int(node.count) - sum(int(c.count) for c in children)
        if own > 0:
            key = ";".join(here)
            stacks[key] = stacks.get(key, 0) + own
        pending += [(c, here) for c in children]
    return stacks


def vmprof_window(
    directory: Path,
    tree: Callable[[], list[int]],
    load: Callable[[], tuple[int, float]],
    *,
    packages: Mapping[str, str],
    app_paths: Sequence[str],
) -> dict[str, Any]:
    """Switch vmprof on in every process of the tree, run ``load()``, switch it off, and
    read the files: :class:`FlameWindow`'s document, or ``{"error": ...}``."""
    pids = tree()
    for pid in pids:
        for suffix in (".prof", ".done"):
            (directory / f"{pid}{suffix}").unlink(missing_ok=True)
    before = _process_cpu(pids)
    _signal(pids)
    requests, duration_s = load()
    _signal(pids)
    after = _process_cpu(pids)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if all((directory / f"{p}.done").exists() for p in pids if p in after):
            break
        time.sleep(0.05)
    stacks: dict[str, int] = {}
    for pid in pids:
        done, prof = directory / f"{pid}.done", directory / f"{pid}.prof"
        if done.exists() and prof.exists() and prof.stat().st_size:
            stacks.update(read_stacks(prof, pid))
        for path in (done, prof):
            path.unlink(missing_ok=True)
    if not stacks:
        return {
            "error": "vmprof wrote no samples: the server's processes did not answer the start "
            "signal (docs/flamegraphs.md#pypy)"
        }
    spent = {str(p): after[p][0] - before.get(p, (0.0, 0.0))[0] for p in after}
    system = sum(after[p][1] - before.get(p, (0.0, 0.0))[1] for p in after)
    return FlameWindow(
        stacks=stacks,
        thread_cpu_s={p: round(c, 3) for p, c in spent.items() if c > 0},
        rate_hz=int(round(1 / PERIOD_S)) if PERIOD_S else RATE_HZ,
        duration_s=round(duration_s, 3),
        requests=requests,
        tree_cpu_s=round(sum(spent.values()), 3),
        tree_system_s=round(system, 3),
        sampler="vmprof (PyPy)",
        processes=len(pids),
        packages=dict(packages),
        app_paths=list(app_paths),
    ).to_dict()


def _process_cpu(pids: Sequence[int]) -> dict[int, tuple[float, float]]:
    """PID -> (user + system, system) CPU seconds of all its threads."""
    out = {}
    for pid in pids:
        threads = thread_cpu([pid])
        if threads:
            out[pid] = (sum(c for c, _ in threads.values()), sum(s for _, s in threads.values()))
    return out
