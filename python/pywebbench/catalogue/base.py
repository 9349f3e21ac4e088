"""The types the catalogue is made of: interpreters, server adapters, frameworks, stacks.

These are the contracts between the pipeline stages (see docs/architecture.md). Server
adapters live one per module in :mod:`pywebbench.catalogue.servers`, frameworks one per module
in :mod:`pywebbench.catalogue.frameworks`. Code that runs *inside* a stack's virtualenv lives
in ``pywebbench/inside`` (:data:`APPS_DIR`: the framework apps, :data:`LAUNCHERS_DIR`: the
launcher scripts of servers started from Python); it must stay importable on Python 3.9 (PyPy)
and never imports pywebbench.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

#: Code run by a stack's interpreter, never imported by pywebbench itself.
INSIDE_DIR = Path(__file__).resolve().parents[1] / "inside"
#: The built-in framework apps (``pwb_<framework>.py``); put on PYTHONPATH of every server.
APPS_DIR = INSIDE_DIR / "apps"
#: The start-up hook that lets vmprof be switched on from outside (PyPy, ``--flamegraph``).
HOOKS_DIR = INSIDE_DIR / "hooks"
#: The launcher scripts (``launch_<server>.py``) of servers started from Python.
LAUNCHERS_DIR = INSIDE_DIR / "launchers"

# Application interfaces a server can host. Native servers ship their own framework, so a
# native server and its native "framework" share one interface name.
WSGI = "wsgi"
ASGI = "asgi"

# Packages that must come from a binary wheel on an implementation: their source builds fail
# there (PyPy 3.9: PyO3 needs PyPy >= 3.11). Pinned in the main install as ``--only-binary``.
BINARY_ONLY: dict[str, tuple[str, ...]] = {"pypy": ("pydantic-core", "cryptography")}


def interpreter_kind(
    implementation: str,
    free_threaded: bool,
    gil: str = "",
    jit: bool = False,
    optimizations: str = "",
) -> str:
    """What sets an interpreter apart, in a few words: ``free-threaded, PYTHON_GIL=1, JIT,
    PGO+LTO``; ``GIL`` for a default CPython build, ``PyPy JIT`` for PyPy."""
    if implementation == "pypy":
        parts = ["PyPy JIT"]
    else:
        parts = ["free-threaded" if free_threaded else "GIL"]
        parts += [f"PYTHON_GIL={gil}"] if gil else []
        parts += ["JIT"] if jit else []
    if optimizations:
        parts.append(optimizations)
    return ", ".join(parts)


@dataclass(frozen=True)
class Interpreter:
    """One Python interpreter found on this machine (or given by path)."""

    name: str  # short id used in filters and reports: "cpython3.11", "pypy3.9"
    implementation: str  # "cpython" | "pypy"
    version: str  # full language version, "3.11.7"
    path: str  # absolute path of the executable
    build: str = ""  # one line: compiler/build date, or PyPy's own version ("PyPy 7.3.11")
    #: A free-threaded build (``Py_GIL_DISABLED``; named ``cpython3.13t``). Whether the GIL is
    #: really off is a fact of the running server (``PYTHON_GIL``, C extensions), not of this.
    free_threaded: bool = False
    jit: bool = False  # the experimental JIT is built in (3.13+ ``--enable-experimental-jit``)
    optimizations: str = ""  # build optimisations: "PGO+LTO", "LTO", "" (none)
    #: ``PYTHON_GIL`` for a free-threaded build: "" as built (off unless an extension needs
    #: it), "0" forced off, "1" forced on. The GIL axis: ``cpython3.13t@gil1`` (same venv).
    gil: str = ""

    @property
    def minor(self) -> str:
        """Language version as ``"3.11"``."""
        return ".".join(self.version.split(".")[:2])

    @property
    def kind(self) -> str:
        """:func:`interpreter_kind` of this interpreter (``free-threaded, PYTHON_GIL=1``)."""
        return interpreter_kind(
            self.implementation, self.free_threaded, self.gil, self.jit, self.optimizations
        )

    @property
    def is_pypy(self) -> bool:
        return self.implementation == "pypy"

    @property
    def generation(self) -> str:
        """The package pins' generation: ``"py39"`` for Python 3.9 (PyPy included),
        ``"modern"`` for 3.10 and later."""
        major, minor = (int(x) for x in self.minor.split(".")[:2])
        return "py39" if (major, minor) < (3, 10) else "modern"


def free_threaded_reason(declared: Mapping[str, str], interpreter: Interpreter) -> str | None:
    """The reason a server or framework ``declared`` (per CPython version, "3.13") for not
    running on ``interpreter``'s free-threaded build; None on a GIL build or a version it
    did not declare."""
    if not interpreter.free_threaded:
        return None
    return declared.get(interpreter.minor)


@dataclass(frozen=True)
class InstallStep:
    """An extra ``uv pip install`` run after the main requirements of a stack.

    For packages that need special treatment, e.g. meinheld on CPython 3.11 (``--no-deps
    --no-build-isolation`` against a modern greenlet).
    """

    requirements: tuple[str, ...]
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchContext:
    """Everything an adapter needs to build the command line of one server process."""

    interpreter: Interpreter
    venv: Path  # the stack's virtualenv; executables are in venv / "bin"
    app_dir: Path  # directory put first on PYTHONPATH (APPS_DIR, or the user's project)
    app: str  # "module:callable" of the application (WSGI/ASGI), or the native app module
    host: str  # always a loopback address
    port: int  # ignored when ``unix_socket`` is set
    workers: int = 1
    threads: int = 1
    env: dict[str, str] = field(default_factory=dict)  # extra env for the app (service URLs...)
    max_requests: int = 0  # recycle each worker after this many requests; 0 = never
    #: Server settings the user set (``matrix.server_options``), among the adapter's
    #: ``settable`` ones; the adapter's own value applies to any other.
    options: dict[str, int] = field(default_factory=dict)
    #: Listen on this unix-domain socket instead of host:port (``--bind unix``); only for
    #: adapters with a ``unix_bind``.
    unix_socket: Path | None = None
    #: What the server is asked to speak: "http1", "h2c" (``--protocol h2c``; only for
    #: adapters with an ``h2c``) or "ws" (WebSocket workloads; adapters with a ``websocket``).
    protocol: str = "http1"

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


@dataclass(frozen=True)
class LaunchCommand:
    """How to start one server: argv, extra environment, working directory."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


class ServerAdapter:
    """A web server that can host apps of one interface. One subclass per module.

    Subclasses set the class attributes and implement :meth:`command`. Everything a report
    must show for fairness comes from :meth:`settings`.
    """

    name: ClassVar[str]  # "gunicorn-sync", "uvicorn-uvloop", ...
    interface: ClassVar[str]  # WSGI, ASGI, or a native interface such as "tornado"
    description: ClassVar[str] = ""
    # Pitfalls the adapter handles or that a user must know; shown by `pywebbench stacks`.
    notes: ClassVar[str] = ""
    stop_timeout_s: ClassVar[float] = 5.0  # after SIGTERM, then SIGKILL to the process group
    #: Server settings a user may set (``matrix.server_options``): name -> what it does.
    settable: ClassVar[dict[str, str]] = {}
    # Debian packages needed to build or run it (checked by provisioning, named in errors).
    system_packages: ClassVar[tuple[str, ...]] = ()
    # Worker recycling: the server's flag that replaces a worker after N requests, or None
    # when it has none (``--worker-max-requests`` then skips it for N > 0).
    max_requests_flag: ClassVar[str | None] = None
    # Unix-domain socket (``--bind unix``): how the server is told to listen on one instead
    # of host:port (``"--uds PATH"``), or None when it cannot (its unix cells are skipped).
    unix_bind: ClassVar[str | None] = None
    # HTTP/2 over cleartext with prior knowledge (``--protocol h2c``, docs/http2.md): how the
    # server is told to serve it (``"--http 2"``), or None when it cannot (its h2c cells are
    # skipped). ``LaunchContext.protocol`` says which a launch asks for.
    h2c: ClassVar[str | None] = None
    # WebSocket (the ws-echo workload, docs/websocket.md): what serves it (``"wsproto"``),
    # or None when the server cannot (its ws cells are skipped). A launch for ws cells has
    # ``LaunchContext.protocol`` "ws".
    websocket: ClassVar[str | None] = None

    def max_requests_args(self, ctx: LaunchContext) -> list[str]:
        """The recycling flags for ``ctx.max_requests`` (none for 0); ValueError when the
        server cannot recycle workers."""
        if not ctx.max_requests:
            return []
        if self.max_requests_flag is None:
            raise ValueError(f"{self.name} has no worker recycling (max requests) setting")
        return [self.max_requests_flag, str(ctx.max_requests)]

    def requirements(self, interpreter: Interpreter) -> list[str]:
        """Pinned requirement specifiers for this server on this interpreter."""
        raise NotImplementedError

    def extra_installs(self, interpreter: Interpreter) -> list[InstallStep]:
        """Install steps run after the stack's requirements (rarely needed)."""
        return []

    def unavailable(self, interpreter: Interpreter) -> str | None:
        """Why this server cannot run on ``interpreter`` (declared, not discovered), or None."""
        return None

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        """The command that starts the server on ``ctx.host:ctx.port`` (or on
        ``ctx.unix_socket`` when set) with logging off."""
        raise NotImplementedError

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        """The fairness manifest: workers, threads, worker class, loop, parser, keep-alive,
        access log, backlog... Values must be what the server really runs with."""
        return {"workers": ctx.workers, "threads": ctx.threads, "access_log": False}


class Framework:
    """An application framework: the same workloads implemented once per framework.

    Built-in frameworks set these as class attributes; a user's app (``UserFramework``) as
    instance attributes, so they are not ``ClassVar``.
    """

    name: str  # "flask", "raw-wsgi", "tornado" (native)...
    interface: str  # WSGI, ASGI or a native interface name
    app: str  # "module:callable" of a module in APPS_DIR (or the framework's app_dir)
    workloads: frozenset[str]  # names of the workloads it implements
    system_packages: ClassVar[tuple[str, ...]] = ()

    def requirements(self, interpreter: Interpreter) -> list[str]:
        """Pinned requirement specifiers for the framework (and what its workloads need)."""
        raise NotImplementedError

    def extra_installs(self, interpreter: Interpreter) -> list[InstallStep]:
        return []

    def unavailable(self, interpreter: Interpreter) -> str | None:
        return None


@dataclass(frozen=True)
class Stack:
    """interpreter + server + framework (+ the exact requirements): one virtualenv."""

    interpreter: Interpreter
    server: ServerAdapter
    framework: Framework
    requirements: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.interpreter.name}/{self.server.name}/{self.framework.name}"

    def install_steps(self) -> list[InstallStep]:
        """Extra ``uv pip install`` runs after the requirements: server's, then framework's."""
        return list(self.server.extra_installs(self.interpreter)) + list(
            self.framework.extra_installs(self.interpreter)
        )

    def install_flags(self) -> tuple[str, ...]:
        """Flags for the main ``uv pip install`` (binary-only packages on this implementation)."""
        flags: list[str] = []
        for pkg in BINARY_ONLY.get(self.interpreter.implementation, ()):
            flags += ["--only-binary", pkg]
        return tuple(flags)

    def system_packages(self) -> tuple[str, ...]:
        """Debian packages the server and framework need (checked before provisioning)."""
        return tuple(
            dict.fromkeys(
                tuple(self.server.system_packages) + tuple(self.framework.system_packages)
            )
        )

    def env_key(self) -> str:
        """Hash of what defines the virtualenv; the cache key of provisioning."""
        python: list[object] = [
            self.interpreter.path,
            self.interpreter.version,
            self.interpreter.build,
        ]
        if self.interpreter.free_threaded:  # never the GIL build's venv (keys unchanged for it)
            python.append("free-threaded")
        blob = json.dumps(
            {
                "python": python,
                "requirements": sorted(self.requirements),
                "flags": list(self.install_flags()),
                "steps": [[list(s.requirements), list(s.flags)] for s in self.install_steps()],
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
