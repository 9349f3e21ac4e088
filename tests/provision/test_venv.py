"""Provisioning real uv virtualenvs: cached, versions recorded, failures explained."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from pwbtest import no_process_started
from pywebbench.catalogue import interpreters as I
from pywebbench.catalogue.base import (
    WSGI,
    Framework,
    InstallStep,
    Interpreter,
    ServerAdapter,
    Stack,
)
from pywebbench.provision import venv as V


class _Server(ServerAdapter):
    """A server entry that only installs its requirements (enough to exercise provisioning)."""

    name = "test-server"
    interface = WSGI

    def __init__(self, reqs: list[str], steps: list[InstallStep] = (), sys_pkgs=()) -> None:
        self._reqs = reqs
        self._steps = list(steps)
        self.system_packages = tuple(sys_pkgs)

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return self._reqs

    def extra_installs(self, interpreter: Interpreter) -> list[InstallStep]:
        return self._steps


class _Framework(Framework):
    name = "test-framework"
    interface = WSGI
    app = "x:app"
    workloads = frozenset({"hello"})

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return []


def _stack(interp: Interpreter, reqs: list[str], **kw) -> Stack:
    return Stack(interp, _Server(reqs, **kw), _Framework(), tuple(reqs))


@pytest.fixture(scope="module")
def pypy() -> Interpreter:
    return I.find("pypy")


def test_provision_is_cached_and_records_versions(pypy: Interpreter) -> None:
    stack = _stack(
        pypy,
        ["bottle==0.13.4"],
        steps=[InstallStep(("six==1.16.0",), ("--no-deps",))],
    )
    messages: list[str] = []
    first = V.provision(stack, progress=messages.append)
    assert first.packages["bottle"] == "0.13.4"
    assert first.packages["six"] == "1.16.0"
    assert first.venv.name == stack.env_key()
    out = subprocess.run(
        [
            str(first.python),
            "-c",
            "import bottle, sys; print(bottle.__version__, sys.pypy_version_info)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("0.13.4")
    # A cached call reads its marker and runs nothing (no uv, no interpreter); its
    # ``seconds`` are its own, within the time around it, not the build's.
    called = time.monotonic()
    with no_process_started():
        second = V.provision(stack)
    assert 0 <= second.seconds <= time.monotonic() - called
    assert second.cached
    assert second.venv == first.venv
    assert second.packages == first.packages
    assert V.cached(stack) is not None
    if not first.cached:
        assert any("installing" in m for m in messages)


def test_steps_change_the_key(pypy: Interpreter) -> None:
    a = _stack(pypy, ["bottle==0.13.4"])
    b = _stack(pypy, ["bottle==0.13.4"], steps=[InstallStep(("six",), ("--no-deps",))])
    assert a.env_key() != b.env_key()
    assert "--only-binary" in a.install_flags()  # PyPy: pydantic-core/cryptography wheels only


def test_failing_install_reports_reason_and_leaves_nothing() -> None:
    interp = I.default_interpreters()[0]
    stack = _stack(interp, ["flask==99.0.0"])
    with pytest.raises(V.ProvisionError) as info:
        V.provision(stack)
    err = info.value
    assert "flask==99.0.0" in err.reason
    assert "No solution" in err.reason or "no version" in err.reason
    assert err.log_path is not None and err.log_path.exists()
    assert not V.venv_path(stack).exists()
    assert not list(V.venvs_dir().glob(f".tmp-{stack.env_key()}-*"))


def test_missing_system_package_named() -> None:
    assert shutil.which("dpkg-query"), "Debian's dpkg-query is expected on this machine"
    interp = I.default_interpreters()[0]
    stack = _stack(interp, ["bottle==0.13.4"], sys_pkgs=["libpwb-does-not-exist-dev"])
    with pytest.raises(V.ProvisionError, match="apt-get install -y libpwb-does-not-exist-dev"):
        V.provision(stack)


def test_failure_reason_extraction() -> None:
    out = "Using Python 3.11\nResolved\n  × Failed to build `x==1`\n  ├─▶ boom\n  help: y\n"
    assert V.failure_reason(out).startswith("× Failed to build")
    assert V.failure_reason("a\nb\n") == "a\nb"


_CONCURRENT = r"""
import json, sys
from pywebbench.catalogue.base import WSGI, Framework, Interpreter, ServerAdapter, Stack
from pywebbench.provision.venv import provision

class S(ServerAdapter):
    name = "s"
    interface = WSGI
    def requirements(self, i):
        return ["bottle==0.13.4"]

class F(Framework):
    name = "f"
    interface = WSGI
    app = "x:app"
    workloads = frozenset({"hello"})
    def requirements(self, i):
        return []

interp = Interpreter(**json.loads(sys.argv[1]))
env = provision(Stack(interp, S(), F(), ("bottle==0.13.4",)))
print(json.dumps({"venv": str(env.venv), "cached": env.cached}))
"""


def test_two_processes_build_once(tmp_path) -> None:
    import dataclasses
    import json
    import os
    import sys

    env = {**os.environ, "PWB_CACHE_DIR": str(tmp_path)}
    interp = json.dumps(dataclasses.asdict(I.default_interpreters()[0]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT, interp], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert outs[0]["venv"] == outs[1]["venv"]
    assert sorted(o["cached"] for o in outs) == [False, True]
    assert [p.name for p in (tmp_path / "venvs").iterdir() if not p.name.startswith(".")] == [
        os.path.basename(outs[0]["venv"])
    ]


def test_failure_is_recorded_until_built() -> None:
    interp = I.default_interpreters()[0]
    stack = _stack(interp, ["bottle==0.0.99"])
    with pytest.raises(V.ProvisionError):
        V.provision(stack)
    failure = V.last_failure(stack)
    assert failure is not None and "bottle==0.0.99" in failure["reason"]
    assert failure["log"].endswith(".log")


def test_crashed_build_leftovers_are_removed(tmp_path, monkeypatch) -> None:
    interp = I.default_interpreters()[0]
    monkeypatch.setenv("PWB_CACHE_DIR", str(tmp_path))
    stack = _stack(interp, ["bottle==0.13.4"])
    key = stack.env_key()
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs: its temp dir is a crashed build's
    leftover = V.venvs_dir() / f".tmp-{key}-{dead.pid}"
    (leftover / "bin").mkdir(parents=True)
    half = V.venv_path(stack)
    (half / "bin").mkdir(parents=True)  # a venv dir without its marker is never used
    env = V.provision(stack)
    assert not env.cached and env.packages["bottle"] == "0.13.4"
    assert not leftover.exists()
    assert (half / V.MARKER).exists()


def test_cpython310_stack_installs() -> None:
    """Python 3.10 takes the modern pins, but pg8000 1.31.6 needs scramp 1.5.0 (Python >=
    3.11): the service clients' pins must resolve there too (version studies include 3.10)."""
    from pywebbench.catalogue.stacks import plan

    py310 = I.find("3.10")
    (candidate,) = plan([py310], ["gunicorn-gthread"], ["raw-wsgi"])
    assert candidate.stack is not None
    env = V.provision(candidate.stack)
    assert "pg8000" in env.packages and "gunicorn" in env.packages


def test_an_install_uv_has_in_its_cache_runs_offline(pypy: Interpreter) -> None:
    """A second venv with the same packages is installed from uv's cache (``--offline``),
    without asking the index: the reuse that an index without cache headers defeats."""
    plain = _stack(pypy, ["bottle==0.13.4"])
    V.remove(plain)  # built now: offline, else online, so uv's cache has bottle either way
    first = V.provision(plain)
    assert first.packages["bottle"] == "0.13.4"
    stack = _stack(pypy, ["bottle==0.13.4"], steps=[InstallStep(("bottle==0.13.4",), ())])
    V.remove(stack)
    env = V.provision(stack)
    assert not env.cached and env.packages["bottle"] == "0.13.4"
    assert env.log_path is not None
    installs = [ln for ln in env.log_path.read_text().splitlines() if " pip install " in ln]
    assert len(installs) == 2 and all(ln.endswith("--offline") for ln in installs), installs
    assert "installing online" not in env.log_path.read_text()


def test_offline_first_falls_back_online_and_pwb_offline_forbids_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What uv's cache lacks is installed online; with ``PWB_OFFLINE=1`` it is an error."""
    calls: list[list[str]] = []

    def run(argv: list[str], *_: object) -> str:
        calls.append(argv)
        if "--offline" in argv:
            raise V._CommandFailed("not in the cache")
        return ""

    monkeypatch.setattr(V, "_run", run)
    with open(tmp_path / "provision.log", "w") as log:
        V._install(["uv", "pip", "install", "x"], log, None, "installing x", 10)
        assert calls == [["uv", "pip", "install", "x", "--offline"], ["uv", "pip", "install", "x"]]
        calls.clear()
        monkeypatch.setenv("PWB_OFFLINE", "1")
        with pytest.raises(V._CommandFailed, match="not in the cache"):
            V._install(["uv", "pip", "install", "x"], log, None, "installing x", 10)
    assert calls == [["uv", "pip", "install", "x", "--offline"]]
