"""Install a CPython that is not on this machine: with uv, or built from upstream's source.

``--python 3.14``, ``3.13t`` or ``cpython3.12`` asks for a language version (``t``: the
free-threaded build). When no installed interpreter matches, :func:`install` tries, in order:

1. **uv** (``uv python install``): a prebuilt CPython from python-build-standalone. uv downloads
   it from outside the package registries, so it needs general network access.
2. **A source build**: upstream's tarball, taken from Debian's source package (``apt-get source
   python3.13/trixie``, ``python3.14/sid``: the ``.orig.tar.xz`` is upstream's release), then
   ``./configure --prefix=... [--disable-gil]`` and ``make``; no PGO unless asked
   (``PWB_PYTHON_PGO=1``). The configure flags are recorded next to the build.

Layout under ``$PWB_CACHE_DIR`` (default ``~/.cache/pywebbench``)::

    sources/python3.13_3.13.5.orig.tar.xz    upstream's source (from ``apt-get source``)
    pythons/cpython-3.13.5t/                  a source build (prefix), ``pwb-python.json`` inside
    pythons/uv/                               uv's managed interpreters (UV_PYTHON_INSTALL_DIR)
    logs/python-build-<name>-<time>.log       the configure/make output of every build

Both are found again by discovery (:func:`pywebbench.catalogue.interpreters.discover`), so a
build happens once. Settings (environment):

- ``PWB_PYTHON_INSTALL``: the methods allowed, comma separated (default ``uv,source``;
  ``none``: only installed interpreters);
- ``PWB_OFFLINE=1``: no network: no uv download, no ``apt-get source``; a cached source tarball
  is still built.
- ``PWB_UV``: the uv command (default ``python -m uv`` of the orchestrator).
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pywebbench.catalogue.interpreters import (
    InterpreterError,
)
from pywebbench.provision.venv import cache_dir, offline

Progress = Callable[[str], None]

#: Written last into a finished source build; a prefix without it is never used.
MARKER = "pwb-python.json"
#: Where the deb-src line for CPython's source packages goes (written when missing, as root).
SOURCES_FILE = Path("/etc/apt/sources.list.d/pywebbench-python-src.sources")
SOURCES_TEXT = """\
# Added by pywebbench: CPython source packages, to build interpreters that are not installed
# (trixie: python3.13, sid: python3.14). Source packages only: no binary package comes from here.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
#: Debian suites tried in order for a version's source package.
SUITES = ("trixie", "sid")
METHODS = ("uv", "source")
#: Upper bounds: one uv command, one apt-get, one configure/make step.
UV_TIMEOUT_S = 600.0
APT_TIMEOUT_S = 600.0
BUILD_TIMEOUT_S = float(os.environ.get("PWB_PYTHON_BUILD_TIMEOUT_S", "3600"))

_REQUEST = re.compile(r"^(cpython|pypy)?(3\.\d{1,2})(t?)$")


@dataclass(frozen=True)
class PythonRequest:
    """A language version asked for by ``--python``: ``3.13t`` -> cpython, 3.13, free-threaded."""

    implementation: str  # "cpython" | "pypy"
    minor: str  # "3.13"
    free_threaded: bool

    @property
    def name(self) -> str:
        """The interpreter name it would get: ``cpython3.13t``."""
        return f"{self.implementation}{self.minor}{'t' if self.free_threaded else ''}"

    @property
    def uv_spec(self) -> str:
        """uv's request syntax: ``3.13t``."""
        return f"{self.minor}{'t' if self.free_threaded else ''}"


def parse_request(value: str) -> PythonRequest | None:
    """``3.13``, ``3.13t``, ``cpython3.12``, ``pypy3.10`` -> a request; anything else None."""
    m = _REQUEST.match(value.strip())
    if not m:
        return None
    impl = m.group(1) or "cpython"
    if impl == "pypy" and m.group(3):
        return None
    return PythonRequest(impl, m.group(2), bool(m.group(3)))


def allowed_methods() -> tuple[str, ...]:
    """The install methods ``PWB_PYTHON_INSTALL`` allows (default: uv, then a source build)."""
    raw = os.environ.get("PWB_PYTHON_INSTALL", ",".join(METHODS))
    chosen = tuple(m.strip() for m in raw.split(",") if m.strip() and m.strip() != "none")
    unknown = [m for m in chosen if m not in METHODS]
    if unknown:
        raise InterpreterError(
            f"PWB_PYTHON_INSTALL: unknown method {unknown[0]!r}; use uv, source or none"
        )
    return chosen


def pythons_dir() -> Path:
    """Where installed interpreters live: ``$PWB_CACHE_DIR/pythons``."""
    return cache_dir() / "pythons"


def sources_dir() -> Path:
    """Where CPython source tarballs are kept: ``$PWB_CACHE_DIR/sources``."""
    return cache_dir() / "sources"


def install(value: str, progress: Progress | None = None) -> str:
    """Install the interpreter ``value`` asks for; return the path of its executable.

    Raises :class:`InterpreterError` with one line saying what was tried and what to do.
    """
    say = progress or (lambda _msg: None)
    request = parse_request(value)
    if request is None:
        raise InterpreterError(f"--python {value}: not a version to install (e.g. 3.13, 3.14t)")
    if request.implementation == "pypy":
        raise InterpreterError(
            f"--python {value}: PyPy is not installed by pywebbench; install {request.name} "
            "(e.g. from pypy.org) and give its path"
        )
    methods = allowed_methods()
    tried: list[str] = []
    if "uv" in methods:
        if offline():
            tried.append("uv (offline: PWB_OFFLINE)")
        else:
            try:
                return uv_install(request, say)
            except InterpreterError as exc:
                tried.append(f"uv ({exc})")
    else:
        tried.append("uv (not allowed by PWB_PYTHON_INSTALL)")
    if "source" in methods:
        try:
            return str(build_from_source(request, say))
        except InterpreterError as exc:
            tried.append(f"a source build ({exc})")
    else:
        tried.append("a source build (not allowed by PWB_PYTHON_INSTALL)")
    raise InterpreterError(
        f"--python {value}: {request.name} is not installed; tried {'; '.join(tried)}. "
        "Install it (pyenv, apt) and give its path, or see docs/interpreters.md"
    )


# ---------------------------------------------------------------- uv


def _uv() -> list[str]:
    override = os.environ.get("PWB_UV")
    return shlex.split(override) if override else [sys.executable, "-m", "uv"]


def uv_install(request: PythonRequest, say: Progress) -> str:
    """``uv python install`` into ``pythons/uv``; the path of the installed executable."""
    env = dict(os.environ)
    env.update(
        UV_PYTHON_INSTALL_DIR=str(pythons_dir() / "uv"),
        UV_PYTHON_DOWNLOADS="automatic",
        UV_NO_PROGRESS="1",
    )
    for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(var, None)
    say(f"installing {request.name} with uv (a python-build-standalone download)")
    steps = (
        ["python", "install", request.uv_spec],
        ["python", "find", "--python-preference", "only-managed", request.uv_spec],
    )
    out = ""
    for step in steps:
        try:
            proc = subprocess.run(
                [*_uv(), *step],
                capture_output=True,
                text=True,
                timeout=UV_TIMEOUT_S,
                env=env,
                cwd="/",
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InterpreterError(f"uv {step[1]}: {exc}") from None
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise InterpreterError(f"uv {step[1]} failed: {last[0].strip()[:160]}")
        out = proc.stdout.strip()
    path = out.splitlines()[-1].strip() if out else ""
    if not path or not os.path.isfile(path):
        raise InterpreterError(f"uv python find gave no executable ({out[:160]!r})")
    return path


# ---------------------------------------------------------------- source build


def configure_flags(request: PythonRequest, pgo: bool | None = None) -> list[str]:
    """The ``./configure`` flags of a build (besides ``--prefix``): no pip, no test suite,
    ``--disable-gil`` for a free-threaded build; PGO and LTO only when asked
    (``PWB_PYTHON_PGO=1``)."""
    if pgo is None:
        pgo = os.environ.get("PWB_PYTHON_PGO", "").lower() in ("1", "true", "yes")
    flags = ["--with-ensurepip=no"]
    if tuple(int(x) for x in request.minor.split(".")) >= (3, 10):
        flags.append("--disable-test-modules")  # no test suite to install and byte-compile
    if request.free_threaded:
        flags.append("--disable-gil")
    if pgo:
        flags += ["--enable-optimizations", "--with-lto"]
    return flags


def cached_source(minor: str) -> Path | None:
    """The newest cached upstream tarball of CPython ``minor`` (``3.13``), or None."""
    found = glob.glob(str(sources_dir() / f"python{minor}_{minor}.*.orig.tar.*"))
    found = [f for f in found if not f.endswith(".asc")]
    return Path(max(found, key=_tarball_version)) if found else None


def _tarball_version(path: str) -> tuple[int, ...]:
    m = re.search(r"_(\d+)\.(\d+)\.(\d+)", os.path.basename(path))
    return tuple(int(x) for x in m.groups()) if m else (0,)


def fetch_source(minor: str, say: Progress) -> Path:
    """``apt-get source --download-only python<minor>`` into ``sources/`` (adding the deb-src
    line first when apt knows no such source package); the upstream tarball."""
    if offline():
        raise InterpreterError(f"no cached source in {sources_dir()} and offline (PWB_OFFLINE)")
    if shutil.which("apt-get") is None or shutil.which("dpkg-source") is None:
        raise InterpreterError("no cached source and no apt-get/dpkg-dev to fetch it")
    package = f"python{minor}"
    if not _apt_knows_source(package):
        _add_deb_src(say)
        if not _apt_knows_source(package):
            raise InterpreterError(f"Debian has no source package {package} in {SUITES}")
    sources_dir().mkdir(parents=True, exist_ok=True)
    errors = []
    for suite in SUITES:
        say(f"fetching CPython {minor}'s source: apt-get source {package}/{suite}")
        proc = _run_apt(["apt-get", "source", "--download-only", f"{package}/{suite}"])
        if proc.returncode == 0 and cached_source(minor):
            break
        lines = [x for x in proc.stderr.splitlines() if x.startswith("E:")] or ["no output"]
        errors.append(f"{suite}: {lines[0][3:].strip()[:120]}")
    tarball = cached_source(minor)
    if tarball is None:
        raise InterpreterError(f"apt-get source {package} failed ({'; '.join(errors)})")
    return tarball


def _run_apt(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=APT_TIMEOUT_S, cwd=sources_dir()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InterpreterError(f"{' '.join(argv[:2])}: {exc}") from None


def _apt_knows_source(package: str) -> bool:
    proc = subprocess.run(
        ["apt-cache", "showsrc", package], capture_output=True, text=True, timeout=60
    )
    return proc.returncode == 0 and f"Package: {package}" in proc.stdout


def _add_deb_src(say: Progress) -> None:
    if not SOURCES_FILE.exists():
        if os.geteuid() != 0:
            raise InterpreterError(
                f"apt has no CPython source packages: as root, write {SOURCES_FILE} "
                "(see docs/interpreters.md) and run apt-get update"
            )
        say(f"adding Debian's deb-src line for CPython sources: {SOURCES_FILE}")
        SOURCES_FILE.write_text(SOURCES_TEXT)
    say("apt-get update (to read the source package lists)")
    sources_dir().mkdir(parents=True, exist_ok=True)
    _run_apt(["apt-get", "update"])


def build_dir_name(version: str, flags: list[str]) -> str:
    """``cpython-3.13.5t`` for a free-threaded build; a PGO build ends in ``-pgo``."""
    suffix = "t" if "--disable-gil" in flags else ""
    return f"cpython-{version}{suffix}" + ("-pgo" if "--enable-optimizations" in flags else "")


def build_from_source(request: PythonRequest, say: Progress) -> Path:
    """Build (once, cached) CPython ``request.minor`` from upstream's tarball; its executable."""
    tarball = cached_source(request.minor) or fetch_source(request.minor, say)
    version = ".".join(str(x) for x in _tarball_version(str(tarball)))
    flags = configure_flags(request)
    prefix = pythons_dir() / build_dir_name(version, flags)
    exe = prefix / "bin" / f"python{request.minor}{'t' if request.free_threaded else ''}"
    if (prefix / MARKER).exists() and exe.exists():
        return exe
    pythons_dir().mkdir(parents=True, exist_ok=True)
    lock_path = pythons_dir() / f".{prefix.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building the same: wait for it
        if (prefix / MARKER).exists() and exe.exists():
            return exe
        _build(tarball, version, flags, prefix, say)
    return exe


def _build(tarball: Path, version: str, flags: list[str], prefix: Path, say: Progress) -> None:
    work = pythons_dir() / f".build-{prefix.name}-{os.getpid()}"
    stage = pythons_dir() / f".stage-{prefix.name}-{os.getpid()}"
    for old in glob.glob(str(pythons_dir() / f".build-{prefix.name}-*")) + glob.glob(
        str(pythons_dir() / f".stage-{prefix.name}-*")
    ):
        shutil.rmtree(old, ignore_errors=True)  # a crashed build (we hold the lock)
    shutil.rmtree(prefix, ignore_errors=True)
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"python-build-{prefix.name}-{time.strftime('%Y%m%dT%H%M%S')}.log"
    jobs = str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)
    say(f"building CPython {version} from {tarball.name} ({' '.join(flags)}); log: {log_path}")
    started = time.monotonic()
    try:
        work.mkdir(parents=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(work, filter="data")
        (src,) = [p for p in work.iterdir() if p.is_dir()]
        with open(log_path, "w") as log:
            for argv in (
                ["./configure", f"--prefix={prefix}", *flags],
                ["make", f"-j{jobs}"],
                ["make", "install", f"DESTDIR={stage}"],
            ):
                log.write(f"$ {' '.join(argv)}\n")
                log.flush()
                try:
                    rc = subprocess.run(
                        argv, cwd=src, stdout=log, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S
                    ).returncode
                except subprocess.TimeoutExpired:
                    rc = -1
                if rc != 0:
                    raise InterpreterError(f"{argv[0]} {argv[1]} failed (log: {log_path})")
        os.replace(stage / str(prefix).lstrip("/"), prefix)
        manifest = {
            "implementation": "cpython",
            "version": version,
            "source": tarball.name,
            "source_sha256": hashlib.sha256(tarball.read_bytes()).hexdigest(),
            "configure": flags,
            "build_seconds": round(time.monotonic() - started, 1),
            "log": str(log_path),
        }
        (prefix / MARKER).write_text(json.dumps(manifest, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)
    say(f"built CPython {version} in {time.monotonic() - started:.0f} s: {prefix}")


def build_manifest(executable: str) -> dict[str, object] | None:
    """The recorded build (configure flags, source) of an interpreter built here, or None."""
    path = Path(executable).resolve().parents[1] / MARKER
    try:
        manifest: dict[str, object] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return manifest


def install_request(value: str) -> str | None:
    """The catalogue's installer (:data:`pywebbench.catalogue.interpreters.Installer`): the
    path of the CPython a version request (``3.14``, ``3.13t``, ``cpython3.12``) names, once
    installed (uv, else a source build); None when ``value`` is not a version request."""
    if parse_request(value) is None:
        return None
    return str(install(value, lambda msg: print(f"[python] {msg}", file=sys.stderr)))
