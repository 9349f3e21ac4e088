"""The host facts a run records (run/host.py): the ones that move ratios between machines."""

from __future__ import annotations

import platform
from pathlib import Path

from pywebbench.meter.pypy_gc import reported_caches
from pywebbench.run.host import facts


def test_a_run_records_the_cache_the_cpu_reports() -> None:
    """PyPy sizes its nursery from it, so two machines' PyPy figures differ by it."""
    found = facts()
    caches = found["extra"]["cpu_cache_bytes"]
    assert caches == reported_caches(Path("/proc/cpuinfo").read_text())
    if platform.machine() == "x86_64":  # x86 Linux reports it; this VM and CI do
        assert caches and all(c > 0 for c in caches)
    assert found["cpu_model"] and found["kernel"] == platform.release()
