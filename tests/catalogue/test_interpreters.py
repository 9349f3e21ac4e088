"""Interpreter discovery on this machine: the running CPython, Debian's pypy3, pyenv versions."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from pwbtest import no_process_started
from pywebbench.catalogue import interpreters as I
from pywebbench.study.config import resolve


def test_discover_finds_running_cpython() -> None:
    found = I.discover()
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    running = [i for i in found if i.path == base]
    assert running, f"running interpreter {base} not in {[i.path for i in found]}"
    me = running[0]
    assert me.implementation == "cpython"
    assert me.version == ".".join(str(x) for x in sys.version_info[:3])
    assert me.name == f"cpython{sys.version_info[0]}.{sys.version_info[1]}"
    assert "GCC" in me.build or "clang" in me.build.lower()


def test_discover_finds_pypy() -> None:
    assert shutil.which("pypy3"), "pypy3 must be installed (scripts/setup.sh)"
    pypy = [i for i in I.discover() if i.is_pypy]
    assert pypy, "Debian pypy3 not discovered"
    p = pypy[0]
    assert p.version.startswith("3.")
    assert p.build.startswith("PyPy 7."), p.build
    assert p.name == f"pypy{p.minor}"
    assert I.find("pypy") == p
    assert I.find(shutil.which("pypy3") or "") == p


def test_default_interpreters_running_plus_pypy() -> None:
    d = I.default_interpreters()
    assert d[0].implementation == "cpython"
    assert d[0].path == os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    assert any(i.is_pypy for i in d)


def test_names_unique_and_old_versions_skipped_with_reason() -> None:
    everything = I.discover_all()
    names = [f.interpreter.name for f in everything]
    assert len(names) == len(set(names))
    for f in everything:
        old = tuple(int(x) for x in f.interpreter.version.split(".")[:2]) < I.MIN_VERSION
        assert (f.skipped is not None) == old, f
    offered = I.discover()
    assert all(tuple(int(x) for x in i.version.split(".")[:2]) >= (3, 9) for i in offered)


def test_user_path_and_errors(tmp_path) -> None:
    pypy = shutil.which("pypy3")
    assert pypy
    assert I.find(pypy).is_pypy
    with pytest.raises(I.InterpreterError, match="no such file"):
        I.find(str(tmp_path / "python9"))
    notpy = tmp_path / "notpython"
    notpy.write_text("#!/bin/sh\nexit 3\n")
    notpy.chmod(0o755)
    with pytest.raises(I.InterpreterError, match="not a working Python"):
        I.find(str(notpy))
    with pytest.raises(I.InterpreterError, match="choose from .*cpython"):
        I.find("jython2.1")


def test_probe_is_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PWB_CACHE_DIR", str(tmp_path))
    I.discover()
    cache = json.loads((tmp_path / "interpreters.json").read_text())
    assert any("pypy" in p for p in cache)
    with no_process_started():  # nothing is run: answered from the cache
        again = I.discover()
    assert again == I.discover()


def test_the_versions_profile_selects_one_interpreter_per_version() -> None:
    cfg = resolve(profile="versions")
    assert cfg.matrix.interpreters == ["all"]
    chosen = I.select(cfg.matrix.interpreters)
    assert chosen == I.one_per_version(I.discover())
    keys = [(i.implementation, i.minor, i.free_threaded) for i in chosen]
    assert len(keys) == len(set(keys)) and len(chosen) >= 2


def test_a_value_names_versions_each_taken_once() -> None:
    """Every command resolves ``--python`` the same way: a version, an implementation or a
    glob gives one interpreter per implementation, version and build; a repeat adds nothing."""
    pool = I.discover()
    running = I.default_interpreters()[0]
    assert I.select([running.name, running.name]) == [running]
    assert I.select([f"{running.name},{running.name}"]) == [running]
    assert I.select([]) == I.default_interpreters()
    for value in (running.minor, "cpython", "cpython3.1*", "pypy"):
        chosen = I.select([value])
        assert chosen == I.one_per_version(I.match(value, pool)), value
        keys = [(i.implementation, i.minor, i.free_threaded) for i in chosen]
        assert chosen and len(keys) == len(set(keys)), value
    path = shutil.which("pypy3") or ""
    assert I.select([path]) == [I.find(path)]


def test_a_value_that_matches_nothing_names_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(I.InterpreterError) as bad:
        I.select(["no-such-python"], "--a-python")
    assert str(bad.value).startswith("--a-python no-such-python: unknown interpreter; choose from ")
    monkeypatch.setattr(I, "discover_all", lambda extra=(): [])
    with pytest.raises(I.InterpreterError, match=r"^--python: no Python interpreter found$"):
        I.select([])
