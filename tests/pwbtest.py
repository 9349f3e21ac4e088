"""Helpers shared by test modules across folders (import as ``pwbtest``; never import a
``conftest`` by name: which one ``conftest`` means depends on collection order)."""

from __future__ import annotations

import atexit
import fcntl
import http.server
import json
import os
import selectors
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pywebbench.study.config import StudyConfig
    from pywebbench.study.matrix import Matrix

# The pywebbench console script of the environment running the tests.
PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")

# Environment variable the runner tests mark their processes with (tests/run/conftest.py).
MARK_VAR = "PWB_TEST_MARK"


def planned(config: StudyConfig) -> Matrix:
    """``config``'s matrix as ``pywebbench run`` plans it: the interpreters it names resolved
    on this machine (discovery's cached probes), then :func:`~pywebbench.study.matrix.expand`."""
    from pywebbench.catalogue.interpreters import select
    from pywebbench.provision.pythons import install_request
    from pywebbench.study.matrix import expand

    return expand(config, select(config.matrix.interpreters, install=install_request))


@contextmanager
def exclusive(name: str) -> Iterator[None]:
    """Held by one test at a time across the suite's workers (``pytest -n 2``): an exclusive
    ``flock`` on ``pwb-tests-NAME.lock`` in the temporary directory. For tests that read
    state shared by the whole machine (the vgdb FIFOs of :func:`valgrind_leftovers`)."""
    with open(Path(tempfile.gettempdir()) / f"pwb-tests-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def wait_until(ready: Callable[[], bool], what: str, *, timeout_s: float = 10.0) -> None:
    """Polls ``ready`` every 20 ms until it is true, in place of a fixed sleep before a state
    is checked; fails the test naming ``what`` if it is still false after ``timeout_s`` (a
    deadline far past what the state takes, so only a broken state reaches it; issue 52)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"not within {timeout_s:g} s: {what}"
        time.sleep(0.02)


@contextmanager
def no_process_started() -> Iterator[None]:
    """Fails the code inside if it starts a process (``subprocess.Popen``, which
    ``subprocess.run`` uses): tells an answer read from a cache from one that ran something,
    exactly, where an elapsed-time bound would depend on the host's speed (issue 52)."""

    def refuse(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        raise AssertionError(f"a process was started: {str(args[:1])[:200]}")

    started = subprocess.Popen
    subprocess.Popen = refuse  # type: ignore[assignment, misc]
    try:
        yield
    finally:
        subprocess.Popen = started  # type: ignore[misc]


def valgrind_leftovers() -> set[str]:
    """The temporary directory's vgdb FIFOs and pywebbench's directories for them: a counted
    server is killed, and must not leave them behind (``instructions.pipes``)."""
    return {
        p.name
        for p in Path(tempfile.gettempdir()).iterdir()
        if p.name.startswith(("vgdb-pipe", "pwb-vgdb-"))
    }


# Cores for the load generator in tests: the server side gets core 0.
GEN_CPUS = [1] if (os.cpu_count() or 1) > 1 else [0]


def marked_processes(var: str, value: str) -> list[tuple[int, str]]:
    """Live, non-zombie processes (pid, command line) whose environment has ``var=value``,
    this process excepted."""
    needle = f"{var}={value}".encode()
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((int(entry.name), cmd.strip()))
    return found


def pwb(*args: str, results: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``pywebbench ARGS --results-dir RESULTS``, output captured, bounded in time."""
    return command([*args, "--results-dir", str(results)], timeout=timeout)


def command(
    args: Sequence[str],
    *,
    timeout: float = 240,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``pywebbench ARGS`` as ``subprocess.run([PYWEBBENCH, *args], capture_output=True,
    text=True, timeout=timeout, env=env, cwd=cwd)`` runs it, but forked from the zygote
    (pwbzygote.py: none of the command's import time). On ``timeout`` the command is killed
    and :class:`subprocess.TimeoutExpired` raised."""
    return _ZYGOTE.run(
        [PYWEBBENCH, *_quiet_guard(args)],
        timeout,
        dict(os.environ if env is None else env),
        cwd or os.getcwd(),
    )


def _quiet_guard(args: Sequence[str]) -> list[str]:
    """``args``, with ``--interference-max 2`` added to a ``run`` that names no interference
    option: such a test is of function, and under ``pytest -n 2`` (scripts/test.sh) the
    other worker's load on the same cores would flag every iteration and measure it three
    times. Tests of the guard name its options and get it as a user does."""
    if not args or args[0] != "run" or "--resume" in args:
        return list(args)
    if any(a.startswith("--interference") for a in args):
        return list(args)
    return [*args, "--interference-max", "2"]


class _Zygote:
    """The session's zygote process (started on first use, stopped at exit)."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._running: int | None = None  # the command's pid until its status is back

    def _start(self) -> socket.socket:
        if self._sock is not None and self._proc is not None and self._proc.poll() is None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("pwbzygote.py")), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            # a test's own marker (the census's, or one a test sets for its own count, as
            # the Ray tests' PWB_RAY_TEST_MARK) would make the session's zygote look like a
            # process that test left behind, when the test is the first to use it (under
            # pytest -n 2, any test may be its worker's first)
            env={k: v for k, v in os.environ.items() if not k.endswith("_TEST_MARK")},
        )
        theirs.close()
        ours.settimeout(120)
        if not json.loads(ours.recv(4096) or b"{}").get("ready"):
            raise RuntimeError("the test zygote did not start (pwbzygote.py)")
        ours.settimeout(None)
        self._sock = ours
        atexit.register(self.stop)
        return ours

    def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            self._proc.wait(30)
            self._proc = None

    def run(
        self, argv: list[str], timeout: float, env: dict[str, str], cwd: Path | str
    ) -> subprocess.CompletedProcess[str]:
        sock = self._start()
        null = os.open(os.devnull, os.O_RDONLY)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        request = {"argv": argv, "env": env, "cwd": str(cwd)}
        try:
            socket.send_fds(sock, [json.dumps(request).encode()], [null, out_w, err_w])
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        self._running = json.loads(sock.recv(4096))["pid"]
        try:
            out, err, status, expired = self._collect(sock, out_r, err_r, timeout)
        except BaseException:  # (Ctrl-C): the conversation is lost; so is this zygote
            if self._running is not None:
                os.kill(self._running, signal.SIGKILL)
            self._sock = None
            sock.close()
            raise
        if expired:
            raise subprocess.TimeoutExpired(argv, timeout, out, err)
        return subprocess.CompletedProcess(argv, status, out, err)

    def _collect(
        self, sock: socket.socket, out_r: int, err_r: int, timeout: float
    ) -> tuple[str, str, int, bool]:
        """The command's output and exit status; killed (``expired``) at ``timeout``."""
        deadline = time.monotonic() + timeout
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        reading = set(chunks)
        status: int | None = None
        expired = False
        try:
            with selectors.DefaultSelector() as sel:
                for fd in chunks:
                    sel.register(fd, selectors.EVENT_READ)
                sel.register(sock, selectors.EVENT_READ)
                while status is None or reading:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        if expired and (status is not None or left < -30):
                            break  # its output stays open in a process it left behind
                        if not expired:
                            expired = True
                            if self._running is not None:
                                os.kill(self._running, signal.SIGKILL)
                    for key, _ in sel.select(timeout=max(left, 0.2)):
                        if key.fileobj is sock:
                            status = json.loads(sock.recv(4096))["status"]
                            self._running = None
                            sel.unregister(sock)
                            continue
                        fd = int(key.fd)
                        data = os.read(fd, 65536)
                        if data:
                            chunks[fd].append(data)
                        else:
                            sel.unregister(fd)
                            reading.discard(fd)
        finally:
            for fd in chunks:
                os.close(fd)
        out, err = (_text(b"".join(chunks[fd])) for fd in (out_r, err_r))
        return out, err, -signal.SIGKILL if status is None else status, expired


def _text(data: bytes) -> str:
    """As :func:`subprocess.run` decodes with ``text=True`` (universal newlines)."""
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


_ZYGOTE = _Zygote()


def stop_zygote() -> None:
    """Stop the zygote (the session's end: before the process census)."""
    _ZYGOTE.stop()


@contextmanager
def process_census() -> Iterator[str]:
    """A fresh marker put in this process's environment (inherited by everything started
    inside the block); after the block no process may still carry it."""
    mark = uuid.uuid4().hex
    old = os.environ.get(MARK_VAR)
    os.environ[MARK_VAR] = mark
    try:
        yield mark
    finally:
        if old is None:
            os.environ.pop(MARK_VAR, None)
        else:
            os.environ[MARK_VAR] = old
    left = marked_processes(MARK_VAR, mark)
    assert not left, f"processes left behind: {left}"


# The neighbour process of the interference benchmark (docs/interference.md).
NEIGHBOUR = Path(__file__).parents[1] / "benchmarks" / "neighbour.py"


@contextmanager
def neighbour(core: int, on: str = "1s", off: str = "0") -> Iterator[subprocess.Popen[bytes]]:
    """A neighbour spinning ``on`` then sleeping ``off`` on ``core`` for the duration
    (bounded: it stops by itself after 120 s); stopped and reaped on exit."""
    proc = subprocess.Popen(
        [sys.executable, str(NEIGHBOUR), "--cpu", str(core), "--on", on, "--off", off,
         "--for", "120s"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


class _Hello(http.server.BaseHTTPRequestHandler):
    """Answers every GET with ``hello PATH HOST``, keep-alive unless asked to close."""

    protocol_version = "HTTP/1.1"
    server: UnixHttpServer

    def do_GET(self) -> None:  # noqa: N802  (the standard library's name)
        self.server.count()
        body = f"hello {self.path} {self.headers['Host']}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self) -> str:
        return "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class UnixHttpServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A small threaded HTTP/1.1 server on the unix socket ``path`` (the reference server
    listens on TCP only), counting the requests it answered (``served``). Serve it from a
    thread: ``serve_forever``, then ``shutdown`` and ``server_close``."""

    daemon_threads = True

    def __init__(self, path: str) -> None:
        super().__init__(path, _Hello)
        self.path = path
        self.served = 0
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:
            self.served += 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the generator closing its connections at the end of a run
