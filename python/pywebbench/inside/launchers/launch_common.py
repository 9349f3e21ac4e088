"""Shared helpers of the pywebbench launcher scripts (``launch_*.py``).

Runs inside a stack's virtualenv, on Python 3.9+ (PyPy included); never imports pywebbench.
Every launcher takes the same command line::

    python launch_<server>.py --app module:callable --host 127.0.0.1 --port 8000 \
        --workers 2 --threads 4 [--backlog 2048] [--unix-socket PATH] [server-specific options]

``--unix-socket PATH`` replaces host and port (only launchers that pass ``args.unix_socket`` to
:func:`bind_socket` honour it; their adapter declares ``unix_bind``).

Server-specific options (``--connection-limit 1000``...) are required: their values come from
the server's adapter in pywebbench (``launcher_options()``), the one place they are set.

Workers are processes: the launcher binds the listening socket once, then forks ``workers``
processes that all accept on it (the parent only waits, and takes its children down with it).
"""

import argparse
import importlib
import os
import signal
import socket
import sys

DEFAULT_BACKLOG = 2048


def parse_args(description, argv=None, options=None):
    """The common launcher command line, plus ``options``: {"--flag": type} of required
    server-specific options (read as ``args.flag``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--app", required=True, help="module:callable of the WSGI/ASGI app")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workers", type=int, default=1, help="processes")
    p.add_argument("--threads", type=int, default=1, help="threads per process (if used)")
    p.add_argument("--backlog", type=int, default=DEFAULT_BACKLOG, help="listen backlog")
    p.add_argument("--unix-socket", default=None, help="listen on this unix socket instead")
    for flag, kind in (options or {}).items():
        p.add_argument(flag, type=kind, required=True)
    args = p.parse_args(argv)
    if args.workers < 1 or args.threads < 1:
        p.error("--workers and --threads must be >= 1")
    return args


def load_app(spec):
    """Import ``module:callable`` (callable may be dotted: ``mod:obj.attr``)."""
    module_name, _, attr = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in (attr or "app").split("."):
        obj = getattr(obj, part)
    return obj


def bind_socket(host, port, backlog=DEFAULT_BACKLOG, unix_socket=None):
    """A listening, non-blocking TCP socket on host:port with SO_REUSEADDR and TCP_NODELAY
    (which Linux copies to every accepted connection); with ``unix_socket``, a unix-domain
    socket at that path instead."""
    if unix_socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(unix_socket)
    else:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    sock.listen(backlog)
    # Non-blocking: with several worker processes on one socket, a worker woken for a
    # connection another worker took must not block in accept().
    sock.setblocking(False)
    sock.set_inheritable(True)
    return sock


def nodelay(sock):
    """Switch Nagle's algorithm off on an accepted connection (no 40 ms delayed-ACK stall
    when a server writes headers and body in two sends)."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):
        pass


def serve_workers(workers, serve):
    """Run ``serve()`` in this process (1 worker) or in ``workers`` forked children.

    With children, the parent forwards SIGTERM/SIGINT to them, and if one dies it stops the
    others and exits with that child's status, so a broken worker fails the launch visibly.
    """
    if workers == 1:
        serve()
        return
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                serve()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - report and exit non-zero
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        children.append(pid)

    def forward(signum, _frame):
        for child in children:
            try:
                os.kill(child, signum)
            except OSError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    alive = set(children)
    while alive:
        try:
            pid, raw = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        alive.discard(pid)
        code = os.waitstatus_to_exitcode(raw) if hasattr(os, "waitstatus_to_exitcode") else raw
        if code != 0 and status == 0:
            status = code if code > 0 else 128 - code
            forward(signal.SIGTERM, None)
    sys.exit(status)


def keep_socketify_listen_host():
    """Keep the host string socketify hands to uSockets alive until the bind.

    socketify's ``App.listen`` copies the host into a temporary ``ffi.new("char[]")`` that
    nothing keeps: on PyPy a minor collection frees it before uSockets reads it, and the bind
    fails ("Failed to listen on port N") on a free port. A small nursery makes that likely
    (PyPy sized from a 1 MB cache failed 3 of 14 launches, each of three attempts; from a 480 MB
    cache, rarely). Each ``listen`` runs with the module's ``ffi`` behind a proxy that keeps
    what ``new`` returns on the app."""
    import socketify.socketify as s

    original = s.App.listen
    if getattr(original, "pwb_keeps_host", False):
        return

    def listen(self, *args, **kwargs):
        real, kept = s.ffi, []

        class Keeping:
            def __getattr__(self, name):
                return getattr(real, name)

            def new(self, *a, **kw):
                kept.append(real.new(*a, **kw))
                return kept[-1]

        s.ffi = Keeping()
        try:
            return original(self, *args, **kwargs)
        finally:
            s.ffi = real
            self.pwb_listen_buffers = kept

    listen.pwb_keeps_host = True
    s.App.listen = listen
