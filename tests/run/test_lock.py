"""A run being written holds a lock: a second writer is refused, names the holder, harms
nothing (issue: two `--resume` of one run crashed both with an IntegrityError)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from pwbtest import PYWEBBENCH
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import RunLocked, Store, run_lock


def test_second_holder_is_refused_with_the_pid(tmp_path: Path) -> None:
    store = tmp_path / "pywebbench.sqlite"
    with run_lock(store, "r1"):
        with pytest.raises(RunLocked) as refused:
            with run_lock(store, "r1"):
                pass
        assert refused.value.pid == os.getpid()
        assert "run r1" in str(refused.value) and str(os.getpid()) in str(refused.value)
        with run_lock(store, "r2"):  # another run is another lock
            pass
    with run_lock(store, "r1"):  # released
        pass


def _running_run(store: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        try:
            db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
            try:
                row = db.execute(
                    "SELECT r.id FROM runs r JOIN cells c ON c.run_id = r.id "
                    "WHERE r.status = 'running' AND c.status = 'running'"
                ).fetchone()
            finally:
                db.close()
            if row:
                return str(row[0])
        except sqlite3.Error:
            pass  # not created yet
        time.sleep(0.2)
    raise AssertionError("the first run never started measuring")


def test_resume_of_a_run_in_progress_is_refused(tmp_path: Path, census: str) -> None:
    results = tmp_path / "res"
    store = results / "pywebbench.sqlite"
    argv = [PYWEBBENCH, "run", "--results-dir", str(results)]
    study = [
        "--python",
        default_interpreters()[0].name,
        "--server",
        "gunicorn-sync",
        "--framework",
        "raw-wsgi",
        "--workload",
        "hello",
        "-c",
        "8",
        "-d",
        "600",
        "--iterations",
        "2",
        "--warmup",
        "fixed",
        "--max-replicates",
        "1",
        "--warmup-duration",
        "0.5",
        "--replicates",
        "1",
        "--no-report",
    ]
    # The first run measures for far longer than the test (2 iterations of 600 s): it is
    # still running, holding its lock, whenever the `--resume` starts, however slow the host
    # (issue 52: with -d 2 the first run could finish before the second process got going).
    # Once the second is refused, the first is stopped with Ctrl-C.
    first = subprocess.Popen(
        [*argv, *study], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        run_id = _running_run(store, time.monotonic() + 180)
        second = subprocess.run(
            [*argv, "--resume", run_id], capture_output=True, text=True, timeout=60
        )
        assert first.poll() is None, "the first run ended before the second was refused"
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 2, second.stdout + second.stderr
    assert "Traceback" not in second.stderr + second.stdout
    refusal = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(refusal) == 1 and run_id in refusal[0] and str(first.pid) in refusal[0], refusal
    assert first.returncode == 130, out + err
    assert "Traceback" not in out + err
    with Store(store, create=False) as db:
        (run,) = db.runs()
        assert run.id == run_id and run.status == "interrupted"
        (cell,) = db.cells(run.id)
        assert cell.id is not None
        # The refused second wrote nothing: at most the first run's one replicate.
        assert [r.replicate for r in db.replicates(cell.id)] in ([], [0])
    with run_lock(store, run_id):  # the interrupted run let its lock go
        pass
