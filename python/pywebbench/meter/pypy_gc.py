"""PyPy's collector on this host: the nursery PyPy sizes from the cache the CPU reports, and
the floor below which it runs no major collection (docs/interpreters.md#pypys-collector).

PyPy's incminimark collector takes its nursery from ``PYPY_GC_NURSERY`` or, unset, from the
smallest ``cache size`` of ``/proc/cpuinfo`` on x86 (the last-level cache there): half of it
when it is over 8 MiB, else 4 MiB (``rpython/memory/gc/env.py``,
``best_nursery_size_for_L2cache``). It runs no major collection while its heap is below
``PYPY_GC_MIN``, 8 times the nursery by default. A cloud VM that reports a 480 MiB cache
gives every PyPy process a 240 MiB nursery and a 1.9 GiB floor: a server whose requests leave
old-generation garbage grows to about 2.4 GiB before its first major collection, and does not
leak (this VM, 2026-12-05: gunicorn-gthread/raw-wsgi cpu grew 486 -> 2,394 MiB over 463,000
requests, then held to 704,000; with ``PYPY_GC_NURSERY=4MB`` it held 82 MiB).

Servers inherit ``PYPY_GC_*`` from pywebbench's environment (launch/server.py:launch_env),
so ``PYPY_GC_NURSERY=4MB pywebbench run`` measures PyPy as on a host with a usual cache.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
#: PyPy's nursery when the cache is unknown or not over :data:`CACHE_FLOOR`.
DEFAULT_NURSERY = 4 * MIB
#: A reported cache at or below this gives the default nursery (PyPy: "we don't want to have
#: nursery estimated on L2 when L3 is present").
CACHE_FLOOR = 8 * MIB
#: The collection floor is this many nurseries unless ``PYPY_GC_MIN`` says otherwise.
FLOOR_NURSERIES = 8
#: A nursery from this size on is worth a pre-flight line: its floor (512 MiB from a 64 MiB
#: nursery) is more than a server's heap usually holds.
LARGE_NURSERY = 64 * MIB

#: The source of a nursery set with the environment variable.
ASKED = "PYPY_GC_NURSERY"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$", re.IGNORECASE)
_FACTOR = {None: 1, "b": 1, "kb": 1024, "mb": MIB, "gb": 1024 * MIB}


@dataclass(frozen=True)
class Collector:
    """PyPy's nursery and collection floor here, and where the nursery's size came from."""

    nursery_bytes: int
    floor_bytes: int  # no major collection while the heap is below this
    source: str

    @property
    def large(self) -> bool:
        """A nursery of :data:`LARGE_NURSERY` or more, sized from the cache (not asked for)."""
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


def reported_cache(cpuinfo: str) -> int | None:
    """The smallest ``cache size`` (in KB) of ``/proc/cpuinfo``'s processors, in bytes."""
    sizes = [
        int(m.group(1)) * 1024
        for m in re.finditer(r"^cache size\s*:\s*(\d+)\s*[kK]", cpuinfo, re.MULTILINE)
    ]
    return min(sizes) if sizes else None


def collector(env: Mapping[str, str], cpuinfo: str, machine: str) -> Collector:
    """PyPy's collector for this environment, ``/proc/cpuinfo`` text and machine (``uname
    -m``): the module doc's rule. Off x86, PyPy reads other sources (sysfs on aarch64); they
    are not read here, and the default is given with a source that says so."""
    asked = parse_size(env.get("PYPY_GC_NURSERY", ""))
    if asked is not None:
        nursery, source = asked, ASKED
    elif machine.endswith("86") or machine == "x86_64":
        cache = reported_cache(cpuinfo)
        if cache is None:
            nursery, source = DEFAULT_NURSERY, "default: no cache size in /proc/cpuinfo"
        elif cache > CACHE_FLOOR:
            nursery, source = cache // 2, f"half the {cache // MIB} MiB cache of /proc/cpuinfo"
        else:
            nursery, source = DEFAULT_NURSERY, f"default: a {cache // 1024} KiB cache"
    else:
        nursery, source = DEFAULT_NURSERY, f"default assumed: the cache is not read on {machine}"
    floor = parse_size(env.get("PYPY_GC_MIN", ""))
    return Collector(nursery, floor if floor is not None else FLOOR_NURSERIES * nursery, source)


def on_this_host() -> Collector:
    """:func:`collector` for this process's environment and this host."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    return collector(os.environ, cpuinfo, platform.machine())
