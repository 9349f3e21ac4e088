"""End-to-end: `pywebbench run` on small real matrices (real servers, real engine).

Covers a clean matrix (store, export round-trip, report), a matrix where one stack fails to
install, one crashes mid-load and one hangs while the rest completes, and Ctrl-C followed by
``--resume`` with nothing measured twice. Every test ends with a census: no process started
by it may remain.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

from pwbtest import MARK_VAR, PYWEBBENCH, marked_processes, planned, pwb
from pywebbench.analysis.modes import levels_disagree, replicate_figures
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.export.json import export_json
from pywebbench.run.events import Outcome
from pywebbench.run.interleaved import rotation_seed
from pywebbench.run.rows import replicate_rps
from pywebbench.run.runner import run_study
from pywebbench.store import Store, Study, study_from_dict
from pywebbench.study.config import resolve
from pywebbench.study.matrix import Matrix

WSGI_SERVER = "granian-wsgi"
ASGI_SERVER = "uvicorn-h11"
CPYTHON = default_interpreters()[0].name  # the running CPython only: tests stay fast
# Short windows; no replicate budget (the tests count replicates); the interference guard off,
# also for the runs started here without tests/pwbtest.py's pwb (its _quiet_guard: these tests
# are of function, and the other pytest worker's load would have every iteration measured
# again). FAST also warms up for a fixed 0.5 s: warm-up until steady is exercised by
# test_small_matrix and tests/run/test_steady*.
SHORT = ["-d", "1", "--max-replicates", "1", "-c", "16", "--python", CPYTHON,
         "--interference-max", "2"]  # fmt: skip
FAST = [*SHORT, "--warmup", "fixed", "--warmup-duration", "0.5"]


def test_small_matrix(tmp_path: Path, census: str) -> None:
    results = tmp_path / "res"
    proc = pwb(
        "run",
        "--server",
        f"{WSGI_SERVER},{ASGI_SERVER}",
        "--framework",
        "raw-wsgi,raw-asgi",
        "--workload",
        "hello",  # the workload axis: test_an_interleaved_study_end_to_end
        "--replicates",
        "2",
        "--server-scope",
        "cell",
        "--design",
        "sequential",  # the per-cell path; the interleaved one: test_an_interleaved_study
        # the steady warm-up runs (its rule is tested in tests/run/test_steady*.py); a 3 s
        # cap keeps 8 warm-ups from taking 15 s each where the machine is noisy
        "--warmup-cap",
        "3",
        *SHORT,
        results=results,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ranked by requests/s" in proc.stdout
    assert "report:" in proc.stdout
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
        doc = export_json(store)
    run = study.runs[0]
    assert run.status == "completed" and run.finished_at
    assert run.server_cpus and run.generator_cpus
    assert not set(run.server_cpus) & set(run.generator_cpus) or run.cpu_count == 1
    assert len(study.cells) == 2 and all(c.status == "ok" for c in study.cells), [
        (c.key, c.failure_reason) for c in study.cells
    ]
    for cell in study.cells:
        its = study.iterations_of(cell.id, kind=None)
        kinds = Counter((i.replicate, i.kind) for i in its)
        assert kinds == {(0, "warmup"): 1, (0, "measured"): 1, (1, "warmup"): 1, (1, "measured"): 1}
        for rep in study.replicates_of(cell.id):  # warmed up until steady (the default)
            assert rep.warmup_end in ("steady", "cap") and rep.warmup_s and rep.warmup_curve
            assert (rep.steady_start_s is not None) == (rep.warmup_end == "steady")
            assert set(rep.drift) >= {"drifting", "change"}
            assert set(rep.leak) >= {"leaking", "bytes_per_1k"}
        for it in its:
            assert it.requests > 0 and it.rps > 0 and it.latency_p99_us
            assert it.cpu_user_s is not None and it.rss_peak_bytes and it.requests_per_cpu_s
            assert it.result["per_second"] and it.result["latency"]["hist"]
            assert study.samples_of(it.id), "no resource samples"
        reps = study.replicates_of(cell.id)
        assert [r.status for r in reps] == ["ok", "ok"]
        assert all(r.cold_start_s and r.idle_rss_bytes for r in reps)
        assert all(r.gil_enabled is True for r in reps)  # the app processes said so (GIL build)
        assert len({r.pid for r in reps}) == 2  # a fresh server per replicate
    pids = [r.pid for r in study.replicates]
    assert len(set(pids)) == len(pids)  # server_scope=cell: a fresh server every time
    for stack in study.stacks:
        assert stack.packages and stack.settings
    # the export round-trips into another store
    with Store(tmp_path / "copy.sqlite") as copy:
        copy.import_study(study_from_dict(json.loads(doc)))
        again = copy.load_study()
    assert len(again.iterations) == len(study.iterations)
    assert [i.result_json for i in again.iterations] == [i.result_json for i in study.iterations]
    # runs and export commands
    listing = pwb("runs", results=results)
    assert listing.returncode == 0 and run.id in listing.stdout
    out = tmp_path / "flat.csv"
    exp = pwb("export", "--format", "csv", "-o", str(out), results=results)
    assert exp.returncode == 0
    assert len(out.read_text().splitlines()) == len(study.iterations) + 1
    reports = list((results / "reports").glob("*.html"))
    assert reports, "no HTML report written"


def test_an_interleaved_study_end_to_end(tmp_path: Path, census: str) -> None:
    """The quick study's design on a small matrix: both stacks of each workload's group up
    at once (2 server processes each), one sliced engine run per group, the group's figures
    in every cell's flags, slices stored as warm-up and measured iterations of one replicate
    per process, the report's interleaved note, and no process left behind."""
    results = tmp_path / "res"
    proc = pwb(
        "run",
        "--server",
        f"{WSGI_SERVER},{ASGI_SERVER}",
        "--framework",
        "raw-wsgi,raw-asgi",
        "--workload",
        "hello,json",
        "--design",
        "interleaved",
        "--replicates",
        "2",
        "--group-budget",
        "12",
        "--slice",  # the 20 rounds a group plans at least, in 12 s of 4 processes
        "0.1",
        # a group may stop once its processes are warm with 8 measured rounds: its stacks'
        # +-50% is met by then (the default 3% would take the whole budget here)
        "--ci-target",
        "0.5",
        "--seed",
        "11",
        "-c",
        "16",
        "--python",
        CPYTHON,
        results=results,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 interleaved groups (2 server processes a stack)" in proc.stdout
    assert "2 stacks x 2 server processes" in proc.stdout
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    assert len(study.cells) == 4 and all(c.status == "ok" for c in study.cells), [
        (c.key, c.failure_reason) for c in study.cells
    ]
    spans = set()
    for cell in study.cells:
        group = cell.flags["group"]
        spans.add((cell.workload, tuple(group["span"])))
        assert group["processes"] == 2 and group["stacks"] == 2 and group["rps"] > 0
        assert group["reference"] == "geometric mean" and len(group["vs"]) == 1
        assert group["seed"] == rotation_seed(group["group"], 11)  # --seed reached the rotation
        reps = study.replicates_of(cell.id)
        assert [r.replicate for r in reps] == [0, 1]
        assert all(r.status == "ok" and r.warmup_class and r.pid for r in reps)
        assert len({r.pid for r in reps}) == 2  # two processes up together
        its = study.iterations_of(cell.id, kind=None)
        assert {i.kind for i in its} >= {"measured"}
        measured = [i for i in its if i.kind == "measured"]
        # Every slice is stored as measured, with its latency whenever it had requests. A
        # slice of 0.25 s in which a process answered nothing (a fresh-clone suite stored
        # one, 5 Dec 2026: the server or the host stalled for the whole slice) is a real
        # observation, stored as it was; the cell's figure comes from the rest.
        assert all(i.latency_p99_us for i in measured if i.requests > 0), measured
        assert sum(i.requests > 0 for i in measured) > len(measured) // 2, measured
    assert len(spans) == 2  # one group per workload, each with its own time span
    pids = [r.pid for r in study.replicates]
    assert len(set(pids)) == len(pids)  # no process served two groups
    (report,) = (results / "reports").glob("*.md")
    assert "2 stacks x 2 server processes, " in report.read_text()  # the group's line


CRASH_APP = """
import os, time
N = int(os.environ.get("PWB_MISBEHAVE_AFTER", "300"))
count = 0

async def app(scope, receive, send):
    global count
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    count += 1
    if count > N:
        MISBEHAVE()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})
"""


def _app_project(root: Path, name: str, misbehave: str) -> Path:
    project = root / name
    project.mkdir()
    (project / f"{name}.py").write_text(CRASH_APP.replace("MISBEHAVE()", misbehave))
    return project


def test_failures_are_recorded_and_the_rest_completes(tmp_path: Path, census: str) -> None:
    bad_reqs = tmp_path / "requirements.txt"
    bad_reqs.write_text("pwb-no-such-package-for-tests-7c1f==0.0.1\n")
    crash = _app_project(tmp_path, "crashapp", "os._exit(3)")
    hang = _app_project(tmp_path, "hangapp", "time.sleep(3600)")
    load = {
        "duration_s": 1.5,
        "warmup": "fixed",
        "interference_max": 2.0,  # of function (tests/pwbtest.py's _quiet_guard)
        "max_replicates": 1,
        "warmup_duration_s": 1.0,
        "warmup_iterations": 1,
        "iterations": 1,
        "replicates": 1,
        "connections": [8],
        "timeout_s": 2.0,
    }
    matrix_base = {"servers": [ASGI_SERVER], "interpreters": [CPYTHON]}
    base = {"matrix": matrix_base, "load": load, "report": False}
    good = resolve(
        {**base, "matrix": {**matrix_base, "frameworks": ["raw-asgi"], "workloads": ["hello"]}}
    )

    def byo(project: Path | None, requirements: Path | None, name: str) -> dict:
        app = {"app": f"{name}:app", "interface": "asgi", "paths": ["/"]}
        if project:
            app["project"] = str(project)
        if requirements:
            app["requirements"] = str(requirements)
        return {**base, "app": app}

    matrix = Matrix.combine(
        planned(good),
        planned(resolve(byo(None, bad_reqs, "noinstall"))),
        planned(resolve(byo(crash, None, "crashapp"))),
        planned(resolve(byo(hang, None, "hangapp"))),
    )
    assert len(matrix.cells) == 4
    t0 = time.monotonic()
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(good, matrix, store, results_dir=tmp_path)
        study = store.load_study([outcome.run_id])
    # The hung app is given up on, not waited out (it sleeps 3,600 s). The study took ~13 s
    # here (the whole test, 13.5 s, with another test file on the same two cores); it is
    # CPU work and timers, so at 2.9x slower (1.45x core speed / 50% steal,
    # docs/contributing.md) ~39 s, plus 1 s of holds: under a third of the bound (issue 52).
    assert time.monotonic() - t0 < 150
    assert outcome.status == "completed"
    by_fw = {study.stack(c.stack_id).framework: c for c in study.cells}
    assert by_fw["raw-asgi"].status == "ok"
    install = by_fw["app-noinstall.app"]
    assert (install.status, install.failure_phase) == ("failed", "provision")
    assert "pwb-no-such-package-for-tests-7c1f" in (install.failure_reason or "")
    crashed = by_fw["app-crashapp.app"]
    assert (crashed.status, crashed.failure_phase) == ("failed", "warmup"), crashed
    assert "exited" in (crashed.failure_reason or "")
    hung = by_fw["app-hangapp.app"]
    assert hung.status == "failed" and hung.failure_phase in ("warmup", "measure"), hung
    assert "respond" in (hung.failure_reason or "") or "no responses" in (hung.failure_reason or "")
    # the iterations leading up to the failures are kept, flagged
    crash_its = study.iterations_of(crashed.id, kind=None)
    assert crash_its and crash_its[-1].server_alive is False
    phases = {f.phase for f in study.failures}
    assert {"provision", "warmup"} <= phases


def _iterations(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT i.id, c.key, i.replicate, i.kind, i.idx, i.interrupted FROM iterations i "
            "JOIN cells c ON c.id = i.cell_id ORDER BY i.id"
        ).fetchall()
    finally:
        con.close()


def _count(db: Path) -> int:
    """Iterations stored so far (0 while the store is still being created)."""
    try:
        return len(_iterations(db))
    except sqlite3.OperationalError:
        return 0


def test_ctrl_c_then_resume(tmp_path: Path, census: str) -> None:
    results = tmp_path / "res"
    db = results / "pywebbench.sqlite"
    args = [
        "run",
        "--server",
        WSGI_SERVER,
        "--framework",
        "raw-wsgi",
        "--workload",
        "hello,json,cpu",
        "--replicates",
        "2",
        "--no-report",
        *FAST,
        "--results-dir",
        str(results),
    ]
    proc = subprocess.Popen(
        [PYWEBBENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if db.exists() and _count(db) >= 5:
                break
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.2)
        time.sleep(0.4)  # land inside an iteration, usually
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out
    # Stopping took 0.28-0.39 s here; at 2.9x slower (docs/contributing.md) 1.1 s, plus 1 s of
    # holds. Even a server that ignored SIGTERM (the adapter's 5-s stop_timeout_s, a timer,
    # then SIGKILL) would stop in 5 + 1.1 + 1 = 7.1 s, under the bound (issue 52).
    assert stopped_in < 8, f"took {stopped_in:.1f} s to stop"
    assert "--resume" in out
    assert not marked_processes(MARK_VAR, census), "servers left after Ctrl-C"
    before = _iterations(db)
    with Store(db, create=False) as store:
        run = store.latest_run()
        assert run is not None and run.status == "interrupted"
        run_id = run.id
        done_before = {c.key for c in store.cells(run_id) if c.status == "ok"}
    resumed = pwb("run", "--resume", results=results)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _iterations(db)
    assert after[: len(before)] == before  # nothing rewritten
    new = after[len(before) :]
    assert new, "resume measured nothing"
    assert not {k for _, k, *_ in new} & done_before  # finished cells not measured again
    slots = Counter((k, r, kind, idx) for _, k, r, kind, idx, _ in after)
    assert max(slots.values()) == 1
    with Store(db, create=False) as store:
        run = store.run(run_id)
        assert run.status == "completed"
        cells = store.cells(run_id)
        assert len(cells) == 3 and all(c.status == "ok" for c in cells)
        for cell in cells:
            reps = [r for r in store.replicates(cell.id) if r.status == "ok"]
            assert len(reps) == 2
    assert os.path.exists(db)


def _two_workloads_twice(tmp_path: Path, scope: str) -> tuple[Outcome, Study]:
    """hello and json on one ASGI stack, 2 replicates each, under ``server_scope``."""
    config = resolve(
        {
            "matrix": {
                "interpreters": [CPYTHON],
                "servers": [ASGI_SERVER],
                "frameworks": ["raw-asgi"],
                "workloads": ["hello", "json"],
            },
            "load": {
                "duration_s": 0.4,
                "warmup": "fixed",
                "interference_max": 2.0,  # of function (tests/pwbtest.py's _quiet_guard)
                "max_replicates": 1,
                "warmup_duration_s": 0.3,
                "replicates": 2,
                "connections": [8],
                "server_scope": scope,
            },
            "report": False,
        }
    )
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(config, planned(config), store, results_dir=tmp_path)
        return outcome, store.load_study([outcome.run_id])


def test_stack_scope_shares_one_server_per_replicate(tmp_path: Path, census: str) -> None:
    """server_scope = "stack": each round one fresh server serves the stack's cells."""
    outcome, study = _two_workloads_twice(tmp_path, "stack")
    assert outcome.status == "completed" and outcome.cells_ok == 2
    pids: dict[int, set[int]] = {}
    for rep in study.replicates:
        assert rep.status == "ok" and rep.pid
        pids.setdefault(rep.replicate, set()).add(rep.pid)
    assert sorted(pids) == [0, 1]
    assert all(len(p) == 1 for p in pids.values())  # both cells on one server per round
    assert pids[0] != pids[1]  # a fresh server per replicate
    for cell in study.cells:
        kinds = Counter(i.kind for i in study.iterations_of(cell.id, kind=None))
        assert kinds == {"warmup": 2, "measured": 2}


def test_replicates_run_in_rounds_across_the_study(tmp_path: Path, census: str) -> None:
    """Replicate r of every cell runs before replicate r+1 of any, odd rounds reversed, so a
    cell's replicates span the study and its CI takes in the machine's drift."""
    outcome, study = _two_workloads_twice(tmp_path, "cell")
    assert outcome.status == "completed" and outcome.cells_ok == 2
    workload = {c.id: c.workload for c in study.cells}
    order = [
        (workload[r.cell_id], r.replicate)
        for r in sorted(study.replicates, key=lambda r: r.id or 0)
    ]
    assert order == [("hello", 0), ("json", 0), ("json", 1), ("hello", 1)]


def test_services_started_once_for_the_workloads_that_need_them(
    tmp_path: Path, census: str
) -> None:
    """redis and fortunes cells get real redis-server / PostgreSQL, started once per study."""
    config = resolve(
        {
            "matrix": {
                "interpreters": [CPYTHON],
                "servers": [ASGI_SERVER],
                "frameworks": ["raw-asgi"],
                "workloads": ["redis", "fortunes"],
            },
            "load": {
                "duration_s": 0.5,
                "warmup": "fixed",
                "interference_max": 2.0,  # of function (tests/pwbtest.py's _quiet_guard)
                "max_replicates": 1,
                "warmup_duration_s": 0.3,
                "replicates": 1,
                "connections": [4],
            },
            "report": False,
        }
    )
    matrix = planned(config)
    assert matrix.services == {"redis", "postgres"}
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(config, matrix, store, results_dir=tmp_path)
        study = store.load_study([outcome.run_id])
    assert outcome.cells_ok == 2, [(c.workload, c.failure_reason) for c in study.cells]
    for cell in study.cells:
        for it in study.iterations_of(cell.id, kind=None):
            assert it.requests > 0 and it.errors == 0 and it.non_2xx == 0


def test_killed_pywebbench_leaves_a_readable_store_and_resume_cleans_up(
    tmp_path: Path, census: str
) -> None:
    """SIGKILL (no cleanup at all): the store stays readable, --resume stops the orphaned
    server it recorded and completes the study."""
    results = tmp_path / "res"
    db = results / "pywebbench.sqlite"
    args = ["run", "--server", ASGI_SERVER, "--framework", "raw-asgi", "--workload",
            "hello,json", "--replicates", "1", "--no-report", *FAST,
            "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(
        [PYWEBBENCH, *args], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _count(db) < 1:
            assert proc.poll() is None
            time.sleep(0.1)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Store(db, create=False) as store:
        study = store.load_study()
        assert study.runs[0].status == "running" and study.iterations
    resumed = pwb("run", "--resume", results=results)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with Store(db, create=False) as store:
        run = store.latest_run()
        assert run is not None and run.status == "completed"
        assert all(c.status == "ok" for c in store.cells(run.id))


def test_the_replicate_budget_adds_replicates_until_the_ci_target(
    tmp_path: Path, census: str
) -> None:
    """--ci-target: more replicates while the CI is wider than the target, up to the cap; the
    target is judged from 3 replicates on (2 that agree by luck would stop a cell early)."""
    base = ["--server", WSGI_SERVER, "--framework", "raw-wsgi", "--workload", "hello"]
    fast = ["-d", "0.5", "--warmup", "fixed", "--warmup-duration", "0.3", "-c", "8"]
    counts: dict[str, int] = {}
    disagree: dict[str, bool] = {}
    # loose: +-500%; 2 replicates' t interval (12.7 standard errors) is under it unless they
    # differ by 79%
    for name, target in (("tight", "0.0001"), ("loose", "5")):
        results = tmp_path / name
        proc = pwb(
            "run", *base, *fast, "--python", CPYTHON, "--replicates", "1", "--ci-target",
            target, "--max-replicates", "4", "--no-report", results=results,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        with Store(results / "pywebbench.sqlite", create=False) as store:
            study = store.load_study()
        counts[name] = len(study.replicates)
        first3 = [r for r in study.replicates if r.replicate < 3]  # 0-based
        rps = replicate_rps(first3, [i for i in study.iterations if i.replicate < 3])
        # 3 replicates that settled at different levels (a neighbour's burst on a 0.5 s
        # iteration) want a 4th whatever the target (issue 21's modes rule, not the budget's)
        disagree[name] = levels_disagree(replicate_figures(rps))
    assert counts == {"tight": 4, "loose": 4 if disagree["loose"] else 3}, (counts, disagree)
