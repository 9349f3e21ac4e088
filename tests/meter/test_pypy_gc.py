"""PyPy's collector as the installed PyPy reports it (meter/pypy_gc.py): asked on this host,
and on recorded hosts (tests/data/hosts/*.json) by running the same PyPy with that host's
/proc/cpuinfo mounted over this one's, in a mount namespace of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pywebbench.catalogue.interpreters import discover
from pywebbench.meter import pypy_gc
from pywebbench.meter.pypy_gc import MIB, Collector, ProbeError, from_report, parse_size
from pywebbench.run.preflight import pypy_collector, pypy_collectors

HOSTS = sorted((Path(__file__).parents[1] / "data" / "hosts").glob("*.json"))


def _pypy() -> str:
    pypy = [i for i in discover() if i.is_pypy]
    assert pypy, "PyPy must be installed (scripts/setup.sh installs Debian's pypy3)"
    return pypy[0].path


def _pypy_version(path: str) -> str:
    return subprocess.run(
        [path, "-c", "import sys; print('.'.join(map(str, sys.pypy_version_info[:3])))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYPY_GC")}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("PWB_CACHE_DIR", str(tmp_path))
    yield tmp_path / "pypy-gc.json"


@pytest.mark.parametrize(
    ("text", "size"),
    [("4MB", 4 * MIB), ("512kb", 512 * 1024), ("1GB", 1024 * MIB), ("123", 123)],
)
def test_sizes_read_as_pypy_reads_them(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "0", "-4MB", "4TB"])
def test_what_pypy_ignores_is_no_size(text: str) -> None:
    assert parse_size(text) is None


def test_reported_caches_are_a_host_fact_in_bytes() -> None:
    text = "processor\t: 0\ncache size\t: 1024 KB\n\nprocessor\t: 1\ncache size\t: 512 KB\n"
    assert pypy_gc.reported_caches(text) == [512 * 1024, 1024 * 1024]
    assert pypy_gc.reported_caches("") == []


def test_a_report_says_where_its_nursery_came_from() -> None:
    said = from_report({"nursery_bytes": 4 * MIB, "floor_bytes": 40 * MIB, "version": "7.3.11"}, {})
    assert said == Collector(4 * MIB, 40 * MIB, "PyPy 7.3.11 reported it")
    asked = from_report({"nursery_bytes": 256 * MIB, "floor_bytes": 3 << 30}, {ASKED: "256MB"})
    assert asked.source == ASKED and not asked.large and pypy_collector(asked) == []
    never = from_report({"nursery_bytes": MIB, "floor_bytes": None, "version": "7.3.11"}, {})
    assert never.floor_bytes == pypy_gc.PROBE_CAP_BYTES and "no major collection" in never.source
    with pytest.raises(ProbeError, match="no nursery"):
        from_report({"floor_bytes": 1}, {})


ASKED = pypy_gc.ASKED


def test_a_large_nursery_is_one_preflight_line() -> None:
    (finding,) = pypy_collector(Collector(240 * MIB, 1920 * MIB, "PyPy 7.3.11 reported it"))
    assert finding.check == "pypy-gc" and "240 MiB" in finding.problem
    assert "1.9 GiB" in finding.problem and "\n" not in finding.line()
    assert pypy_collector(Collector(MIB, 8 * MIB, "PyPy 7.3.11 reported it")) == []


def test_an_interpreter_that_cannot_be_asked_is_one_finding(tmp_path: Path, cache: Path) -> None:
    fake = tmp_path / "pypy"
    fake.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    fake.chmod(0o755)
    (finding,) = pypy_collectors([str(fake)])
    assert finding.check == "pypy-gc" and "exited 3: broken" in finding.problem
    assert not cache.exists()  # nothing cached from a failed probe


def test_the_answer_is_cached_by_binary_setting_and_caches(tmp_path: Path) -> None:
    binary = tmp_path / "pypy"
    binary.write_text("x")
    key = pypy_gc.cache_key
    base = key(str(binary), {}, "cache size\t: 1024 KB\n")
    assert base == key(str(binary), {"HOME": "/x"}, "cache size\t: 1024 KB\nother: 1\n")
    assert base != key(str(binary), {ASKED: "4MB"}, "cache size\t: 1024 KB\n")
    assert base != key(str(binary), {}, "cache size\t: 491520 KB\n")
    binary.write_text("xy")  # another build of the interpreter
    assert base != key(str(binary), {}, "cache size\t: 1024 KB\n")


def test_this_hosts_pypy_is_asked_once_and_its_answer_kept(cache: Path) -> None:
    """The probe's nursery is the one PyPy reports in a process of its own; the second call
    answers from the cache; the setting is passed on, and is the source then."""
    pypy = _pypy()
    first = pypy_gc.probe(pypy, _clean_env())
    own = subprocess.run(
        [pypy, "-c", "import gc; print(gc.get_stats()._s.nursery_size)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=_clean_env(),
    )
    assert first.nursery_bytes == int(own.stdout)
    assert first.floor_bytes > first.nursery_bytes and first.source.startswith("PyPy 7.")
    assert json.loads(cache.read_text())  # kept
    cached = json.loads(cache.read_text())
    (key,) = cached
    cached[key]["source"] = "from the cache"
    cache.write_text(json.dumps(cached))
    assert pypy_gc.probe(pypy, _clean_env()).source == "from the cache"
    asked = pypy_gc.probe(pypy, {**_clean_env(), ASKED: "6MB"})
    assert asked.nursery_bytes == 6 * MIB and asked.source == ASKED
    assert 6 * MIB < asked.floor_bytes < 1024 * MIB


def _as_on(host: dict[str, object], tmp: Path) -> list[str]:
    """A command prefix that runs a program with ``host``'s /proc/cpuinfo in place of this
    one's, in a mount namespace of its own (root, as the suite runs here and in CI)."""
    cpuinfo = tmp / f"{host['name']}.cpuinfo"
    cpuinfo.write_text(str(host["cpuinfo"]))
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux's unshare is needed to replay a recorded host"
    script = 'mount --bind "$0" /proc/cpuinfo && exec "$@"'
    return [unshare, "--mount", "--propagation", "private", "sh", "-c", script, str(cpuinfo)]


@pytest.mark.parametrize("host_file", HOSTS, ids=[h.stem for h in HOSTS])
def test_pypy_on_a_recorded_host_reports_what_it_reported_there(
    host_file: Path, tmp_path: Path
) -> None:
    """The installed PyPy, shown a recorded host's /proc/cpuinfo, reports the nursery that
    PyPy reported on that host, and the pre-flight and leak floors follow from its answer."""
    host = json.loads(host_file.read_text())
    pypy = _pypy()
    version = _pypy_version(pypy)
    recorded = host["pypy"].get(version)
    assert recorded is not None, (
        f"{host_file.name} records no answer of PyPy {version}: record what that PyPy "
        "reports there (gc.get_stats()) with the host's facts"
    )
    assert sys.platform == "linux"
    found = pypy_gc.ask(pypy, _clean_env(), wrap=_as_on(host, tmp_path))
    assert found.nursery_bytes == recorded["nursery_bytes"], found
    assert found.floor_bytes / MIB == pytest.approx(recorded["floor_mib_about"], rel=0.15)
    assert bool(pypy_collector(found)) is (found.nursery_bytes >= pypy_gc.LARGE_NURSERY)


def test_the_recorded_hosts_span_two_cpu_kinds() -> None:
    kinds = {json.loads(h.read_text())["cpuinfo"].split("vendor_id")[1].split()[1] for h in HOSTS}
    assert {"GenuineIntel", "AuthenticAMD"} <= kinds, kinds
