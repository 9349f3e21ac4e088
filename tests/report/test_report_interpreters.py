"""What the report says of each stack's interpreter: its kind and the GIL as its servers ran."""

from __future__ import annotations

from pywebbench.catalogue.base import interpreter_kind
from pywebbench.report.build import gil_runtime


def test_gil_as_run_over_replicates() -> None:
    assert gil_runtime([False, False, False]) == "off"
    assert gil_runtime([True, None, True]) == "on"
    assert gil_runtime([False, True, False]) == "on in 1 of 3 replicates"
    assert gil_runtime([None, None]) == ""  # nothing reported (a user's app)


def test_interpreter_kind_words() -> None:
    assert interpreter_kind("cpython", False) == "GIL"
    assert interpreter_kind("cpython", True, "1") == "free-threaded, PYTHON_GIL=1"
    assert interpreter_kind("cpython", False, jit=True, optimizations="PGO+LTO") == (
        "GIL, JIT, PGO+LTO"
    )
    assert interpreter_kind("pypy", False) == "PyPy JIT"
