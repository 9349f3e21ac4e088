"""The tests' ``pywebbench`` forked from the zygote (pwbzygote.py) behaves as the console
script run by :func:`subprocess.run`: the same output, exit status, environment, directory and
``sys.path``, and a timeout that kills it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from pwbtest import _ZYGOTE, PYWEBBENCH, command
from pywebbench.store import Store


def _both(args: list[str], **kw: object) -> tuple[subprocess.CompletedProcess[str], ...]:
    real = subprocess.run(
        [PYWEBBENCH, *args],
        capture_output=True,
        text=True,
        timeout=60,
        **kw,  # type: ignore[call-overload]
    )
    return real, command(args, timeout=60, **kw)  # type: ignore[arg-type]


def test_output_and_exit_status_are_the_console_scripts() -> None:
    for args in (["--version"], ["run", "--replicates", "zero"], ["no-such-command"]):
        real, forked = _both(args)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            real.returncode,
            real.stdout,
            real.stderr,
        ), args
    assert forked.returncode == 2


def test_environment_directory_and_path_are_the_callers(tmp_path: Path) -> None:
    """A plugin module found through the caller's PYTHONPATH and named in its environment
    (imported, then refused: it defines nothing), and a results directory given relative to
    the caller's working directory."""
    (tmp_path / "pwbzygote_plugin.py").write_text("NOTHING = 1\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYWEBBENCH_PLUGINS": "pwbzygote_plugin"}
    real, forked = _both(["stacks"], env=env, cwd=tmp_path)
    assert (
        (forked.returncode, forked.stderr)
        == (real.returncode, real.stderr)
        == (
            2,
            "Error: PYWEBBENCH_PLUGINS: module 'pwbzygote_plugin' defines neither ADAPTER nor "
            "FRAMEWORK\n",
        )
    )
    with Store(tmp_path / "here" / "pywebbench.sqlite"):
        pass  # an empty store, found only from tmp_path
    forked = command(["runs", "--results-dir", "here"], cwd=tmp_path)
    real = subprocess.run(
        [PYWEBBENCH, "runs", "--results-dir", "here"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    assert forked.returncode == 0 and forked.stdout.lower() == "no runs in here/pywebbench.sqlite\n"


def test_a_timeout_kills_the_command() -> None:
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        command(["preflight", "--sample", "30"], timeout=1.5)
    # Killed at its 1.5-s timeout (a timer: it only fires late) and reaped: 1.51 s on this
    # project's 2-core VM (5 Dec 2026), the kill and reap ~0.01 s of it. 10 s is exceeded only
    # by 8.5 s of holds in that window, where the host takes at most half the cores in
    # slices of milliseconds (docs/contributing.md): far rarer than 1 in 10,000, and 20 s
    # short of the 30-s sample a timeout that did nothing would wait out (issue 52).
    assert time.monotonic() - started < 10
    zygote = _ZYGOTE._proc
    assert zygote is not None
    assert not psutil.Process(zygote.pid).children()  # killed and reaped
    assert command(["--version"]).returncode == 0  # and the zygote serves on
