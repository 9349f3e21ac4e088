"""What the built-in frameworks share: pins per interpreter generation and the app contract.

Two pin sets exist because PyPy on Debian bookworm is Python 3.9: ``py39`` holds the newest
versions that install there (and on CPython 3.9), ``modern`` the current releases for Python
3.10+. Every pin is exact, so a stack's virtualenv is reproducible (and so its cache key is).
"""

from __future__ import annotations

from typing import ClassVar

from pywebbench.catalogue.base import Framework, Interpreter, free_threaded_reason
from pywebbench.catalogue.workloads import HTTP_WORKLOADS

MIN_PYTHON = (3, 9)

# Service clients every app may import lazily: redis-py (sync + redis.asyncio) and pg8000
# (pure-Python PostgreSQL client, works on CPython and PyPy; used by synchronous code).
CLIENT_PINS: dict[str, tuple[str, ...]] = {
    "modern": ("redis==8.1.0", "pg8000==1.31.6"),
    "py39": ("redis==7.0.1", "pg8000==1.31.5"),
}


def client_pins(interpreter: Interpreter) -> tuple[str, ...]:
    """The service clients' pins on ``interpreter``: its generation's, except pg8000 on
    Python 3.10, which keeps the 3.9 pin (pg8000 1.31.6 needs scramp 1.5.0, which needs
    Python >= 3.11: uv finds no solution on 3.10)."""
    pins = CLIENT_PINS[interpreter.generation]
    if interpreter.minor == "3.10":
        old = [p for p in CLIENT_PINS["py39"] if p.startswith("pg8000==")]
        pins = tuple(old + [p for p in pins if not p.startswith("pg8000==")])
    return pins


# psycopg 3 (pure-Python implementation over the system libpq) gives async code a real async
# PostgreSQL client. Not on PyPy: its ctypes binding fails there ("cannot create weak
# reference to 'weakref' object"), so async apps on PyPy run pg8000 in a thread pool.
ASYNC_PG_PINS: dict[str, tuple[str, ...]] = {
    "modern": ("psycopg==3.3.9",),
    "py39": ("psycopg==3.2.13",),
}


class AppFramework(Framework):
    """A framework whose app module lives in ``pywebbench/inside/apps`` (``pwb_<name>.py``).

    Subclasses set ``pins`` (per generation) and the contract's class attributes.
    ``only_binary`` names packages that must be installed from wheels only (provisioning
    passes ``--only-binary <name>`` to ``uv pip install`` for each); on PyPy 3.9 a source
    build of such packages fails (PyO3 needs PyPy >= 3.11).
    """

    description: ClassVar[str] = ""
    notes: ClassVar[str] = ""
    # What the io workload and the services use: "async" (event loop) or "blocking".
    io_style: ClassVar[str] = "blocking"
    pins: ClassVar[dict[str, tuple[str, ...]]] = {"modern": (), "py39": ()}
    only_binary: ClassVar[tuple[str, ...]] = ()
    workloads: frozenset[str] = HTTP_WORKLOADS  # not a ClassVar: see Framework
    system_packages: ClassVar[tuple[str, ...]] = ()
    #: Per CPython version ("3.13"), why it cannot run on that version's free-threaded build
    #: (measured: benchmarks/free_threaded_catalogue.py).
    free_threaded_unavailable: ClassVar[dict[str, str]] = {}

    def requirements(self, interpreter: Interpreter) -> list[str]:
        gen = interpreter.generation
        reqs = [*self.pins[gen], *client_pins(interpreter)]
        if self.io_style == "async" and not interpreter.is_pypy:
            reqs += ASYNC_PG_PINS[gen]
        return reqs

    def unavailable(self, interpreter: Interpreter) -> str | None:
        major, minor = (int(x) for x in interpreter.minor.split("."))
        if (major, minor) < MIN_PYTHON:
            return (
                f"the pywebbench apps need Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]}, "
                f"{interpreter.name} is {interpreter.version}"
            )
        return free_threaded_reason(self.free_threaded_unavailable, interpreter)

    def install_flags(self, interpreter: Interpreter) -> list[str]:
        """Extra ``uv pip install`` flags for the main requirements (``--only-binary``...)."""
        flags: list[str] = []
        for package in self.only_binary:
            flags += ["--only-binary", package]
        return flags
