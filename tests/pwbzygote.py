"""The tests' ``pywebbench`` command without its start-up: one process that imported the CLI,
its commands and scipy.stats/ruptures once, and forks a child per command.

Each ``pywebbench`` process spends 0.5-2 s of CPU importing before it does anything (scipy.stats
and ruptures alone take ~1.4 s, and ``run`` and ``ab`` need both). The suite runs about 130
(72 of them ``run``); ``pwbtest.pwb`` sends them here instead. A child is the zygote forked: the
same interpreter, the same code, imports done and nothing else run; it takes the caller's
argv, environment, working directory and standard streams, runs the CLI's ``main`` and exits
through the interpreter's normal shutdown, as the console script does. Tests of the console
script itself (its exit codes, signals, Ctrl-C) start it as a subprocess, as before.

Protocol, over a ``SOCK_SEQPACKET`` socket pair, one command at a time: the caller sends a JSON
request (``argv``, ``env``, ``cwd``) with three file descriptors (stdin, stdout, stderr); the
zygote forks, answers ``{"pid": N}``, waits for the child and answers ``{"status": S}`` (the
exit code, or minus the signal that ended it, as :mod:`subprocess` reports it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

#: Messages are small JSON documents; the request's environment is the largest.
MESSAGE_BYTES = 1 << 20


def _preload() -> None:
    """Import what every command imports, and the command modules themselves."""
    import importlib
    import pkgutil

    import pywebbench.cli  # noqa: F401
    import pywebbench.commands as commands
    import ruptures  # noqa: F401
    import scipy.stats  # noqa: F401

    for info in pkgutil.iter_modules(commands.__path__):
        importlib.import_module(f"{commands.__name__}.{info.name}")


def _child(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become the command, then run it (exits through SystemExit)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = request["env"]
    assert isinstance(env, dict)
    argv = request["argv"]
    assert isinstance(argv, list)
    # sys.path as the console script's interpreter builds it: the script's directory first,
    # then the request's PYTHONPATH (a test may add a directory to it), then the rest
    zygote_path = _entries(os.environ.get("PYTHONPATH"))
    rest = [p for p in sys.path[1:] if p not in zygote_path]
    script_dir = os.path.dirname(os.path.realpath(argv[0]))
    sys.path[:] = [script_dir, *_entries(env.get("PYTHONPATH")), *rest]
    os.environ.clear()
    os.environ.update(env)
    cwd = request["cwd"]
    assert isinstance(cwd, str)
    os.chdir(cwd)
    sys.argv = [str(a) for a in argv]
    from pywebbench.cli import main

    main()
    sys.exit(0)


def _entries(pythonpath: str | None) -> list[str]:
    return [p for p in (pythonpath or "").split(os.pathsep) if p]


def serve(sock: socket.socket) -> None:
    """Answer requests until the caller closes its end."""
    _preload()
    sock.send(b'{"ready": true}')
    while True:
        message, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 3)
        if not message:
            return
        request = json.loads(message)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        sock.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
