"""Instructions per request (``--instructions``) on real servers under valgrind: stored per
replicate, shown in the reports and exports, gated by ``compare``; refused up front without
valgrind."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pwbtest import (
    MARK_VAR,
    PYWEBBENCH,
    command,
    exclusive,
    marked_processes,
    pwb,
    valgrind_leftovers,
)
from pywebbench.bringup import StackFailure
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.compare.cells import cell_figures
from pywebbench.compare.gate import evaluate, parse_rules
from pywebbench.compare.match import Pair
from pywebbench.compare.verdict import compare_pair
from pywebbench.export.csv import export_csv
from pywebbench.run.instructions import (
    START_SLOWDOWN,
    batch_size,
    cannot_count,
    count_fresh_server,
    housekeeping,
    thread_counts,
)
from pywebbench.store import Store, Study
from pywebbench.store.model import Phase

CPYTHON = default_interpreters()[0].name
FAST = ["-d", "0.5", "--warmup", "fixed", "--warmup-duration", "0.5", "--python", CPYTHON]
ONE_REPLICATE = ["--replicates", "1", "--max-replicates", "1"]
LOOPS = 1000  # extra iterations of an empty for loop per request on /extra

APP = f"""
def _work(n):
    for _ in range(n):
        pass


def app(environ, start_response):
    _work({LOOPS} if environ["PATH_INFO"] == "/extra" else 0)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
"""


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Study]:
    """One study of a two-path app on gunicorn-sync with --instructions (50 counted)."""
    tmp = tmp_path_factory.mktemp("instructions")
    project = tmp / "project"
    project.mkdir()
    (project / "loopapp.py").write_text(APP)
    results = tmp / "res"
    mark = uuid.uuid4().hex  # the census of tests/run/conftest.py, around the whole run
    with exclusive("valgrind"):  # no other worker's counted servers meanwhile
        before = valgrind_leftovers()
        os.environ[MARK_VAR] = mark
        try:
            proc = pwb(
                "run",
                *FAST,
                *ONE_REPLICATE,
                *("--app", "loopapp:app", "--interface", "wsgi", "--project", str(project)),
                *("--path", "/", "--path", "/extra", "--server", "gunicorn-sync", "-c", "2"),
                *("--instructions", "--instructions-requests", "50"),
                results=results,
                timeout=400,
            )
        finally:
            del os.environ[MARK_VAR]
        assert not marked_processes(MARK_VAR, mark), "processes left behind"
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # the counted servers are killed; their vgdb FIFOs went with the directory made for
        # them
        assert valgrind_leftovers() <= before
    assert "instructions per request" in proc.stdout  # the console's table
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    assert study.cells and all(c.status == "ok" for c in study.cells)
    return results, study


def test_extra_work_per_request_shows_in_the_count(counted: tuple[Path, Study]) -> None:
    _, study = counted
    per_path = {}
    for cell in study.cells:
        (rep,) = [r for r in study.replicates if r.cell_id == cell.id]
        doc = rep.instructions
        assert doc["requests"] == 50 and doc["errors"] == 0, doc  # the most: light requests
        assert doc["probe_requests"] == 5
        # the master and its worker, both counted; the master's timer work is set apart
        assert len(doc["by_process"]) == 2 and doc["processes"] >= 1
        assert doc["instructions"] == sum(doc["by_process"]) - sum(doc["housekeeping"])
        # an idle window ran when the master ran instructions during the batch too
        assert doc["idle_s"] > 0 or sum(n > 0 for n in doc["by_process"]) == 1, doc
        assert doc["study_s"] >= doc["start_s"] > 0
        per_path[cell.workload] = doc["per_request"]
    # An empty loop iteration is ~100-300 instructions in CPython 3.9-3.13.
    extra = (per_path["path:/extra"] - per_path["path:/"]) / LOOPS
    assert 100 <= extra <= 300, per_path


def test_reports_and_exports_show_the_count(counted: tuple[Path, Study]) -> None:
    results, study = counted
    store = str(results / "pywebbench.sqlite")
    proc = command(["report", "--store", store], timeout=120)
    assert proc.returncode == 0, proc.stderr
    (md,) = results.glob("report-*.md")
    text = md.read_text()
    assert "## Instructions per request" in text
    for rep in study.replicates:
        assert f"{rep.instructions['per_request']:,.0f}" in text
    (page,) = results.glob("report-*.html")
    assert 'id="instructions-note"' in page.read_text()
    with Store(results / "pywebbench.sqlite", create=False) as store:
        rows = list(csv.DictReader(io.StringIO(export_csv(store))))
    counts = {float(r["instructions_per_request"]) for r in rows}
    assert counts == {float(r.instructions["per_request"]) for r in study.replicates}


def test_the_gate_trips_on_more_instructions(counted: tuple[Path, Study]) -> None:
    _, study = counted
    by_path = {f.cell.workload: f for f in cell_figures(study)}
    worse = compare_pair(Pair(base=by_path["path:/"], new=by_path["path:/extra"]))
    better = compare_pair(Pair(base=by_path["path:/extra"], new=by_path["path:/"]))
    assert worse.instructions is not None and worse.instructions[0] > 1.01
    (tripped,) = evaluate(parse_rules(["instructions>1%"]), [worse])
    assert tripped.rule == "instructions>1%" and "instructions/request +" in tripped.detail
    assert not evaluate(parse_rules(["instructions>1%"]), [better])
    far = worse.instructions[0] - 1 + 0.01  # a threshold above the change: passes
    assert not evaluate(parse_rules([f"instructions>{far * 100:.1f}%"]), [worse])


def test_an_interleaved_group_is_counted_after_its_slices(tmp_path: Path) -> None:
    """With the interleaved design the timed figures come from the group's slices and the
    count from a fresh server under valgrind after the group's servers are down: stored on
    the cell's first server process's replicate (``instructions_replicates`` = 1), none on
    the second."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "loopapp.py").write_text(APP)
    results = tmp_path / "res"
    with exclusive("valgrind"):
        before = valgrind_leftovers()
        proc = pwb(
            "run",
            *("--python", CPYTHON, "--design", "interleaved", "--replicates", "2"),
            *("--group-budget", "6", "--slice", "0.1", "--no-report"),
            *("--app", "loopapp:app", "--interface", "wsgi", "--project", str(project)),
            *("--path", "/extra", "--server", "gunicorn-sync", "-c", "2"),
            *("--instructions", "--instructions-requests", "50"),
            results=results,
            timeout=400,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert valgrind_leftovers() <= before
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    (cell,) = study.cells
    assert cell.status == "ok" and "group" in cell.flags  # measured interleaved
    first, second = sorted(study.replicates_of(cell.id or 0), key=lambda r: r.replicate)
    doc = first.instructions
    assert doc["requests"] == 50 and doc["errors"] == 0, doc
    # An empty loop iteration is ~100-300 instructions in CPython 3.9-3.13 (above).
    assert 100 * LOOPS <= doc["per_request"] <= 300 * LOOPS + 1_000_000, doc  # + the server
    assert not second.instructions


def test_instructions_refused_up_front_without_valgrind(tmp_path: Path) -> None:
    args = [PYWEBBENCH, "run", "--server", "gunicorn-sync", "--framework", "raw-wsgi"]
    args += ["--workload", "hello", "--instructions", "--results-dir", str(tmp_path / "res")]
    env = {**os.environ, "PATH": str(Path(PYWEBBENCH).parent)}  # only the CLI's Python
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "needs valgrind" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "res" / "pywebbench.sqlite").exists()  # nothing written


def test_the_status_gives_each_threads_total_since_the_zero() -> None:
    status = (
        "instrumentation: on\nexecuted-bbs: 44852595\nevents: Ir\npart: 0\n"
        "threads: 1 2\ncurrent-tid: 2\nevents-1: 143062\nframes-1: 3\n"
        "function-1-0: main\ncalls-1-0: 1\nevents-1-0: 12\n"  # a frame's, not a total
        "events-2: 215322365\nframes-2: 1\n"
    )
    assert thread_counts(status) == [143_062, 215_322_365]
    assert thread_counts("instrumentation: on\nevents: Ir\nthreads: 1\nevents-1: 0\n") == [0]
    # counting off, or no answer: no count, never zero
    assert thread_counts("instrumentation: off\n") is None
    assert thread_counts("") is None


def test_a_process_that_only_keeps_house_is_set_apart() -> None:
    # 1: a master waking on a timer (as much per second idle as busy); 2: a worker that
    # served the batch (a heartbeat when idle); 3: a process that ran nothing at all.
    busy = {1: 200_000, 2: 48_000_000, 3: 0}
    idle = {1: 50_000, 2: 2_000, 3: 0}
    assert housekeeping(busy, idle, scale=4.0) == [1]
    assert housekeeping(busy, {1: 10_000, 2: 2_000}, scale=4.0) == []  # 40,000 < half


def test_the_batch_is_sized_by_the_probe() -> None:
    assert batch_size(2_500_000, 5, most=100) == 100  # 500,000 a request: 100 is the most
    assert batch_size(62_000_000, 5, most=100) == 10  # 12.4 million a request: at least 10
    assert batch_size(5 * 2_000_000, 5, most=100) == 25  # 50 million in 25 requests
    assert batch_size(0, 5, most=100) == 100 and batch_size(1, 5, most=3) == 3


def test_pypy_is_refused_with_a_reason() -> None:
    why = cannot_count(is_pypy=True)
    assert why is not None and "PyPy" in why
    assert cannot_count(is_pypy=False) is None


def test_a_server_that_does_not_start_under_valgrind_is_a_reason_not_a_failure() -> None:
    """count_fresh_server (both run and ab count through it) starts the server with the
    valgrind wrapper and a start timeout START_SLOWDOWN times the plain one, and a server
    that does not start gives the reason; the FIFOs' directory is gone after."""
    seen: list[tuple[list[str], float]] = []

    def start(wrapper: list[str], start_timeout_s: float) -> Any:
        seen.append((wrapper, start_timeout_s))
        raise StackFailure(Phase.START, "gunicorn exited with code 3")

    pypy = SimpleNamespace(is_pypy=True)
    cell = SimpleNamespace(variant=SimpleNamespace(stack=SimpleNamespace(interpreter=pypy)))
    doc = count_fresh_server(start, 4.0, cell, None, [1], lambda spec: None)  # type: ignore[arg-type]
    assert doc["error"] == "the server did not start under valgrind: gunicorn exited with code 3"
    assert doc["study_s"] >= 0 and "start_s" not in doc
    [(wrapper, timeout)] = seen
    assert timeout == 4.0 * START_SLOWDOWN
    assert "--tool=callgrind" in wrapper and "--smc-check=all" in wrapper  # PyPy's JIT
    [prefix] = [a.split("=", 1)[1] for a in wrapper if a.startswith("--vgdb-prefix=")]
    assert not os.path.exists(os.path.dirname(prefix))
