"""PyPy's collector on this host, as the installed PyPy reports it: its nursery (the young
generation) and the heap at which it starts its first major collection
(docs/interpreters.md#pypys-collector).

PyPy sizes its nursery from ``PYPY_GC_NURSERY`` or, unset, from the cache the CPU reports,
and starts no major collection while its old generation is below a floor (``PYPY_GC_MIN``, or
a multiple of the nursery). How it derives both differs between PyPy versions: Debian's PyPy
7.3.11 gives a CPU that reports a 1 MiB cache a 1 MiB nursery, where PyPy's newest source
gives 4 MiB. So nothing here re-derives the rule. :func:`probe` asks the interpreter:

- the nursery: ``gc.get_stats()``'s ``nursery_size``, read in a PyPy process;
- the floor: that process keeps 4-KiB objects alive until PyPy's own
  ``gc.hooks.on_gc_collect_step`` reports the first step of a major collection, and reads its
  old generation's size (arenas plus raw-malloced objects) there, bounded by
  :data:`PROBE_CAP_BYTES`. It takes about as long as allocating the floor (5 s for 1.9 GiB on
  a VM that reports a 480 MiB cache, 0.01 s for 8 MiB).

The answer is cached per interpreter binary, ``PYPY_GC_*`` setting and the CPU's reported
caches (``$PWB_CACHE_DIR/pypy-gc.json``), so a host or an interpreter the cache has not seen
is asked again. Servers inherit ``PYPY_GC_*`` from pywebbench's environment
(launch/server.py:launch_env), so ``PYPY_GC_NURSERY=4MB pywebbench run`` measures PyPy as on a
host with a usual cache, and the probe is asked with the same setting.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

MIB = 1024 * 1024
#: A nursery from this size on is worth a pre-flight line: its floor (512 MiB from a 64 MiB
#: nursery at PyPy's usual 8 nurseries) is more than a server's heap usually holds.
LARGE_NURSERY = 64 * MIB
#: The probe stops keeping objects alive past this much (a floor not met below it is
#: reported as this, with a source that says so).
PROBE_CAP_BYTES = 8 * 1024 * MIB
#: Seconds the probe may take.
PROBE_TIMEOUT_S = 180.0

#: The source of a nursery set with the environment variable.
ASKED = "PYPY_GC_NURSERY"

#: Run by the PyPy being asked; prints one JSON line.
PROBE_SCRIPT = """
import gc, json, sys
cap = int(sys.argv[1])
def raw():
    stats = gc.get_stats()
    return getattr(stats, "_s", stats)
first = []
def step(_):
    if not first:
        s = raw()
        first.append(int(s.total_arena_memory) + int(s.total_rawmalloced_memory))
nursery = int(raw().nursery_size)
gc.hooks.on_gc_collect_step = step
kept = []
chunk = 4096
while not first and len(kept) * chunk < cap:
    kept.append(bytearray(chunk))
gc.hooks.on_gc_collect_step = None
print(json.dumps({"nursery_bytes": nursery, "floor_bytes": first[0] if first else None,
                  "version": ".".join(map(str, sys.pypy_version_info[:3]))}))
"""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$", re.IGNORECASE)
_FACTOR = {None: 1, "b": 1, "kb": 1024, "mb": MIB, "gb": 1024 * MIB}


class ProbeError(RuntimeError):
    """The interpreter could not be asked (the message says why)."""


@dataclass(frozen=True)
class Collector:
    """PyPy's nursery and collection floor here, and where the nursery's size came from."""

    nursery_bytes: int
    floor_bytes: int  # the old generation's size at the first major collection step
    source: str

    @property
    def large(self) -> bool:
        """A nursery of :data:`LARGE_NURSERY` or more that was not asked for."""
        return self.nursery_bytes >= LARGE_NURSERY and self.source != ASKED

    def describe(self) -> dict[str, int | str]:
        """The host fact stored with a run that measures PyPy."""
        return {
            "nursery_bytes": self.nursery_bytes,
            "floor_bytes": self.floor_bytes,
            "source": self.source,
        }


def parse_size(text: str) -> int | None:
    """A size as PyPy reads its ``PYPY_GC_*`` variables: a number with an optional B, KB, MB
    or GB (any case); None when it is not one, or not above 0 (PyPy then ignores it)."""
    m = _SIZE.match(text)
    if m is None:
        return None
    value = int(float(m.group(1)) * _FACTOR[m.group(2).lower() if m.group(2) else None])
    return value if value > 0 else None


def reported_caches(cpuinfo: str) -> list[int]:
    """Every ``cache size`` (in KB) of ``/proc/cpuinfo``'s processors, in bytes, sorted and
    without repeats: a host fact (what a CPU reports, not what a component made of it)."""
    return sorted(
        {
            int(m.group(1)) * 1024
            for m in re.finditer(r"^cache size\s*:\s*(\d+)\s*[kK]", cpuinfo, re.MULTILINE)
        }
    )


def gc_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The ``PYPY_GC_*`` variables of ``env``: what PyPy reads besides the host."""
    return {k: v for k, v in sorted(env.items()) if k.startswith("PYPY_GC")}


def from_report(report: Mapping[str, object], env: Mapping[str, str]) -> Collector:
    """The collector from the probe's JSON report, asked with ``env``."""
    nursery = report.get("nursery_bytes")
    if not isinstance(nursery, int) or nursery <= 0:
        raise ProbeError(f"the probe reported no nursery: {report}")
    version = report.get("version") or "?"
    if parse_size(env.get("PYPY_GC_NURSERY", "")) is not None:
        source = ASKED
    else:
        source = f"PyPy {version} reported it"
    floor = report.get("floor_bytes")
    if not isinstance(floor, int):
        floor = PROBE_CAP_BYTES
        source += f"; no major collection below {PROBE_CAP_BYTES // MIB:,} MiB"
    return Collector(nursery, floor, source)


def ask(interpreter: str, env: Mapping[str, str], *, wrap: Sequence[str] = ()) -> Collector:
    """Run :data:`PROBE_SCRIPT` with the PyPy at ``interpreter`` and ``env`` (behind the
    command prefix ``wrap``: the tests replay a recorded host's /proc/cpuinfo so)."""
    try:
        done = subprocess.run(
            [*wrap, interpreter, "-c", PROBE_SCRIPT, str(PROBE_CAP_BYTES)],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env=dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProbeError(f"{interpreter}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError(f"{interpreter} exited {done.returncode}: {tail}")
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ProbeError(f"{interpreter}: no report in {done.stdout!r}") from None
    return from_report(report, env)


def _cache_file() -> Path:
    base = os.environ.get("PWB_CACHE_DIR") or Path.home() / ".cache" / "pywebbench"
    return Path(base) / "pypy-gc.json"


def cache_key(interpreter: str, env: Mapping[str, str], cpuinfo: str) -> str:
    """What the answer depends on: the binary (its real path, mtime and size), the
    ``PYPY_GC_*`` settings, the machine and the CPU's reported caches."""
    real = os.path.realpath(interpreter)
    st = os.stat(real)
    parts = [
        real,
        str(st.st_mtime_ns),
        str(st.st_size),
        json.dumps(gc_settings(env)),
        platform.machine(),
        json.dumps(reported_caches(cpuinfo)),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def cpuinfo_text() -> str:
    """``/proc/cpuinfo`` as text ("" where it cannot be read)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def probe(interpreter: str, env: Mapping[str, str] | None = None) -> Collector:
    """PyPy's collector for the PyPy at ``interpreter`` on this host, asked once and cached
    (module doc). Raises :class:`ProbeError` when it cannot be asked."""
    env = os.environ if env is None else env
    try:
        key = cache_key(interpreter, env, cpuinfo_text())
    except OSError as exc:
        raise ProbeError(f"{interpreter}: {exc}") from None
    path = _cache_file()
    try:
        cache = json.loads(path.read_text())
        if not isinstance(cache, dict):
            cache = {}
    except (OSError, ValueError):
        cache = {}
    hit = cache.get(key)
    if isinstance(hit, dict):
        try:
            return Collector(**hit)
        except TypeError:
            pass
    found = ask(interpreter, env)
    cache[key] = asdict(found)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the probe's time
    return found
