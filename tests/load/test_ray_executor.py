"""``pywebbench run --executor ray`` (docs/scale-out.md) on the shared two-node local Ray
cluster (conftest.py): the same cells as the local executor, the node of every replicate,
iterations in the store while the run goes on, a lost worker recorded as a failure with its
node while the rest carries on, Ctrl-C then ``--resume``, and bad input refused.

Both nodes of the test cluster are on this host, so their tasks measure one at a time (the
host lock): the figures are comparable with a local run's.
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from pwbtest import PYWEBBENCH, pwb
from pywebbench.analysis.stats import Summary, summarize_replicates
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import Store, Study

CPYTHON = default_interpreters()[0].name
# The interference guard off (it is still stored): the test cluster's two nodes share this
# host's two cores, and Ray's daemons, the driver and the task's own Ray threads took 4-16% of
# a core over the Ray run's iterations here, so it measured nearly every iteration three times
# (30 s against 12 s); the guard has its own tests (tests/run/test_interference_guard.py).
TINY = [
    "run", "--framework", "raw-wsgi", "--workload", "hello", "-c", "16", "--python", CPYTHON,
    "--warmup", "fixed", "--warmup-duration", "0.5", "--interference-max", "2",
]  # fmt: skip
TWO = ["--server", "gunicorn-sync,granian-wsgi"]


def _figures(study: Study) -> dict[str, tuple[Summary, Summary]]:
    """Each cell's req/s and requests per server CPU-second over its ok replicates (each the
    median of its measured iterations, as the report's CIs), by cell key."""
    out = {}
    for cell in study.cells:
        assert cell.id is not None
        ok = {r.replicate for r in study.replicates_of(cell.id) if r.status == "ok"}
        its = [i for i in study.iterations_of(cell.id) if i.replicate in ok and not i.interrupted]
        rps: dict[int, list[float]] = {}
        per_cpu: dict[int, list[float]] = {}
        for i in its:
            rps.setdefault(i.replicate, []).append(i.rps)
            per_cpu.setdefault(i.replicate, []).append(i.requests_per_cpu_s or 0.0)
        out[cell.key] = (
            summarize_replicates(list(rps.values())),
            summarize_replicates(list(per_cpu.values())),
        )
    return out


def _study(db: Path) -> Study:
    with Store(db, create=False) as store:
        return store.load_study()


def test_ray_executor_measures_the_planned_cells_on_both_nodes(
    ray_cluster: str, tmp_path: Path
) -> None:
    """The cells the study plans, each with its replicates' figures; the groups measured one
    at a time on this host, on the nodes the rounds chose.

    Whether each cell's figure lies within a local run's CI is a timing question between
    two runs minutes apart on a host that steals (between back-to-back runs a cell's req/s
    moved by up to 2.7x here): benchmarks/executor_vs_local.py asks it over alternating
    rounds (issue 52). What must hold on any host is checked exactly: the cells, their
    replicate counts, the nodes, and that the Ray run's groups never overlapped on the
    host's cores (the host lock), from the stored measurement windows.
    """
    reps = [*TWO, "-d", "1", "--iterations", "1", "--replicates", "2", "--max-replicates", "2"]
    remote = pwb(*TINY, *reps, "--executor", "ray", "--ray", ray_cluster, results=tmp_path / "ray")
    assert remote.returncode == 0, remote.stdout + remote.stderr
    study = _study(tmp_path / "ray" / "pywebbench.sqlite")
    there = _figures(study)
    servers = TWO[1].split(",")
    assert set(there) == {f"{CPYTHON}/{server}/raw-wsgi|hello|c16" for server in servers}
    for rps, per_cpu in there.values():
        assert rps.n == per_cpu.n == 2, (rps, per_cpu)
        assert min(rps.median, per_cpu.median) > 0
    windows = sorted(
        (_at(i.started_at), _at(i.started_at) + i.duration_s, i.cell_id) for i in study.iterations
    )
    for (_, end, cell), (start, _, other) in itertools.pairwise(windows):
        assert cell == other or start >= end - 0.05, "two groups measured at once on one host"
    assert study.runs[0].config["load"]["executor"] == "ray"
    every = study.replicates
    assert len(every) == 4 and all(r.status == "ok" for r in every)
    assert all(r.node and r.node_id and r.node_cpu_model and r.node_cpus for r in every)
    assert len({r.node_id for r in every}) == 2  # round 0 spread the two cells
    for cell in study.cells:  # later rounds send a cell back to its node
        assert cell.id is not None
        assert len({r.node_id for r in study.replicates_of(cell.id)}) == 1
    summary = next((tmp_path / "ray" / "reports").rglob("*.md")).read_text()
    assert "## Nodes" in summary and str(every[0].node) in summary
    assert "different node types" not in summary  # one host: one node type


def test_ray_executor_measures_an_interleaved_group_on_one_node(
    ray_cluster: str, tmp_path: Path
) -> None:
    """With the interleaved design a group (here two stacks x two server processes) is one
    Ray task: its processes are all up together on one node, loaded in slices of the same
    rounds there, and the driver stores each cell's group figures and every slice, with the
    node of every replicate."""
    args = [
        "run", *TWO, "--framework", "raw-wsgi", "--workload", "hello", "-c", "16",
        "--python", CPYTHON, "--design", "interleaved", "--replicates", "2",
        "--group-budget", "8", "--slice", "0.1", "--interference-max", "2", "--no-report",
        "--executor", "ray", "--ray", ray_cluster,
        # the group may stop once its processes are warm with 8 measured rounds (as in
        # tests/run/test_e2e.py's interleaved study), not only at its 20 rounds at least
        "--ci-target", "0.5",
    ]  # fmt: skip
    done = pwb(*args, results=tmp_path / "ray")
    assert done.returncode == 0, done.stdout + done.stderr
    study = _study(tmp_path / "ray" / "pywebbench.sqlite")
    assert len(study.cells) == 2 and all(c.status == "ok" for c in study.cells)
    keys = {s.id: s.key for s in study.stacks}
    for cell in study.cells:
        assert cell.id is not None
        group = cell.flags["group"]
        assert group["stacks"] == 2 and group["processes"] == 2
        other = next(keys[c.stack_id] for c in study.cells if c.id != cell.id)
        assert set(group["vs"]) == {other}
        slices = [i for i in study.iterations_of(cell.id, kind=None) if i.result_json]
        assert slices and all('"ab_slice"' in (i.result_json or "") for i in slices)
    every = study.replicates
    assert len(every) == 4 and all(r.status == "ok" and r.node_id for r in every)
    assert len({r.node_id for r in every}) == 1  # one group, one task, one node
    assert len({r.pid for r in every}) == 4  # four processes up together


def _at(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def _row(db: Path, sql: str) -> Any:
    """The first row of ``sql`` on the store being written (None while there is none)."""
    if not db.exists():
        return None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        try:
            return conn.execute(sql).fetchone()
        except sqlite3.OperationalError:  # the schema is not there yet
            return None


def _wait_for(proc: subprocess.Popen[str], found: Callable[[], Any], limit_s: float) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = found()
        if value is not None:
            return value
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.1)
    raise AssertionError("timed out")


#: A replicate being measured whose warm-up is already in the store.
WARMED_UP = (
    "SELECT r.cell_id, r.pid, r.node FROM replicates r WHERE r.status = 'running' "
    "AND r.pid IS NOT NULL AND EXISTS (SELECT 1 FROM iterations i WHERE i.cell_id = r.cell_id "
    "AND i.replicate = r.replicate AND i.kind = 'warmup')"
)


def _gone(pid: int, within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def _run_and_hit(
    results: Path, args: list[str], hit: Callable[[subprocess.Popen[str], int], None]
) -> tuple[int, str, tuple[int, int, str], float]:
    """Run ``pywebbench run ARGS`` until a replicate's warm-up is stored while it is still
    measured (the store is written as the run goes), call ``hit(proc, server_pid)``, and
    wait for the run to end: its exit code and output, that replicate's (cell id, server
    pid, node), and the seconds from the hit to the end."""
    db = results / "pywebbench.sqlite"
    proc = subprocess.Popen(
        [PYWEBBENCH, *TINY, *args, "--no-report", "--results-dir", str(results)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        found = _wait_for(proc, lambda: _row(db, WARMED_UP), 180)
        hit(proc, found[1])
        sent = time.monotonic()
        out, _ = proc.communicate(timeout=180)
        return proc.returncode, out, found, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _kill_its_worker(proc: subprocess.Popen[str], server_pid: int) -> None:
    worker = psutil.Process(server_pid).parent()  # the Ray worker running the task
    assert worker is not None
    os.kill(worker.pid, signal.SIGKILL)


def test_a_lost_worker_fails_its_replicate_and_the_rest_carries_on(
    ray_cluster: str, tmp_path: Path
) -> None:
    results = tmp_path / "res"
    db = results / "pywebbench.sqlite"
    one = [*TWO, "-d", "3", "--iterations", "1", "--replicates", "1", "--max-replicates", "1"]
    args = [*one, "--executor", "ray", "--ray", ray_cluster]
    # The task's process dies mid-iteration.
    code, out, (cell_id, server_pid, node), _ = _run_and_hit(results, args, _kill_its_worker)
    assert code == 0, out  # one cell ok
    assert _gone(server_pid), "the lost task's server was left running"
    with Store(db, create=False) as store:
        run = store.latest_run()
        assert run is not None and run.status == "completed"
        cells = {c.id: c for c in store.cells(run.id)}
        lost = cells.pop(cell_id)
        assert lost.status == "failed" and lost.failure_phase == "measure"
        assert (lost.failure_reason or "").startswith(f"lost on {node} node "), lost
        [rep] = store.replicates(cell_id)
        assert rep.status == "failed" and rep.failure_reason == lost.failure_reason
        assert [i.kind for i in store.iterations(cell_id)] == ["warmup"]  # kept
        [other] = cells.values()
        assert other.status == "ok" and other.id is not None
        assert [r.status for r in store.replicates(other.id)] == ["ok"]
        assert any(f.reason == lost.failure_reason for f in store.failures(run.id))


def test_ctrl_c_stops_the_tasks_and_resume_finishes_the_run(
    ray_cluster: str, tmp_path: Path
) -> None:
    results = tmp_path / "res"
    db = results / "pywebbench.sqlite"
    two = ["--server", "gunicorn-sync", "-d", "1.5", "--iterations", "1", "--replicates", "2"]
    args = [*two, "--max-replicates", "2", "--executor", "ray", "--ray", ray_cluster]
    # SIGTERM, not SIGINT: ray.init installs its own SIGTERM handler (exit at once), and the
    # run must keep treating SIGTERM like Ctrl-C.
    code, out, (_, server_pid, _), took = _run_and_hit(
        results, args, lambda proc, _: proc.send_signal(signal.SIGTERM)
    )
    assert code == 130, out
    # From SIGTERM to the run's exit: 1.09-1.13 s on this project's 2-core VM (5 Dec 2026),
    # 3.3 s at 2.9x slower (a 1.45x slower core at 50% steal, docs/contributing.md); even a
    # server ignoring SIGTERM (its adapter's 5-s stop timeout, a timer, then SIGKILL) would
    # add 5 s. 20 s is exceeded only by 11 s of holds, where the host steals in slices of
    # milliseconds: far rarer than 1 in 10,000 (issue 52).
    assert took < 20, f"took {took:.1f} s to stop"
    assert "--resume" in out
    assert _gone(server_pid, 1.0), "a server was left running"
    with Store(db, create=False) as store:
        run = store.latest_run()
        assert run is not None and run.status == "interrupted"
        [cell] = store.cells(run.id)
        assert cell.id is not None
        assert [r.status for r in store.replicates(cell.id)] == ["interrupted"]
    resumed = pwb("run", "--resume", results=results)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with Store(db, create=False) as store:
        run = store.run(run.id)
        assert run.status == "completed"
        statuses = [r.status for r in store.replicates(cell.id)]
        assert statuses == ["interrupted", "ok", "ok"]
        slots = [(i.replicate, i.kind, i.idx) for i in store.iterations(cell.id)]
        assert len(slots) == len(set(slots))  # nothing measured twice


def _refused(tmp_path: Path, *args: str, python: list[str] | None = None) -> str:
    """Run ``pywebbench run ARGS``: it must stop with exit 2 and write nothing."""
    results = tmp_path / "refused"
    argv = [*TINY, *TWO, *args, "--results-dir", str(results)]
    done = subprocess.run(
        [*(python or [PYWEBBENCH]), *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not results.exists(), "something was written"
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_bad_executor_input_is_refused_before_anything_is_written(
    tmp_path: Path, closed_port: int
) -> None:
    line = _refused(tmp_path, "--ray", "127.0.0.1:6379")
    assert line == "error: --ray: needs --executor ray (or --load-agents N with N > 1)"
    line = _refused(tmp_path, "--executor", "ray", "--load-agents", "2")
    assert line.startswith("error: --load-agents: cannot be combined with --executor ray")
    address = f"127.0.0.1:{closed_port}"
    line = _refused(tmp_path, "--executor", "ray", "--ray", address)
    assert line.startswith(f"error: --ray: cannot reach the Ray cluster at {address}: ")
    no_ray = [
        sys.executable,
        "-c",
        "import sys; sys.modules['ray'] = None; from pywebbench.cli import main; "
        "sys.argv[0] = 'pywebbench'; main()",
    ]
    line = _refused(tmp_path, "--executor", "ray", python=no_ray)
    assert line == (
        "error: --executor ray: Ray is not installed; install it with: "
        "pip install 'pywebbench[ray]'"
    )
