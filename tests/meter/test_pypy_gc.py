"""PyPy's collector on this host (meter/pypy_gc.py): the nursery PyPy sizes from the cache the
CPU reports, and the floor below which it collects nothing; checked against PyPy itself."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

import pytest
from pywebbench.catalogue.interpreters import discover
from pywebbench.meter import pypy_gc
from pywebbench.meter.pypy_gc import MIB, collector, parse_size
from pywebbench.run.preflight import pypy_collector

CPUINFO = "processor\t: {n}\ncache size\t: {kb} KB\n\n"


def _cpuinfo(*kbs: int) -> str:
    return "".join(CPUINFO.format(n=n, kb=kb) for n, kb in enumerate(kbs))


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4MB", 4 * MIB),
        ("512kb", 512 * 1024),
        ("1GB", 1024 * MIB),
        ("123", 123),
        ("2.5MB", int(2.5 * MIB)),
    ],
)
def test_sizes_read_as_pypy_reads_them(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "0", "-4MB", "4TB"])
def test_what_pypy_ignores_is_no_size(text: str) -> None:
    assert parse_size(text) is None


def test_a_large_reported_cache_gives_half_of_it_and_a_floor_of_eight_nurseries() -> None:
    """This VM's /proc/cpuinfo: 491520 KB on both processors."""
    found = collector({}, _cpuinfo(491520, 491520), "x86_64")
    assert found.nursery_bytes == 240 * MIB and found.floor_bytes == 1920 * MIB
    assert found.large and "480 MiB" in found.source


def test_the_smallest_cache_counts_and_a_small_one_gives_four_mib() -> None:
    assert collector({}, _cpuinfo(32768, 16384), "x86_64").nursery_bytes == 8 * MIB
    small = collector({}, _cpuinfo(8192), "x86_64")  # 8 MiB is not over 8 MiB
    assert small.nursery_bytes == 4 * MIB and not small.large
    assert collector({}, "", "x86_64").nursery_bytes == 4 * MIB


def test_the_environment_overrides_and_is_not_a_finding() -> None:
    asked = collector({"PYPY_GC_NURSERY": "256MB"}, _cpuinfo(491520), "x86_64")
    assert asked.nursery_bytes == 256 * MIB and asked.source == "PYPY_GC_NURSERY"
    assert not asked.large and pypy_collector(asked) == []
    floor = collector({"PYPY_GC_MIN": "100MB"}, _cpuinfo(491520), "x86_64")
    assert floor.nursery_bytes == 240 * MIB and floor.floor_bytes == 100 * MIB


def test_off_x86_the_default_is_assumed_and_said() -> None:
    found = collector({}, _cpuinfo(491520), "aarch64")
    assert found.nursery_bytes == 4 * MIB and "aarch64" in found.source


def test_a_large_nursery_is_one_preflight_line() -> None:
    (finding,) = pypy_collector(collector({}, _cpuinfo(491520), "x86_64"))
    assert (
        finding.check == "pypy-gc" and "240 MiB" in finding.problem and "1.9 GiB" in finding.problem
    )
    assert "PYPY_GC_NURSERY=4MB" in finding.advice and "\n" not in finding.line()


def _pypy_nursery_mb(env: dict[str, str]) -> float:
    """The nursery PyPy itself reports (``gc.get_stats()``), in MB."""
    pypy = [i for i in discover() if i.is_pypy]
    assert pypy, "PyPy must be installed (scripts/setup.sh installs Debian's pypy3)"
    done = subprocess.run(
        [str(pypy[0].path), "-c", "import gc; print(gc.get_stats())"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    found = re.search(r"nursery:\s*([\d.]+)MB", done.stdout)
    assert found is not None, done.stdout
    return float(found.group(1))


@pytest.mark.parametrize("asked", [None, "6MB"])
def test_pypy_sizes_its_nursery_as_computed_here(asked: str | None) -> None:
    """The rule against PyPy on this host: its own report of its nursery, with the host's
    cache and with PYPY_GC_NURSERY set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYPY_GC")}
    if asked is not None:
        env["PYPY_GC_NURSERY"] = asked
    ours = collector(env, Path("/proc/cpuinfo").read_text(), platform.machine())
    assert _pypy_nursery_mb(env) == pytest.approx(ours.nursery_bytes / MIB, abs=0.05)
    assert pypy_gc.FLOOR_NURSERIES * ours.nursery_bytes == ours.floor_bytes


def test_a_study_of_pypy_is_told_of_its_collector_and_only_one() -> None:
    """``run`` and ``ab`` print study_preflight's lines: the collector's is among them when
    the study measures PyPy and its nursery here is large (exactly as this host says)."""
    from pywebbench.run.preflight import study_preflight

    def checks(pypy: bool) -> list[str]:
        return [f.check for f in study_preflight([0], [1], pypy=pypy)]

    assert ("pypy-gc" in checks(True)) is pypy_gc.on_this_host().large
    assert "pypy-gc" not in checks(False)
