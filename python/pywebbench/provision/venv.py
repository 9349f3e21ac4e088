"""One uv virtualenv per stack, cached by :meth:`Stack.env_key`, built atomically.

Layout under ``$PWB_CACHE_DIR`` (default ``~/.cache/pywebbench``)::

    venvs/<key>/                 the virtualenv (relocatable: built elsewhere, then renamed)
    venvs/<key>/pwb-env.json     what was installed, exact versions; written before the rename
    venvs/.locks/<key>.lock      flock: one builder per key across processes
    logs/provision-<key>-<time>.log   the uv output of every build (kept on failure)

A venv directory without ``pwb-env.json`` never exists under its final name: it is built in
``venvs/.tmp-<key>-<pid>`` and renamed when complete, so a crash leaves only a temp dir that the
next builder of that key removes. A cached call reads one small JSON file and runs nothing.
Each ``uv pip install`` is tried from uv's cache alone first, then online (:func:`_install`).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from packaging.utils import canonicalize_name

from pywebbench.catalogue.base import Interpreter, Stack
from pywebbench.launch.process import ProcessGroup

Progress = Callable[[str], None]

MARKER = "pwb-env.json"
#: Bumped when the build recipe changes in a way the key does not capture.
RECIPE = 1
#: Upper bound of one uv command (gevent builds from source on PyPy in about a minute).
UV_TIMEOUT_S = float(os.environ.get("PWB_UV_TIMEOUT_S", "1200"))
#: How long to wait for another process building the same venv.
LOCK_TIMEOUT_S = float(os.environ.get("PWB_LOCK_TIMEOUT_S", "1800"))
#: How long an interrupted uv command gets to exit on SIGTERM before SIGKILL.
STOP_TIMEOUT_S = 5.0


class ProvisionError(RuntimeError):
    """A stack's virtualenv could not be built; ``reason`` says why, ``log_path`` has it all."""

    def __init__(self, stack: Stack, reason: str, log_path: Path | None = None) -> None:
        self.stack = stack
        self.reason = reason
        self.log_path = log_path
        where = f" (full log: {log_path})" if log_path else ""
        super().__init__(f"{stack.name}: {reason}{where}")


@dataclass(frozen=True)
class ProvisionedEnv:
    """A ready virtualenv of one stack."""

    venv: Path
    python: Path
    packages: dict[str, str]  # normalised distribution name -> exact installed version
    key: str
    cached: bool  # True if this call found it built
    seconds: float  # how long this call took
    stack_name: str = ""
    interpreter: Interpreter | None = None
    build_seconds: float = 0.0  # how long the original build took
    log_path: Path | None = None
    uv_version: str = ""
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def bin(self) -> Path:
        return self.venv / "bin"


def cache_dir() -> Path:
    """``$PWB_CACHE_DIR`` or ``~/.cache/pywebbench``."""
    return Path(os.environ.get("PWB_CACHE_DIR") or Path.home() / ".cache" / "pywebbench")


def offline() -> bool:
    """``PWB_OFFLINE`` set to a true value: nothing may be downloaded."""
    return os.environ.get("PWB_OFFLINE", "").lower() in ("1", "true", "yes")


def venvs_dir() -> Path:
    return cache_dir() / "venvs"


def venv_path(stack: Stack) -> Path:
    """Where the stack's virtualenv lives (built or not)."""
    return venvs_dir() / stack.env_key()


def _uv_env() -> dict[str, str]:
    env = dict(os.environ)
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["UV_NO_PROGRESS"] = "1"
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env


def _uv() -> list[str]:
    return [sys.executable, "-m", "uv"]


_uv_version_cache: list[str] = []


def uv_version() -> str:
    """``uv --version`` of the orchestrator's uv (cached per process)."""
    if not _uv_version_cache:
        try:
            out = subprocess.run(
                [*_uv(), "--version"], capture_output=True, text=True, timeout=30, check=True
            ).stdout
            _uv_version_cache.append(out.strip().split()[1] if out.strip() else "")
        except (OSError, subprocess.SubprocessError, IndexError):
            _uv_version_cache.append("")
    return _uv_version_cache[0]


# ---------------------------------------------------------------- system packages

_dpkg_cache: dict[str, bool] = {}


def missing_system_packages(packages: Sequence[str]) -> list[str]:
    """The Debian packages of ``packages`` that are not installed (``dpkg-query``).

    On a system without dpkg nothing can be checked and nothing is reported missing.
    """
    if not packages or shutil.which("dpkg-query") is None:
        return []
    missing = []
    for pkg in packages:
        if pkg not in _dpkg_cache:
            proc = subprocess.run(
                ["dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg],
                capture_output=True,
                text=True,
                timeout=30,
            )
            _dpkg_cache[pkg] = proc.returncode == 0 and proc.stdout.startswith("ii")
        if not _dpkg_cache[pkg]:
            missing.append(pkg)
    return missing


# ---------------------------------------------------------------- reading a cached venv


def _read_marker(venv: Path) -> dict[str, Any] | None:
    data = _read_json(venv / MARKER)
    if data is None or data.get("recipe") != RECIPE:
        return None
    # The venv's python is a symlink to the base interpreter: gone if the interpreter was removed.
    if not (venv / "bin" / "python").exists():
        return None
    return data


def _env_from_marker(
    stack: Stack, venv: Path, data: dict[str, Any], *, cached: bool, started: float
) -> ProvisionedEnv:
    log = data.get("log")
    return ProvisionedEnv(
        venv=venv,
        python=venv / "bin" / "python",
        packages=dict(data.get("packages", {})),
        key=data["key"],
        cached=cached,
        seconds=time.monotonic() - started,
        stack_name=stack.name,
        interpreter=stack.interpreter,
        build_seconds=float(data.get("build_seconds", 0.0)),
        log_path=Path(log) if log else None,
        uv_version=data.get("uv_version", ""),
        manifest=data,
    )


def cached(stack: Stack) -> ProvisionedEnv | None:
    """The stack's env if it is already built, without building anything."""
    started = time.monotonic()
    venv = venv_path(stack)
    data = _read_marker(venv)
    return _env_from_marker(stack, venv, data, cached=True, started=started) if data else None


# ---------------------------------------------------------------- building


@contextmanager
def _locked(key: str, progress: Progress | None) -> Iterator[None]:
    lock_dir = venvs_dir() / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{key}.lock", "w") as fh:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        told = False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told and progress:
                    progress("waiting for another process building the same virtualenv")
                    told = True
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"venv {key} locked for over {LOCK_TIMEOUT_S:.0f} s"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_temps(key: str) -> None:
    for tmp in venvs_dir().glob(f".tmp-{key}-*"):
        try:
            pid = int(tmp.name.rsplit("-", 1)[1])
        except ValueError:
            pid = 0
        if pid == os.getpid() or not _pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


class _CommandFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _run(
    argv: list[str], log: TextIO, progress: Progress | None, what: str, timeout_s: float
) -> str:
    """Run one uv command in its own process group, its output appended to ``log`` (and each
    line passed to ``progress``); return the output. The group is stopped after ``timeout_s``,
    on an exception (Ctrl-C) and, by the launch watchdog, if this process dies."""
    log.write(f"\n$ {' '.join(argv)}\n")
    log.flush()
    if progress:
        progress(what)

    def show(line: str) -> None:
        if progress and line.strip():
            progress(line.rstrip())

    try:
        group = ProcessGroup.start(argv, log_path=Path(log.name), env=_uv_env(), cwd=venvs_dir())
    except OSError as exc:
        raise _CommandFailed(f"{what}: cannot run uv: {exc}") from None
    try:
        rc = group.wait(timeout_s, on_line=show if progress else None)
    except subprocess.TimeoutExpired:
        raise _CommandFailed(f"{what}: timed out after {timeout_s:.0f} s") from None
    finally:
        group.stop(STOP_TIMEOUT_S)
    output = group.output()
    if rc != 0:
        raise _CommandFailed(f"{what} failed: {failure_reason(output)}")
    return output


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def failure_reason(output: str, max_lines: int = 12) -> str:
    """The meaningful end of a uv error output: from the first ``error:``/``×`` line on."""
    lines = [_ANSI.sub("", ln).rstrip() for ln in output.splitlines()]
    lines = [ln for ln in lines if ln.strip()]
    start = None
    for i, ln in enumerate(lines):
        s = ln.lstrip()
        if s.startswith(("error:", "×", "x No solution", "ERROR")) or s.startswith("╰─▶"):
            start = i
            break
    chosen = lines[start:] if start is not None else lines[-max_lines:]
    if len(chosen) > max_lines:
        # Keep the headline and the end, where the compiler/resolver states the cause.
        chosen = chosen[:3] + ["..."] + chosen[-(max_lines - 4) :]
    return "\n".join(ln.strip() for ln in chosen) or "no output"


def _install(
    argv: list[str], log: TextIO, progress: Progress | None, what: str, timeout_s: float
) -> None:
    """One ``uv pip install``: from uv's cache alone first (``--offline``), online only when
    something is not there (never with ``PWB_OFFLINE=1``).

    Why: uv reuses a wheel it built from an sdist only while the index's answer is fresh, and
    an index that sends no cache headers (a registry proxy, some mirrors: uv issue #10444) is
    never fresh, so every venv with uWSGI, bjoern or (on PyPy) gevent compiled it again,
    20-60 s each. Offline, uv takes what it has: the versions the last online resolution
    found, and the wheels it built then. The versions installed are in the venv's manifest.
    """
    try:
        _run([*argv, "--offline"], log, progress, f"{what} (from uv's cache)", timeout_s)
        return
    except _CommandFailed:
        if offline():
            raise
    log.write("\nnot all of it is in uv's cache: installing online\n")
    _run(argv, log, progress, what, timeout_s)


def _packages(python: Path, log: TextIO, timeout_s: float) -> dict[str, str]:
    out = _run(
        [*_uv(), "pip", "list", "--format", "json", "--python", str(python)],
        log,
        None,
        "listing installed packages",
        timeout_s,
    )
    # uv may print a "Using Python ..." line before the JSON on stderr (merged here).
    start = out.find("[")
    try:
        rows = json.loads(out[start:]) if start >= 0 else []
    except ValueError as exc:
        raise _CommandFailed(f"could not read `uv pip list` output: {exc}") from exc
    return {canonicalize_name(r["name"]): r["version"] for r in rows}


def provision(
    stack: Stack, *, progress: Progress | None = None, timeout_s: float | None = None
) -> ProvisionedEnv:
    """Build (or find cached) the virtualenv of ``stack``; exact versions in ``.packages``.
    Each uv command may take ``timeout_s`` (default :data:`UV_TIMEOUT_S`).

    Raises :class:`ProvisionError` with the reason (missing Debian packages, resolver or build
    errors: the meaningful lines of uv's output) and the path of the full log.
    """
    started = time.monotonic()
    key = stack.env_key()
    venv = venvs_dir() / key
    data = _read_marker(venv)
    if data is not None:
        return _env_from_marker(stack, venv, data, cached=True, started=started)

    missing = missing_system_packages(stack.system_packages())
    if missing:
        raise ProvisionError(
            stack,
            f"missing Debian package(s) {', '.join(missing)}: "
            f"install with `apt-get install -y {' '.join(missing)}`",
        )

    venvs_dir().mkdir(parents=True, exist_ok=True)
    try:
        with _locked(key, progress):
            data = _read_marker(venv)
            if data is not None:  # another process built it while we waited
                return _env_from_marker(stack, venv, data, cached=True, started=started)
            limit = UV_TIMEOUT_S if timeout_s is None else timeout_s
            return _build(stack, key, venv, progress, started, limit)
    except TimeoutError as exc:
        raise ProvisionError(stack, str(exc)) from None


def _build(
    stack: Stack,
    key: str,
    venv: Path,
    progress: Progress | None,
    started: float,
    timeout_s: float,
) -> ProvisionedEnv:
    _remove_stale_temps(key)
    if venv.exists():  # a venv without a valid marker: broken or from an older recipe
        shutil.rmtree(venv, ignore_errors=True)
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"provision-{key}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    tmp = venvs_dir() / f".tmp-{key}-{os.getpid()}"
    python = tmp / "bin" / "python"
    interp = stack.interpreter
    try:
        # Append mode: uv's output is appended to the same file by its own process.
        with open(log_path, "a") as log:
            log.write(f"stack {stack.name}\nkey {key}\ninterpreter {interp}\n")
            _run(
                [
                    *_uv(),
                    "venv",
                    "--relocatable",
                    "--no-project",
                    "--python",
                    interp.path,
                    str(tmp),
                ],
                log,
                progress,
                f"creating virtualenv with {interp.name} ({interp.path})",
                timeout_s,
            )
            installs = [(stack.install_flags(), stack.requirements)] if stack.requirements else []
            installs += [(s.flags, s.requirements) for s in stack.install_steps()]
            for flags, reqs in installs:
                # Bytecode compiled at install, as a deployment has it: where the
                # environment sets PYTHONDONTWRITEBYTECODE (containers, CI) every server
                # start would compile its framework from source again, in its cold start.
                argv = [*_uv(), "pip", "install", "--compile-bytecode", "--python", str(python)]
                argv += [*flags, *reqs]
                _install(argv, log, progress, "installing " + " ".join(reqs or flags), timeout_s)
            packages = _packages(python, log, timeout_s)
            build_seconds = time.monotonic() - started
            manifest = {
                "recipe": RECIPE,
                "key": key,
                "stack": stack.name,
                "interpreter": {
                    "name": interp.name,
                    "implementation": interp.implementation,
                    "version": interp.version,
                    "path": interp.path,
                    "build": interp.build,
                },
                "requirements": list(stack.requirements),
                "flags": list(stack.install_flags()),
                "steps": [
                    {"requirements": list(s.requirements), "flags": list(s.flags)}
                    for s in stack.install_steps()
                ],
                "packages": packages,
                "uv_version": uv_version(),
                "build_seconds": round(build_seconds, 3),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "log": str(log_path),
            }
            (tmp / MARKER).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            log.write(f"\nbuilt in {build_seconds:.1f} s\n")
        os.rename(tmp, venv)
    except _CommandFailed as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _record_failure(stack, key, exc.reason, log_path)
        raise ProvisionError(stack, exc.reason, log_path) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (venvs_dir() / ".failed" / f"{key}.json").unlink(missing_ok=True)
    if progress:
        progress(f"virtualenv ready: {venv}")
    return _env_from_marker(stack, venv, manifest, cached=False, started=started)


def _record_failure(stack: Stack, key: str, reason: str, log_path: Path) -> None:
    failed = venvs_dir() / ".failed"
    failed.mkdir(parents=True, exist_ok=True)
    doc = {
        "stack": stack.name,
        "reason": reason,
        "log": str(log_path),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (failed / f"{key}.json").write_text(json.dumps(doc, indent=1))


def last_failure(stack: Stack) -> dict[str, Any] | None:
    """The last failed build of this exact stack (``reason``, ``log``, ``time``), if the venv
    has not been built since. :func:`provision` always tries again; this is for reports."""
    return _read_json(venvs_dir() / ".failed" / f"{stack.env_key()}.json")


def _read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None if it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remove(stack: Stack) -> bool:
    """Delete the stack's cached virtualenv (under its lock); True if there was one."""
    key = stack.env_key()
    venv = venvs_dir() / key
    if not venv.exists():
        return False
    with _locked(key, None):
        shutil.rmtree(venv, ignore_errors=True)
    return True
