"""Find the Python interpreters on this machine: CPython (PATH, pyenv, Debian) and PyPy.

Each candidate executable is run once with a tiny probe script (compatible with Python 2.7 so
that old pyenv versions answer instead of crashing); the answer is cached in
``$PWB_CACHE_DIR/interpreters.json`` keyed by path, mtime and size, so later discoveries run
nothing.

Only interpreters the orchestrator can provision stacks for are returned by :func:`discover`
(Python >= 3.9): the apps in ``pywebbench/inside/apps`` target 3.9+ (PyPy's level) and the pinned
servers and frameworks need it (uv itself refuses to build venvs for Python < 3.8 and current
gunicorn, uvicorn, flask... require >= 3.8 or 3.9). :func:`discover_all` also lists the skipped
ones with the reason.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pywebbench.catalogue.base import Interpreter

#: What the probe script reports about an interpreter (a JSON object).
Facts = dict[str, Any]

#: Oldest language version stacks can be provisioned for.
MIN_VERSION = (3, 9)
MIN_VERSION_REASON = (
    "Python < 3.9: the pywebbench apps and the pinned servers/frameworks need Python >= 3.9"
)

_PROBE_TIMEOUT_S = 20.0
_GIL_SUFFIX = re.compile(r"^(.+)@gil([01])$")
_PROBE_VERSION = 3  # bump when the probe script changes: invalidates cached answers

# Runs inside the candidate interpreter; must work on Python 2.7 and 3.x.
_PROBE = r"""
import json, os, platform, sys, sysconfig
impl = platform.python_implementation().lower()
exe = sys.executable
base = getattr(sys, "_base_executable", None)
if getattr(sys, "base_prefix", sys.prefix) != sys.prefix and base:
    exe = base
build = ""
if impl == "pypy":
    v = sys.pypy_version_info
    build = "PyPy %d.%d.%d" % (v.major, v.minor, v.micro)
    if v.releaselevel != "final":
        build += "-%s%d" % (v.releaselevel, v.serial)
b = platform.python_build()
comp = platform.python_compiler()
if not comp and "[" in sys.version:
    comp = sys.version.rsplit("[", 1)[1].rstrip("]").replace("PyPy ", "").split(" with ")[-1]
build = ((build + ", ") if build else "") + "%s, %s (%s)" % (b[0], b[1], comp)
cv = sysconfig.get_config_var
args = cv("CONFIG_ARGS") or ""
cflags = (cv("PY_CFLAGS") or "") + " " + (cv("PY_CFLAGS_NODIST") or "")
jit = "--enable-experimental-jit" in args
if hasattr(sys, "_jit"):
    jit = bool(getattr(sys._jit, "is_available", lambda: jit)())
sys.stdout.write(json.dumps({
    "free_threaded": bool(cv("Py_GIL_DISABLED")),
    "jit": jit,
    "pgo": "--enable-optimizations" in args or "-fprofile-use" in cflags,
    "lto": "--with-lto" in args or "-flto" in cflags,
    "implementation": impl,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "version_info": list(sys.version_info[:3]),
    "executable": exe,
    "build": build.strip(),
}))
"""


class InterpreterError(ValueError):
    """An interpreter path or name that cannot be used (the message says why)."""


@dataclass(frozen=True)
class Found:
    """One probed interpreter with where it was found and, if skipped, why."""

    interpreter: Interpreter
    source: str  # "running", "path", "pyenv", "debian", "provisioned", "user"
    skipped: str | None = None  # reason it is not offered for stacks


def _cache_dir() -> Path:
    return Path(os.environ.get("PWB_CACHE_DIR") or Path.home() / ".cache" / "pywebbench")


def _cache_file() -> Path:
    return _cache_dir() / "interpreters.json"


def _load_cache() -> dict[str, Facts]:
    try:
        cache: dict[str, Facts] = json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return {}
    return cache


def _save_cache(cache: dict[str, Facts]) -> None:
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs speed


def _stamp(path: str) -> list[float] | None:
    try:
        st = os.stat(path)  # follows symlinks: the real binary's mtime
    except OSError:
        return None
    return [st.st_mtime, float(st.st_size)]


def probe(path: str, cache: dict[str, Facts] | None = None) -> Facts:
    """Run ``path`` once with the probe script (or answer from ``cache``); return its facts.

    Raises :class:`InterpreterError` if it is not a runnable Python.
    """
    stamp = _stamp(path)
    if stamp is None:
        raise InterpreterError(f"{path}: no such file")
    if cache is not None:
        hit = cache.get(path)
        if hit and hit.get("stamp") == stamp and hit.get("probe") == _PROBE_VERSION:
            cached: Facts = hit["facts"]
            return cached
    if not os.access(path, os.X_OK):
        raise InterpreterError(f"{path}: not executable")
    try:
        proc = subprocess.run(
            [path, "-E", "-s", "-c", _PROBE],  # -E -s: no PYTHON* env, no user site (2.7 too)
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InterpreterError(f"{path}: could not run it as Python ({exc})") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise InterpreterError(f"{path}: not a working Python interpreter ({tail[0]})")
    try:
        facts: Facts = json.loads(proc.stdout)
    except ValueError as exc:
        raise InterpreterError(f"{path}: unexpected probe output {proc.stdout[:200]!r}") from exc
    if cache is not None:
        cache[path] = {"stamp": stamp, "probe": _PROBE_VERSION, "facts": facts}
    return facts


def _skip_reason(facts: Facts) -> str | None:
    if facts["implementation"] not in ("cpython", "pypy"):
        return f"{facts['implementation']}: only CPython and PyPy are supported"
    if tuple(facts["version_info"][:2]) < MIN_VERSION:
        return MIN_VERSION_REASON
    return None


def _candidates() -> list[tuple[str, str]]:
    """(path, source) pairs, most preferred first: the running CPython, pyenv, PATH, Debian."""
    out: list[tuple[str, str]] = [(sys.executable, "running")]
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    for d in sorted(glob.glob(os.path.join(root, "versions", "*")), key=_version_sort_key):
        for exe in ("python3", "python", "pypy3", "pypy"):
            p = os.path.join(d, "bin", exe)
            if os.path.exists(p):
                out.append((p, "pyenv"))
                break
    names = ["python3", "python", "pypy3", "pypy"] + [f"python3.{m}" for m in range(9, 21)]
    for dirname in os.environ.get("PATH", "").split(os.pathsep):
        if not dirname or "shims" in Path(dirname).parts or ".pyenv" in dirname:
            continue  # pyenv shims depend on the cwd's .python-version; versions are listed above
        for n in names:
            p = os.path.join(dirname, n)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                out.append((p, "path"))
    for pattern in ("/usr/bin/python3.*", "/usr/bin/pypy3*", "/usr/local/bin/python3.*"):
        for p in sorted(glob.glob(pattern)):
            base = os.path.basename(p)
            if base.endswith("-config") or "clean" in base or "compile" in base or "m-" in base:
                continue
            out.append((p, "debian" if p.startswith("/usr/bin") else "path"))
    for pattern in ("cpython-*/bin/python3.*", "uv/*/bin/python3.*"):  # pywebbench installed
        for p in sorted(glob.glob(str(_cache_dir() / "pythons" / pattern))):
            if not p.endswith("-config") and os.access(p, os.X_OK):
                out.append((p, "provisioned"))
    return out


def _version_sort_key(path: str) -> tuple[tuple[int, int, str], ...]:
    parts = []
    for piece in os.path.basename(path).replace("-", ".").split("."):
        parts.append((0, int(piece), "") if piece.isdigit() else (1, 0, piece))
    return tuple(parts)


def _short_name(facts: Facts) -> str:
    """``cpython3.13``; a free-threaded build ends in ``t`` (``cpython3.13t``), like its
    executable, so it never shares a name with the GIL build of its version."""
    major, minor = facts["version_info"][:2]
    return f"{facts['implementation']}{major}.{minor}{'t' if facts.get('free_threaded') else ''}"


def assign_names(items: list[tuple[Facts, str]]) -> list[Interpreter]:
    """Give each probed interpreter a unique, stable-ish name (first come gets the short one)."""
    used: set[str] = set()
    result = []
    for facts, _source in items:
        name = _short_name(facts)
        if name in used:
            name = f"{facts['implementation']}{facts['version']}"
            name += "t" if facts.get("free_threaded") else ""
        n = 2
        base = name
        while name in used:
            name = f"{base}-{n}"
            n += 1
        used.add(name)
        result.append(
            Interpreter(
                name=name,
                implementation=facts["implementation"],
                version=facts["version"],
                path=os.path.realpath(facts["executable"]),
                build=facts["build"],
                free_threaded=bool(facts.get("free_threaded")),
                jit=bool(facts.get("jit")),
                optimizations="+".join(
                    flag
                    for flag, on in (("PGO", facts.get("pgo")), ("LTO", facts.get("lto")))
                    if on
                ),
            )
        )
    return result


def discover_all(extra: Sequence[str] = ()) -> list[Found]:
    """Every interpreter found, including skipped ones (with the reason), duplicates removed.

    ``extra`` are user-given paths (or command names on PATH); a bad one raises
    :class:`InterpreterError`.
    """
    cache = _load_cache()
    before = json.dumps(cache, sort_keys=True)
    seen: dict[str | tuple[int, int], int] = {}
    items: list[tuple[Facts, str]] = []
    user: list[tuple[str, str]] = [(_resolve_user_path(p), "user") for p in extra]
    auto = _candidates()
    for path, source in auto[:1] + user + auto[1:]:
        try:
            facts = probe(path, cache)
        except InterpreterError:
            if source == "user":
                raise
            continue
        real = _identity(facts["executable"])
        if real in seen:
            continue
        seen[real] = len(items)
        items.append((facts, source))
    if json.dumps(cache, sort_keys=True) != before:
        _save_cache(cache)
    # Names: the running interpreter and user-given ones first, then in discovery order, so the
    # orchestrator's CPython is "cpython3.11" even if Debian also has a 3.11.
    interpreters = assign_names(items)
    return [
        Found(interp, source, _skip_reason(facts))
        for interp, (facts, source) in zip(interpreters, items, strict=True)
    ]


def _identity(executable: str) -> str | tuple[int, int]:
    """What makes two executables one interpreter: the same file, through symlinks or hard
    links (a CPython install's ``python3.13t`` and ``python3.13`` are one binary)."""
    real = os.path.realpath(executable)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return (st.st_dev, st.st_ino)


def _resolve_user_path(p: str) -> str:
    if os.sep not in p:
        found = shutil.which(p)
        if not found:
            raise InterpreterError(
                f"--python {p}: not found on PATH; give a path to the executable"
            )
        p = found
    path = os.path.abspath(os.path.expanduser(p))
    if not os.path.exists(path):
        raise InterpreterError(f"--python {p}: no such file")
    return path


def discover(extra: Sequence[str] = ()) -> list[Interpreter]:
    """Interpreters stacks can be provisioned for (CPython/PyPy >= 3.9), sorted by name.

    ``extra``: user-given executables (paths or names on PATH), probed too.
    """
    found = [f.interpreter for f in discover_all(extra) if f.skipped is None]
    return sorted(found, key=_interp_sort_key)


def one_per_version(pool: Iterable[Interpreter]) -> list[Interpreter]:
    """One interpreter of ``pool`` per implementation, language version and build (GIL or
    free-threaded), the one with the short name: a version study's interpreters."""
    seen: dict[tuple[str, str, bool], Interpreter] = {}
    for i in pool:
        key = (i.implementation, i.minor, i.free_threaded)
        if key not in seen or len(i.name) < len(seen[key].name):  # "cpython3.11", not "3.11.2"
            seen[key] = i
    return list(seen.values())


def _interp_sort_key(i: Interpreter) -> tuple[bool, tuple[int, ...], str]:
    return (i.implementation != "cpython", tuple(int(x) for x in i.version.split(".")), i.name)


def default_interpreters() -> list[Interpreter]:
    """The running CPython (its base interpreter if in a venv) plus Debian's pypy3 if present."""
    found = discover_all()
    out = [f.interpreter for f in found if f.source == "running" and f.skipped is None]
    pypy = [f.interpreter for f in found if f.interpreter.is_pypy and f.skipped is None]
    return out + pypy[:1]


def split_gil(value: str) -> tuple[str, str]:
    """``3.13t@gil1`` -> (``3.13t``, ``"1"``): the GIL axis of a free-threaded build
    (``PYTHON_GIL`` of its servers); a value without the suffix -> (value, ``""``)."""
    m = _GIL_SUFFIX.match(value)
    return (m.group(1), m.group(2)) if m else (value, "")


def with_gil(interpreter: Interpreter, gil: str, flag: str = "--python") -> Interpreter:
    """``interpreter`` run with ``PYTHON_GIL=gil`` ("0" or "1"), named ``<name>@gil<gil>``;
    its stacks share the venv of ``interpreter`` but never a row."""
    if not gil:
        return interpreter
    if not interpreter.free_threaded:
        raise InterpreterError(
            f"{flag} {interpreter.name}@gil{gil}: the GIL can be set only on a free-threaded "
            "build (e.g. 3.13t@gil0, 3.13t@gil1)"
        )
    return dataclasses.replace(interpreter, name=f"{interpreter.name}@gil{gil}", gil=gil)


#: Installs the interpreter a version request names (``3.14``, ``3.13t``) and returns its
#: path, or None when the value is no version request; raises :class:`InterpreterError` when
#: it cannot (:func:`pywebbench.provision.pythons.install_request`: the catalogue only finds).
Installer = Callable[[str], "str | None"]


def _installed(value: str, install: Installer | None) -> Interpreter | None:
    path = install(value) if install is not None else None
    return find(path) if path is not None else None


def find(
    name_or_path: str,
    interpreters: Iterable[Interpreter] | None = None,
    *,
    install: Installer | None = None,
) -> Interpreter:
    """One interpreter by name (``cpython3.11``), version (``3.11``, ``pypy``) or path; a
    ``@gil0``/``@gil1`` suffix sets the GIL of a free-threaded build (:func:`with_gil`). A
    version that none matches is installed by ``install``, when given.

    Raises :class:`InterpreterError` naming the valid choices.
    """
    base, gil = split_gil(name_or_path)
    if gil:
        return with_gil(find(base, interpreters, install=install), gil)
    if os.sep in name_or_path or name_or_path.startswith("~"):
        path = _resolve_user_path(name_or_path)
        real = _identity(probe(path)["executable"])
        found = next(f for f in discover_all([path]) if _identity(f.interpreter.path) == real)
        if found.skipped:
            raise InterpreterError(f"--python {name_or_path}: {found.skipped}")
        return found.interpreter
    pool = list(interpreters) if interpreters is not None else discover()
    matches = match(name_or_path, pool)
    if matches:
        return matches[0]
    if shutil.which(name_or_path):
        return find(shutil.which(name_or_path) or name_or_path)
    installed = _installed(name_or_path, install)
    if installed is not None:
        return installed
    names = ", ".join(i.name for i in pool) or "none found"
    raise InterpreterError(f"--python {name_or_path}: unknown interpreter; choose from {names}")


def match(pattern: str, pool: Iterable[Interpreter]) -> list[Interpreter]:
    """Interpreters of ``pool`` matching a name, glob, implementation or version prefix."""
    import fnmatch

    pool = list(pool)
    exact = [i for i in pool if i.name in (pattern, f"cpython{pattern}")]
    if exact:
        return exact[:1] if exact[0].name == pattern else exact
    out = []
    # "3.13" is the GIL build, "3.13t" the free-threaded one: never both
    free_threaded = pattern.endswith("t") and pattern[:1].isdigit()
    version = pattern[:-1] if free_threaded else pattern
    for i in pool:
        if fnmatch.fnmatchcase(i.name, pattern) or pattern == i.implementation:
            out.append(i)
        elif version[:1].isdigit() and (
            i.version == version or i.version.startswith(version + ".")
        ):
            if i.implementation == "cpython" and i.free_threaded == free_threaded:
                out.append(i)
        elif pattern in (f"{i.implementation}{i.version}", f"{i.implementation}-{i.minor}"):
            out.append(i)
        elif pattern == "pypy3" and i.is_pypy:
            out.append(i)
    return out


def select(
    patterns: Sequence[str], flag: str = "--python", *, install: Installer | None = None
) -> list[Interpreter]:
    """The interpreters that ``--python`` values (a study's ``matrix.interpreters``) name: the
    one resolver of ``run``, ``ab``, ``stacks`` and ``verify``.

    Each value may be a comma list of names (``cpython3.11``), versions (``3.13``, ``3.13t``),
    implementations (``pypy``), globs, paths, or ``all``; ``@gil0``/``@gil1`` sets the GIL of a
    free-threaded build. A value names language versions, and each is taken once: every
    value but a path resolves to one interpreter per implementation, version and build
    (:func:`one_per_version`; ``all`` is that of everything found). A version none matches
    is installed by ``install``, when given. No values: :func:`default_interpreters`.

    Raises :class:`InterpreterError` (one line naming ``flag`` and the valid names) when a
    value matches nothing or no interpreter is found at all.
    """
    values = [v.strip() for raw in patterns for v in raw.split(",") if v.strip()]
    if not values:
        found = default_interpreters()
        if not found:
            raise InterpreterError(f"{flag}: no Python interpreter found")
        return found
    pool = discover()
    chosen: list[Interpreter] = []
    for raw_value in values:
        value, gil = split_gil(raw_value)
        if value == "all":
            hits = one_per_version(pool)
        else:
            # a path, a name on PATH or an install: find's one answer (and its one-line error)
            hits = one_per_version(match(value, pool))
            if not hits:
                try:
                    hits = [find(value, pool, install=install)]
                except InterpreterError as exc:
                    raise InterpreterError(str(exc).replace("--python", flag, 1)) from None
        for i in hits:
            if gil and not i.free_threaded and len(hits) > 1:
                continue  # "all@gil1": the free-threaded ones
            i = with_gil(i, gil, flag)
            if i not in chosen:
                chosen.append(i)
    return chosen
