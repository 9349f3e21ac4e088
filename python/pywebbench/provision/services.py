"""Real backing services for the workloads: redis-server and PostgreSQL 15 on loopback.

:func:`start_services` starts what the selected workloads need, each in its own process group
on a free 127.0.0.1 port with its files in a fresh temporary directory, seeds it, yields the
environment for the apps (``PWB_REDIS_URL``, ``PWB_DATABASE_URL``) and tears everything down on
exit and on exceptions (SIGTERM/SIGINT to the group, then SIGKILL); if this process dies
without doing so, even by SIGKILL, the watchdog of :mod:`pywebbench.launch.process` does it.

- redis: ``redis-server --bind 127.0.0.1 --port P --save '' --appendonly no``; seeded with the
  2,000-character value and a zeroed click counter.
- PostgreSQL: Debian's binaries (``/usr/lib/postgresql/<v>/bin``); ``initdb`` with trust
  authentication on loopback only, ``fsync=off`` (benchmark data is disposable); as root both
  run as the ``postgres`` system user (PostgreSQL refuses root). Seeded with TechEmpower's
  ``fortune`` table. When PostgreSQL is not installed the fortunes workload falls back to an
  SQLite file (said in :attr:`ServiceEnv.notes`), unless ``database="postgres"`` demands it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from pywebbench.catalogue.workloads import (
    FORTUNE_ROWS,
    POSTGRES,
    REDIS,
    REDIS_COUNTER_KEY,
    REDIS_VALUE,
    REDIS_VALUE_KEY,
)
from pywebbench.launch import free_port
from pywebbench.launch.process import ProcessGroup, tail

SERVICE_NAMES = (REDIS, POSTGRES)
PG_USER = "pwb"
PG_DB = "pwb"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

__all__ = [
    "SERVICE_NAMES",
    "free_port",
    "ServiceEnv",
    "ServiceError",
    "find_postgres_bin",
    "services_available",
    "start_services",
]


class ServiceError(RuntimeError):
    """A service could not be started or seeded; the message says which and why."""

    def __init__(self, service: str, reason: str, log_path: Path | None = None) -> None:
        self.service = service
        self.reason = reason
        self.log_path = log_path
        where = f" (log: {log_path})" if log_path else ""
        super().__init__(f"{service}: {reason}{where}")


class ServiceEnv(dict[str, str]):
    """The environment for the apps (a plain ``dict``), plus what was started and how.

    ``notes``: human-readable remarks for reports (e.g. the SQLite fallback);
    ``pids``: service name -> process group id of each running service;
    ``database``: ``"postgres"``, ``"sqlite"`` or ``""`` (no database requested).
    """

    notes: list[str]
    pids: dict[str, int]
    database: str


# ---------------------------------------------------------------- discovery


def find_postgres_bin() -> Path | None:
    """Directory with ``initdb`` and ``postgres`` (newest Debian version, or on PATH)."""
    override = os.environ.get("PWB_POSTGRES_BIN")
    if override:
        path = Path(override)
        return path if (path / "initdb").exists() else None
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    for directory in reversed(candidates):
        if (Path(directory) / "initdb").exists() and (Path(directory) / "postgres").exists():
            return Path(directory)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(initdb).parent
    return None


def _postgres_user() -> str | None:
    """The user to run PostgreSQL as: ``postgres`` when we are root (PostgreSQL refuses root),
    else None (run as ourselves). Raises ``KeyError`` if root and there is no such user."""
    if os.geteuid() != 0:
        return None
    pwd.getpwnam("postgres")
    return "postgres"


def services_available() -> dict[str, str | None]:
    """For each service, ``None`` if it can be started here, else why not.

    Keys: ``"redis"``, ``"postgres"`` and ``"sqlite"`` (the fortunes fallback, always there).
    """
    out: dict[str, str | None] = {}
    out[REDIS] = (
        None
        if shutil.which("redis-server")
        else "redis-server is not installed (Debian package redis-server)"
    )
    pg = find_postgres_bin()
    if pg is None:
        out[POSTGRES] = (
            "PostgreSQL is not installed (Debian package postgresql); fortunes fall back to SQLite"
        )
    else:
        try:
            _postgres_user()
            out[POSTGRES] = None
        except KeyError:
            out[POSTGRES] = (
                "running as root but there is no 'postgres' system user to run PostgreSQL"
            )
    out["sqlite"] = None
    return out


# ---------------------------------------------------------------- processes


def _spawn(
    name: str,
    argv: list[str],
    log_path: Path,
    *,
    user: str | None = None,
    cwd: Path | None = None,
    stop_signal: int = signal.SIGTERM,
    started: list[tuple[ProcessGroup, int]] | None = None,
    orphan_paths: Sequence[Path] = (),
) -> ProcessGroup:
    """Start a service (or a set-up command) in its own process group; the launch watchdog
    stops it, then removes ``orphan_paths``, if this process dies. A service is added to
    ``started`` (with the signal that stops it) at once, so a failure later in its start-up
    still stops it."""
    try:
        group = ProcessGroup.start(
            argv,
            log_path=log_path,
            env=_child_env(user),
            cwd=cwd,
            user=user,
            stop_signal=stop_signal,
            orphan_grace_s=STOP_TIMEOUT_S,
            orphan_paths=orphan_paths,
        )
    except (OSError, KeyError) as exc:
        raise ServiceError(name, f"cannot start {argv[0]}: {exc}", log_path) from exc
    if started is not None:
        started.append((group, stop_signal))
    return group


def _child_env(user: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C.UTF-8"
    env["LANG"] = "C.UTF-8"
    if user is not None:
        env.update(HOME=pwd.getpwnam(user).pw_dir, USER=user, LOGNAME=user)
    return env


def _run(
    service: str,
    argv: list[str],
    log_path: Path,
    *,
    user: str | None = None,
    timeout: float = 60.0,
    orphan_paths: Sequence[Path] = (),
) -> None:
    """Run a set-up command (initdb, psql, ...) to completion in its own process group,
    its output appended to ``log_path``; raises :class:`ServiceError` if it fails."""
    group = _spawn(service, argv, log_path, user=user, orphan_paths=orphan_paths)
    try:
        code = group.wait(timeout)
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(service, f"{Path(argv[0]).name} failed: {exc}", log_path) from exc
    finally:
        group.stop(STOP_TIMEOUT_S)
    if code != 0:
        raise ServiceError(
            service,
            f"{Path(argv[0]).name} exited with {code}: {tail(log_path, 1500).strip()}",
            log_path,
        )


# ---------------------------------------------------------------- redis


def _resp(*args: str) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _redis_command(port: int, *args: str, timeout: float = 2.0) -> bytes:
    """Send one command to redis on 127.0.0.1:port; return the first reply line."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(_resp(*args))
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply.strip()


def _start_redis(
    tmp: Path, log_dir: Path, started: list[tuple[ProcessGroup, int]]
) -> tuple[ProcessGroup, str]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise ServiceError(REDIS, "redis-server is not installed (Debian package redis-server)")
    port = free_port()
    data = tmp / "redis"
    data.mkdir()
    log_path = log_dir / "redis-server.log"
    argv = [
        exe,
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(data),
        "--protected-mode",
        "yes",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
    ]
    proc = _spawn(REDIS, argv, log_path, started=started)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise ServiceError(REDIS, f"redis-server exited: {tail(log_path, 2000)}", log_path)
        try:
            if _redis_command(port, "PING") == b"+PONG":
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise ServiceError(REDIS, f"no PONG within {START_TIMEOUT_S:.0f} s", log_path)
        time.sleep(0.05)
    if _redis_command(port, "SET", REDIS_VALUE_KEY, REDIS_VALUE) != b"+OK":
        raise ServiceError(REDIS, "seeding the value failed", log_path)
    if _redis_command(port, "SET", REDIS_COUNTER_KEY, "0") != b"+OK":
        raise ServiceError(REDIS, "seeding the counter failed", log_path)
    return proc, f"redis://127.0.0.1:{port}/0"


# ---------------------------------------------------------------- PostgreSQL


def _seed_sql() -> str:
    def quote(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    values = ",\n".join(f"({i}, {quote(m)})" for i, m in FORTUNE_ROWS)
    return (
        "CREATE TABLE fortune (id integer NOT NULL PRIMARY KEY, "
        "message varchar(2048) NOT NULL);\n"
        f"INSERT INTO fortune (id, message) VALUES\n{values};\n"
    )


def _start_postgres(
    log_dir: Path, cleanup: list[Path], started: list[tuple[ProcessGroup, int]]
) -> tuple[ProcessGroup, str]:
    bindir = find_postgres_bin()
    if bindir is None:
        raise ServiceError(POSTGRES, "PostgreSQL is not installed (Debian package postgresql)")
    try:
        user = _postgres_user()
    except KeyError:
        raise ServiceError(
            POSTGRES, "running as root but there is no 'postgres' system user"
        ) from None
    # The data directory must be owned by the server's user and reachable through its parents,
    # so it lives in its own temp dir under the system's (the caller's workdir may be 0700).
    root = Path(tempfile.mkdtemp(prefix="pwb-pg-"))
    cleanup.append(root)
    os.chmod(root, 0o755)
    data = root / "data"
    sock = root / "sock"
    for d in (data, sock):
        d.mkdir(mode=0o700)
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(d, entry.pw_uid, entry.pw_gid)
    log_path = log_dir / "postgresql.log"
    _run(
        POSTGRES,
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            PG_USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
            "--no-instructions",
        ],
        log_path,
        user=user,
        timeout=120,
        orphan_paths=[root],  # a SIGKILLed pywebbench leaves no data directory behind
    )
    port = free_port()
    argv = [
        str(bindir / "postgres"),
        "-D",
        str(data),
        "-k",
        str(sock),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-c",
        "fsync=off",
        "-c",
        "synchronous_commit=off",
        "-c",
        "full_page_writes=off",
        "-c",
        "max_connections=200",
        "-c",
        "shared_buffers=64MB",
        "-c",
        "logging_collector=off",
    ]
    # SIGINT = "fast shutdown": disconnect clients, stop now (SIGTERM waits for clients).
    proc = _spawn(
        POSTGRES,
        argv,
        log_path,
        user=user,
        cwd=root,
        stop_signal=signal.SIGINT,
        started=started,
        orphan_paths=[root],
    )
    psql = str(bindir / "psql")
    base = [psql, "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", PG_USER]
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise ServiceError(POSTGRES, f"postgres exited: {tail(log_path, 2000)}", log_path)
        ready = subprocess.run(
            [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)],
            check=False,
            capture_output=True,
        )
        if ready.returncode == 0:
            break
        if time.monotonic() > deadline:
            raise ServiceError(POSTGRES, f"not ready within {START_TIMEOUT_S:.0f} s", log_path)
        time.sleep(0.1)
    _run(POSTGRES, [*base, "-d", "postgres", "-c", f"CREATE DATABASE {PG_DB}"], log_path)
    seed = root / "seed.sql"
    seed.write_text(_seed_sql(), encoding="utf-8")
    os.chmod(seed, 0o644)
    _run(POSTGRES, [*base, "-d", PG_DB, "-v", "ON_ERROR_STOP=1", "-f", str(seed)], log_path)
    return proc, f"postgresql://{PG_USER}@127.0.0.1:{port}/{PG_DB}"


def _make_sqlite(tmp: Path) -> str:
    path = (tmp / "fortunes.sqlite3").resolve()
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE fortune (id INTEGER NOT NULL PRIMARY KEY, message TEXT NOT NULL)")
        db.executemany("INSERT INTO fortune (id, message) VALUES (?, ?)", FORTUNE_ROWS)
        db.commit()
    os.chmod(path, 0o644)
    return f"sqlite:///{path}"


# ---------------------------------------------------------------- facade


@contextlib.contextmanager
def start_services(
    names: Iterable[str], workdir: Path, *, database: str = "auto"
) -> Iterator[ServiceEnv]:
    """Start the services ``names`` (subset of ``{"redis", "postgres"}``) for the apps.

    Yields a :class:`ServiceEnv` (a dict: ``PWB_REDIS_URL`` and/or ``PWB_DATABASE_URL``).
    ``workdir`` receives the service logs; the data lives in a temporary directory inside
    it that is removed on exit. ``database``: ``"auto"`` (PostgreSQL, SQLite if PostgreSQL
    is not installed), ``"postgres"`` (fail without it) or ``"sqlite"``.
    Raises :class:`ServiceError` (after stopping whatever had started) when a service fails.
    """
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in SERVICE_NAMES]
    if unknown:
        raise ValueError(
            f"unknown service(s) {', '.join(unknown)} (known: {', '.join(SERVICE_NAMES)})"
        )
    if database not in ("auto", "postgres", "sqlite"):
        raise ValueError(f"database must be 'auto', 'postgres' or 'sqlite', got {database!r}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pwb-services-", dir=workdir))
    cleanup = [tmp]
    env = ServiceEnv()
    env.notes, env.pids, env.database = [], {}, ""
    started: list[tuple[ProcessGroup, int]] = []
    try:
        if REDIS in wanted:
            proc, url = _start_redis(tmp, workdir, started)
            env["PWB_REDIS_URL"] = url
            env.pids[REDIS] = proc.pgid
        if POSTGRES in wanted:
            use_pg = database == "postgres" or (
                database == "auto" and find_postgres_bin() is not None
            )
            if use_pg:
                proc, url = _start_postgres(workdir, cleanup, started)
                env.pids[POSTGRES] = proc.pgid
                env.database = "postgres"
            else:
                url = _make_sqlite(tmp)
                env.database = "sqlite"
                why = (
                    "requested with database='sqlite'"
                    if database == "sqlite"
                    else "PostgreSQL is not installed"
                )
                env.notes.append(f"fortunes use SQLite ({why}), not PostgreSQL")
            env["PWB_DATABASE_URL"] = url
        yield env
    finally:
        for group, stop_signal in reversed(started):
            with contextlib.suppress(RuntimeError):  # a member survived SIGKILL: nothing to do
                group.stop(STOP_TIMEOUT_S, stop_signal)
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True)
