"""The reference HTTP/1.1 server (Rust), started as a separate, pinned process.

The server itself lives in ``crates/refserver``; this module gives it a Python face:

- :class:`RefServerConfig`: the configuration (the same fields as the Rust struct).
- :class:`RefServer`: a context manager that runs ``pywebbench refserver`` as a
  :class:`~pywebbench.launch.process.ProcessGroup` (optionally pinned to CPUs), waits until
  it listens, exposes ``.url``, ``.port`` and ``.stats()``, and on exit stops the whole group
  (SIGTERM, then SIGKILL after a timeout). The group's watchdog stops it if this process dies.
- :func:`serve`: run the server in the calling process until SIGINT/SIGTERM (what the
  ``pywebbench refserver`` command does; ``--help`` there lists the flags).

Example::

    with RefServer(delay_ms=1.0, cpus=[0]) as srv:
        ...  # drive load at srv.url
        assert srv.stats()["requests"] > 0
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import http.client
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pywebbench.launch.process import ProcessGroup

__all__ = [
    "MODES",
    "RefServer",
    "RefServerConfig",
    "RefServerError",
    "engine_defaults",
    "serve",
]

#: Misbehaviour modes, in the order of ``/__stats`` ``modes`` (checked against the Rust list).
MODES: tuple[str, ...] = (
    "normal",
    "chunked",
    "close-mid-response",
    "garbage-status",
    "endless-headers",
    "huge-body",
    "drip",
    "reset",
    "bad-chunked",
    "no-response",
    "close-before-response",
)

READY_PREFIX = "listening on "


class RefServerError(RuntimeError):
    """The reference server could not be started or stopped."""


@dataclass
class RefServerConfig:
    """Configuration of the reference server; mirrors the Rust ``RefServerConfig``.

    Times are in milliseconds (fractions allowed) unless the name says ``_s``.
    ``threads=None`` means one event-loop thread per pinned CPU (one if not pinned).
    """

    host: str = "127.0.0.1"
    port: int = 0
    threads: int | None = None
    cpus: list[int] = field(default_factory=list)
    delay_ms: float = 0.0
    delay_jitter_ms: float = 0.0
    delay_ramp_s: float = 0.0  # delay_ms falls to 0 over this many seconds, then stays 0
    delay_saw_s: float = 0.0  # delay rises 0 -> delay_ms over each such period: never settles
    service_ms: float = 0.0  # serial service time per thread: a single-server FIFO queue
    stall_ms: float = 0.0
    stall_every_s: float = 0.0
    header_timeout_ms: float = 10_000.0
    body_timeout_ms: float = 60_000.0
    idle_timeout_ms: float = 0.0
    write_timeout_ms: float = 60_000.0
    mode: str = "normal"
    drip_interval_ms: float = 10.0
    max_connections: int = 0
    backlog: int = 4096
    seed: int = 0

    def resolved_threads(self) -> int:
        """The thread count actually used."""
        if self.threads is not None:
            return self.threads
        return max(1, len(self.cpus))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form the Rust side takes."""
        d = dataclasses.asdict(self)
        d["threads"] = self.resolved_threads()
        d["cpus"] = list(self.cpus)
        return d

    def to_json(self) -> str:
        """The config as the JSON document ``_engine.refserver_serve`` takes."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> RefServerConfig:
        """Parses a JSON config (missing fields take their defaults)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("refserver config: expected a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"refserver config: unknown field(s) {', '.join(unknown)}")
        return cls(**data)

    def validate(self) -> None:
        """Raises ``ValueError`` (``"<field>: <why>"``) if the Rust side would refuse it."""
        from pywebbench import _engine

        _engine.refserver_validate(self.to_json())


@functools.cache
def engine_defaults() -> dict[str, Any]:
    """Every field of the Rust ``RefServerConfig`` with its default: the one source of the
    ``pywebbench refserver`` flags' defaults (``threads`` is 1 there: one per pinned CPU)."""
    from pywebbench import _engine

    defaults: dict[str, Any] = json.loads(_engine.refserver_config_defaults())
    return defaults


def serve(config: RefServerConfig, *, quiet: bool = False) -> None:
    """Runs the server in this process until SIGINT or SIGTERM.

    Prints ``listening on HOST:PORT`` on stdout (flushed) once the port accepts connections,
    unless ``quiet``.
    """
    from pywebbench import _engine

    if config.cpus:
        os.sched_setaffinity(0, config.cpus)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)  # SIGTERM stops it like Ctrl-C: exit status 0
    host = f"[{config.host}]" if ":" in config.host else config.host

    def ready(port: int) -> None:
        if not quiet:
            print(f"{READY_PREFIX}{host}:{port}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        _engine.refserver_serve(config.to_json(), ready)


class RefServer:
    """The reference server in a separate process group, as a context manager.

    ``RefServer(config)`` or ``RefServer(delay_ms=1, cpus=[0], ...)`` (keyword arguments
    are :class:`RefServerConfig` fields). The port is 0 (a free one) by default.
    """

    def __init__(
        self,
        config: RefServerConfig | None = None,
        *,
        startup_timeout: float = 15.0,
        stop_timeout: float = 5.0,
        python: str | None = None,
        **fields: Any,
    ) -> None:
        if config is None:
            config = RefServerConfig(**fields)
        elif fields:
            config = dataclasses.replace(config, **fields)
        self.config = config
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.python = python or sys.executable
        self._group: ProcessGroup | None = None
        self._log_path: Path | None = None
        self._port: int | None = None
        self._host = config.host
        #: Exit status of the server process once stopped (0 = it stopped on SIGTERM itself;
        #: -9 = it had to be killed).
        self.returncode: int | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> RefServer:
        """Launches the server and waits until it accepts connections."""
        if self._group is not None:
            raise RefServerError("RefServer already started")
        self.config.validate()
        fd, log = tempfile.mkstemp(prefix="pwb-refserver-", suffix=".log")
        os.close(fd)
        self._log_path = Path(log)
        argv = [self.python, "-m", "pywebbench", "refserver", "--config-json"]
        argv.append(self.config.to_json())
        env = dict(os.environ)
        # The child must import this very pywebbench, wherever it is installed.
        pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(
            [pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        try:
            self._group = ProcessGroup.start(
                argv,
                log_path=self._log_path,
                env=env,
                orphan_grace_s=self.stop_timeout,
                orphan_paths=[self._log_path],
            )
            atexit.register(self.stop)
            self._port = self._wait_ready(self._group)
        except BaseException:
            self.stop()
            raise
        return self

    def _output(self) -> str:
        return (self._group.output().strip() if self._group else "") or "(empty)"

    def _wait_ready(self, group: ProcessGroup) -> int:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            exited = group.poll() is not None  # read before the log: no line lost
            for line in group.output().split("\n")[:-1]:  # complete lines only
                if line.startswith(READY_PREFIX):
                    return int(line.rsplit(":", 1)[1])
            if exited:
                raise RefServerError(
                    f"refserver exited with status {group.returncode} before listening; "
                    f"output: {self._output()}"
                )
            if time.monotonic() >= deadline:
                raise RefServerError(
                    f"refserver did not report readiness within {self.startup_timeout} s"
                    f"; output: {self._output()}"
                )
            time.sleep(0.01)

    def stop(self) -> None:
        """Stops the process group: SIGTERM, then SIGKILL after ``stop_timeout``."""
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        group, self._group = self._group, None
        try:
            if group is not None:
                self.returncode = group.stop(self.stop_timeout)
        finally:
            if self._log_path is not None:
                self._log_path.unlink(missing_ok=True)
                self._log_path = None

    def __enter__(self) -> RefServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- accessors -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port."""
        if self._port is None:
            raise RefServerError("RefServer is not started")
        return self._port

    @property
    def host(self) -> str:
        """The bound host (a loopback address)."""
        return self._host

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (IPv6 hosts in brackets)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int:
        """PID of the server process (also its process-group id)."""
        if self._group is None:
            raise RefServerError("RefServer is not started")
        return self._group.pid

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._group is not None and self._group.alive()

    def stats(self, timeout: float = 5.0) -> dict[str, Any]:
        """The server's counters (``GET /__stats``): requests, per-mode counts, 400s, ..."""
        conn = http.client.HTTPConnection(self._host, self.port, timeout=timeout)
        try:
            conn.request("GET", "/__stats", headers={"Connection": "close"})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise RefServerError(f"/__stats answered {resp.status}")
            stats: dict[str, Any] = json.loads(body)
            return stats
        finally:
            conn.close()
