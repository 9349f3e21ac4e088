"""Process groups: start a command in its own session, pinned to cores, logging to a file;
find every member of its group (psutil); stop the whole group (SIGTERM, then SIGKILL) and reap.

The one way pywebbench runs a child process: the server launcher, the services
(redis-server, PostgreSQL and their set-up commands), the reference server and the uv
commands that build virtualenvs all use :class:`ProcessGroup`.
A child's output always goes to a file, never to a pipe: a chatty server cannot block on a full
pipe nobody reads.

A group never outlives the process that started it: a watchdog process
(:mod:`pywebbench.launch.watchdog`) holds the read end of a pipe whose write end only the
starter has; when the starter dies, even by SIGKILL, the watchdog sees end of file and stops the
group (stop signal, grace, SIGKILL), then removes the paths the group was given to remove
(``orphan_paths``). :meth:`ProcessGroup.stop` disarms it.
"""

from __future__ import annotations

import os
import shutil
import signal as _signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

__all__ = ["ProcessGroup", "group_members", "tail"]

_WATCHDOG = Path(__file__).resolve().with_name("watchdog.py")
_EXITED = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def group_members(pgid: int, *, include_zombies: bool = False) -> list[int]:
    """PIDs of every process whose process group is ``pgid`` (zombies excluded by default).

    A zombie has already exited and holds no resources but its PID; it disappears when its
    parent reaps it.
    """
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) != pgid:
                continue
            if not include_zombies and psutil.Process(pid).status() in _EXITED:
                continue
        except (OSError, psutil.Error):
            continue  # exited between listing and reading
        members.append(pid)
    return sorted(members)


def tail(path: Path, max_bytes: int = 4000) -> str:
    """The last ``max_bytes`` of a log file as text ("" if it does not exist)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _affinity_preexec(cpus: Sequence[int]) -> Callable[[], None]:  # pragma: no cover
    cpu_set = set(cpus)

    def pin() -> None:
        os.sched_setaffinity(0, cpu_set)

    return pin


class ProcessGroup:
    """A command running as the leader of its own session and process group.

    Every process it forks (workers, helper threads' processes) stays in the group unless it
    calls ``setsid`` itself, so :meth:`stop` reaches all of them with one ``killpg``.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        log_path: Path | None,
        argv: list[str],
        log_start: int = 0,
    ) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: the child leads a new group
        self.log_path = log_path
        #: Size of the log when the group started: its own output begins there.
        self.log_start = log_start
        self.argv = argv
        self.started_at = time.monotonic()
        self._stopped = False
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_fd: int | None = None

    def _arm_watchdog(self, sig: int, grace_s: float, paths: Sequence[Path]) -> None:
        """Start the watchdog that stops this group, then removes ``paths``, if this process
        dies (see module doc)."""
        read_fd, write_fd = os.pipe()  # both non-inheritable; stdin= hands read_fd over
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_WATCHDOG), str(self.pgid), str(int(sig)),
                 f"{grace_s:g}", *(str(p) for p in paths)],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # no terminal signals; not a member of the group
                close_fds=True,
            )  # fmt: skip
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        self._watchdog_fd = write_fd

    def _disarm_watchdog(self) -> None:
        fd, self._watchdog_fd = self._watchdog_fd, None
        if fd is None:
            return
        try:
            os.write(fd, b"x")
        except OSError:  # pragma: no cover - the watchdog died
            pass
        finally:
            os.close(fd)
        if self.watchdog is not None:
            try:
                self.watchdog.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.watchdog.kill()
                self.watchdog.wait()

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        log_path: Path | None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        cpus: Sequence[int] | None = None,
        user: str | None = None,
        stop_signal: int = _signal.SIGTERM,
        orphan_grace_s: float | None = 5.0,
        orphan_paths: Sequence[Path] = (),
    ) -> ProcessGroup:
        """Start ``argv`` in a new session, stdout+stderr appended to ``log_path``.

        ``cpus`` pins the process (and, by inheritance, everything it forks) to those cores;
        ``taskset`` does it when present, so no Python code runs between fork and exec.
        ``user`` runs it as another system user (e.g. PostgreSQL as postgres; needs root): its
        uid, primary group and no supplementary groups, set by ``subprocess`` before exec.
        ``orphan_grace_s``: if this process dies without stopping the group, a watchdog sends
        ``stop_signal`` to the group, waits that long, then SIGKILLs it (None: no watchdog);
        it then removes ``orphan_paths`` (files or directory trees the caller would have
        removed after stopping the group: temp files that would otherwise outlive a SIGKILL).
        Raises ``FileNotFoundError``/``PermissionError`` if the executable cannot be run,
        ``KeyError`` for an unknown ``user``.
        """
        argv = [str(a) for a in argv]
        preexec = None
        creds: dict[str, Any] = {}
        if user:
            import pwd

            entry = pwd.getpwnam(user)
            creds = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        if cpus:
            cpus = sorted({int(c) for c in cpus})
            available = os.sched_getaffinity(0)
            missing = [c for c in cpus if c not in available]
            if missing:
                raise ValueError(
                    f"cpus {missing} are not available to this process (allowed: "
                    f"{sorted(available)})"
                )
            taskset = shutil.which("taskset")
            if taskset:
                argv = [taskset, "-c", ",".join(str(c) for c in cpus), *argv]
            else:
                preexec = _affinity_preexec(cpus)
        if log_path is not None:
            log_path = Path(log_path)
            log_path.parent.mkdir(parents=True, exist_ok=True)
            out = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        else:
            out = open(os.devnull, "wb")  # noqa: SIM115
        log_start = out.seek(0, os.SEEK_END)
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=str(cwd) if cwd else None,
                start_new_session=True,
                preexec_fn=preexec,  # noqa: PLW1509 - only when taskset is missing
                close_fds=True,
                **creds,
            )
        finally:
            out.close()
        group = cls(popen, log_path, argv, log_start)
        if orphan_grace_s is not None:
            try:
                group._arm_watchdog(stop_signal, orphan_grace_s, orphan_paths)
            except BaseException:
                group.stop(orphan_grace_s, stop_signal)
                raise
        return group

    # -- state ---------------------------------------------------------------------------

    def members(self) -> list[int]:
        """Live (non-zombie) PIDs of the group, the leader included while it runs."""
        self.poll()
        return group_members(self.pgid)

    def poll(self) -> int | None:
        """The leader's exit code, or None while it runs (reaps it when it has exited)."""
        return self.popen.poll()

    @property
    def returncode(self) -> int | None:
        """The leader's exit code once it has been reaped, else None."""
        return self.popen.returncode

    def output(self) -> str:
        """What the group wrote to its log so far (not what the log held before it started)."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self.log_start)
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait(
        self, timeout_s: float | None = None, *, on_line: Callable[[str], None] | None = None
    ) -> int:
        """Wait for the leader to exit and return its exit code (the group is not stopped:
        call :meth:`stop` after, in a ``finally``). ``on_line`` is called with each line the
        group writes to its log while it runs (a last unterminated line too).

        Raises ``subprocess.TimeoutExpired`` after ``timeout_s``.
        """
        if on_line is None or self.log_path is None:
            return self.popen.wait(timeout=timeout_s)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        offset = self.log_start
        pending = b""
        while True:
            code = self.popen.poll()
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            offset += len(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            if code is not None and pending:
                lines, pending = [*lines, pending], b""
            for line in lines:
                on_line(line.decode("utf-8", "replace"))
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.argv, timeout_s or 0.0)
            time.sleep(0.05)

    def alive(self) -> bool:
        """True while the leader runs."""
        return self.poll() is None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole group (no error if it is already gone)."""
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _wait_empty(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.members():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def stop(self, timeout_s: float = 5.0, sig: int = _signal.SIGTERM) -> int | None:
        """Stop the whole group: ``sig`` (SIGTERM), wait up to ``timeout_s`` for every member
        to exit, then SIGKILL the group and wait for it; reap the leader. Idempotent.

        Returns the leader's exit code. Raises ``RuntimeError`` if members survive SIGKILL
        (e.g. stuck in uninterruptible sleep) for 10 s.
        """
        if not self._stopped:
            self._stopped = True
            if self.members():
                self.signal(sig)
                if not self._wait_empty(timeout_s):
                    self.signal(_signal.SIGKILL)
                    if not self._wait_empty(10.0):
                        raise RuntimeError(
                            f"process group {self.pgid} survived SIGKILL: {self.members()}"
                        )
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - leader killed above
            self.popen.kill()
            self.popen.wait()
        self._disarm_watchdog()
        return self.popen.returncode

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
