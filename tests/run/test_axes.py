"""The study axes on real servers: syscalls per request (``--syscalls``), keep-alive against a
connection per request (``--connection-mode``) and worker recycling (``--worker-max-requests``).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
from pwbtest import PYWEBBENCH, pwb, wait_until
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import Store, Study

CPYTHON = default_interpreters()[0].name
FAST = ["-d", "1", "--warmup", "fixed", "--warmup-duration", "0.5", "--python", CPYTHON]
ONE_REPLICATE = ["--replicates", "1", "--max-replicates", "1"]
STAT_CALLS = {"stat", "stat64", "lstat", "newfstatat", "fstatat64", "statx"}

APP = """
import os

HERE = os.path.abspath(__file__)


def app(environ, start_response):
    if environ["PATH_INFO"] == "/stat":
        os.stat(HERE)  # one extra stat per request
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
"""


def _study(results: Path) -> Study:
    with Store(results / "pywebbench.sqlite", create=False) as store:
        return store.load_study()


def _run(results: Path, *args: str) -> Study:
    proc = pwb("run", *FAST, *ONE_REPLICATE, "--no-report", *args, results=results, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = _study(results)
    assert study.cells and all(c.status == "ok" for c in study.cells), [
        (c.key, c.failure_reason) for c in study.cells
    ]
    return study


def test_an_extra_stat_per_request_shows_as_one_more_stat_call(tmp_path: Path, census: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "statapp.py").write_text(APP)
    study = _run(
        tmp_path / "res",
        *("--app", "statapp:app", "--interface", "wsgi", "--project", str(project)),
        *("--path", "/", "--path", "/stat", "--server", "gunicorn-sync", "-c", "2"),
        *("--syscalls", "--syscalls-duration", "1"),
    )
    per_path = {}
    for cell in study.cells:
        (rep,) = [r for r in study.replicates if r.cell_id == cell.id]
        doc = rep.syscalls
        # A real window, traced to the end. Its count is a throughput: 255-269 requests in the
        # 1-s window here (gunicorn-sync under strace, 2 connections, measured with another
        # test file running on the same two cores); at 2.9x slower (1.45x core speed / 50%
        # steal, docs/contributing.md) that is ~88, over 4x the bound (issue 52).
        assert doc.get("requests", 0) > 20, doc
        assert doc["processes"] >= 2  # the master and its worker, both attached
        assert doc["per_request"] > 5 and doc["top_by_time"], doc
        per_path[cell.workload] = sum(
            s["per_request"] for s in doc["syscalls"] if s["name"] in STAT_CALLS
        )
    extra = per_path["path:/stat"] - per_path["path:/"]
    assert 0.8 <= extra <= 1.3, per_path


# What strace prints when the kernel refuses ptrace (Yama scope, no CAP_SYS_PTRACE).
_REFUSED = 'echo "strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted" >&2\nexit 1\n'


def _fake_strace(tmp_path: Path, script: str) -> dict[str, str]:
    """An environment whose PATH finds a fake ``strace`` first."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "strace"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}


def test_syscalls_refused_before_the_study_when_strace_is_missing_or_not_permitted(
    tmp_path: Path,
) -> None:
    args = [PYWEBBENCH, "run", "--server", "gunicorn-sync", "--framework", "raw-wsgi"]
    args += ["--workload", "hello", "--syscalls", "--results-dir", str(tmp_path / "res")]
    # ptrace refused (kernel.yama.ptrace_scope, a container without CAP_SYS_PTRACE)
    env = {**os.environ, **_fake_strace(tmp_path, _REFUSED)}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not permitted" in proc.stderr and "ptrace_scope" in proc.stderr
    assert "Traceback" not in proc.stderr
    # no strace on PATH at all: a directory with only the Python the CLI needs
    env = {**os.environ, "PATH": str(Path(PYWEBBENCH).parent)}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "needs strace" in proc.stderr, proc.stderr
    assert not (tmp_path / "res" / "pywebbench.sqlite").exists()  # nothing written


def test_connection_modes_are_their_own_cells_and_close_costs_per_request(
    tmp_path: Path, census: str
) -> None:
    study = _run(
        tmp_path / "res",
        *("--server", "granian-wsgi", "--framework", "raw-wsgi", "--workload", "hello"),
        *("-c", "4", "-d", "2", "--connection-mode", "keepalive,close,20"),
    )
    by_mode = {c.connection_mode: c for c in study.cells}
    assert set(by_mode) == {"keepalive", "close", "20"}
    assert by_mode["keepalive"].load_point == "c4"  # unlabelled default: keys unchanged
    assert by_mode["close"].load_point == "c4 close"
    assert by_mode["20"].load_point == "c4 20/conn"
    cpu_per_request = {}
    for mode, cell in by_mode.items():
        (it,) = study.iterations_of(cell.id)
        conns = it.result["connections"]
        assert it.requests_per_cpu_s, it
        cpu_per_request[mode] = 1 / it.requests_per_cpu_s
        if mode == "close":  # a connection per request
            assert conns["requests_per_connection"]["max"] <= 1, conns
            assert conns["established"] >= it.requests, conns
        elif mode == "20":  # httperf's --num-calls: a new connection every 20 requests
            assert it.result["spec"]["requests_per_connection"] == 20
            per = conns["requests_per_connection"]
            assert (per["max"], per["p50"]) == (20, 20), conns
        else:
            assert conns["requests_per_connection"]["p50"] > 10, conns
    # What a connection per request costs the server (accept, close, a new connection's
    # state) is a measurement, read in three iterations of different processes seconds apart
    # on a core whose speed moves by up to 1.45x: not asserted here (issue 52). That each
    # mode made the connections it names is, above, from the engine's counts.
    assert all(c > 0 for c in cpu_per_request.values()), cpu_per_request


def test_worker_recycling_replaces_workers_during_the_run(tmp_path: Path, census: str) -> None:
    study = _run(
        tmp_path / "res",
        *("--server", "gunicorn-sync", "--framework", "raw-wsgi", "--workload", "hello"),
        *("-c", "4", "--worker-max-requests", "0,100"),
    )
    stacks = {s.id: s for s in study.stacks}
    seen = {}
    for cell in study.cells:
        stack = stacks[cell.stack_id]
        assert stack.settings.get("max_requests") == (stack.worker_max_requests or None)
        (it,) = study.iterations_of(cell.id)
        assert it.processes_seen is not None and it.processes_peak is not None
        seen[stack.worker_max_requests] = (it.requests, it.processes_seen - it.processes_peak)
    assert set(seen) == {0, 100}
    assert seen[0][1] == 0, seen  # never recycled: the same master and worker throughout
    requests, replaced = seen[100]
    # The worker counts the warm-up's requests too; a new one appeared in the measured window.
    assert requests > 0 and replaced >= 1, seen
    log = json.dumps([s.settings for s in stacks.values()])
    assert '"max_requests": 100' in log


def test_a_worker_gone_before_the_attach_does_not_stop_the_trace() -> None:
    """A recycled worker may exit between listing the tree and attaching (a zombie refuses
    ptrace with EPERM, like a forbidden attach): the rest is traced, no error.

    The parent calls getppid once a loop of a 1-ms sleep: 286-289 calls were counted in the
    0.3 s strace runs attached (``tracing`` returns once attached; 5 Dec 2026, this project's
    2-core VM). At most 2.9x slower (docs/contributing.md, "Timing bounds in the suite") that
    is 98, past the floor of 10 with room; fewer than 11 needs the parent held for 0.29 s of
    the 0.3 in one block, where the host steals in slices of milliseconds (issue 52)."""
    from pywebbench.run.syscalls import tracing

    # A parent that leaves one child a zombie and keeps making syscalls itself.
    code = (
        "import os,time\nif os.fork()==0: os._exit(0)\nwhile True: os.getppid(); time.sleep(0.001)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_until(
            lambda: (
                [c.status() for c in psutil.Process(parent.pid).children()]
                == [psutil.STATUS_ZOMBIE]
            ),
            "the parent's child exited, not yet reaped",
        )
        (zombie,) = psutil.Process(parent.pid).children()
        with tracing([parent.pid, zombie.pid]) as tracer:
            time.sleep(0.3)
        assert tracer.error is None, tracer.error
        assert any(c.name == "getppid" and c.calls > 10 for c in tracer.counts), tracer.counts
    finally:
        parent.kill()
        parent.wait()
