"""PyPy's profiler, vmprof, switched on and off from outside (``run --flamegraph`` on PyPy).

Runs INSIDE a stack's virtualenv at interpreter start-up (this directory is put first on
PYTHONPATH only when ``PWB_VMPROF_DIR`` is set); never imports pywebbench, runs on PyPy 3.9.
vmprof cannot attach to a running process as py-spy does, so every process of the server
installs a handler for a real-time signal (``PWB_VMPROF_SIGNAL``, SIGRTMIN+7 by default;
servers use the classic signals for themselves): the first signal starts vmprof writing
``$PWB_VMPROF_DIR/<pid>.prof``, the next stops it and writes ``<pid>.done``. Forked workers
inherit the handler; each writes its own file.
"""

import os
import signal

_DIR = os.environ.get("PWB_VMPROF_DIR")
_STATE = {"pid": None, "fd": None}


def _toggle(signum, frame):
    import _vmprof

    pid = os.getpid()
    if _STATE["pid"] != pid:  # a forked worker: the parent's state is not this process's
        _STATE["pid"], _STATE["fd"] = pid, None
    if _STATE["fd"] is None:
        path = os.path.join(_DIR, "%d.prof" % pid)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        _STATE["fd"] = fd
        # fileno, period (s), memory, lines, native, real_time (CPU time, as samples are)
        _vmprof.enable(fd, 0.001, 0, 0, 0, 0)
        return
    _vmprof.disable()
    os.close(_STATE["fd"])
    _STATE["fd"] = None
    with open(os.path.join(_DIR, "%d.done" % pid), "w") as done:
        done.write("ok\n")


if _DIR:
    try:
        import _vmprof  # noqa: F401  (PyPy's own; CPython has none)

        _SIGNAL = int(os.environ.get("PWB_VMPROF_SIGNAL") or int(signal.SIGRTMIN) + 7)
        signal.signal(_SIGNAL, _toggle)
    except (ImportError, ValueError, OSError):
        pass  # not PyPy, or no real-time signals: the window records no samples
