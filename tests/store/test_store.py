"""The results store: schema, committed writes, typed reads, export round-trips."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pywebbench.export.csv import export_csv
from pywebbench.export.json import export_json
from pywebbench.store import (
    SCHEMA_VERSION,
    Cell,
    Failure,
    Iteration,
    Replicate,
    Run,
    Sample,
    StackRow,
    Store,
    StoreError,
    new_run_id,
    study_from_dict,
    utcnow,
)
from pywebbench.store.model import TABLE_CLASSES, LoadAgentRow


def make_run(store: Store, run_id: str | None = None) -> str:
    """Write a small but complete run: 1 stack, 2 cells, iterations with samples."""
    rid = run_id or new_run_id()
    store.create_run(
        Run(
            id=rid,
            created_at=utcnow(),
            finished_at=None,
            status="running",
            profile="quick",
            hostname="h",
            cpu_model="cpu <b>",
            cpu_count=2,
            kernel="6.1",
            governor=None,
            memory_bytes=1 << 30,
            os="Debian",
            pywebbench_version="0.1.0",
            orchestrator_python="3.11.7",
            server_cpus_json="[0]",
            generator_cpus_json="[1]",
            config_json=json.dumps({"profile": "quick"}),
        )
    )
    sid = store.add_stack(
        StackRow(
            id=None,
            run_id=rid,
            key="cpython3.11/granian-wsgi/flask",
            name="cpython3.11/granian-wsgi/flask",
            interpreter="cpython3.11",
            interpreter_impl="cpython",
            interpreter_version="3.11.7",
            interpreter_build="GCC 12",
            interpreter_path="/usr/bin/python3.11",
            server="granian-wsgi",
            interface="wsgi",
            framework="flask",
            workers=1,
            threads=1,
            packages_json=json.dumps({"flask": "3.1.3"}),
        )
    )
    for n, workload in enumerate(["hello", "json"]):
        cid = store.add_cell(
            Cell(
                id=None,
                run_id=rid,
                stack_id=sid,
                key=f"s|{workload}|c64",
                ordinal=n,
                workload=workload,
                workload_params_json="{}",
                load_model="closed",
                connections=64,
                rate=None,
                load_point="c64",
                status="running",
            )
        )
        store.add_replicate(Replicate(None, cid, 0, "ok", utcnow(), pid=123, cold_start_s=0.5))
        for kind, idx in [("warmup", 0), ("measured", 0), ("measured", 1)]:
            it_id = store.add_iteration(
                Iteration(
                    id=None,
                    cell_id=cid,
                    replicate=0,
                    kind=kind,
                    idx=idx,
                    started_at=utcnow(),
                    duration_s=1.0,
                    requests=1000 + idx,
                    errors=0,
                    non_2xx=0,
                    timeouts=0,
                    rps=1000.0 + idx,
                    latency_p50_us=100.0,
                    generator_bound=idx == 1,
                    result_json=json.dumps({"requests": 1000, "histogram": "HISTFAAA"}),
                ),
                [
                    Sample(0, t / 4, t * 0.1, 0.0, 10_000_000 + t, None, None, 3, 7, 1)
                    for t in range(4)
                ],
            )
            agents = [  # as if loaded by two Ray agents (docs/scale-out.md)
                LoadAgentRow(
                    None,
                    it_id,
                    f"agent-{a}",
                    "127.0.0.1",
                    "n1",
                    None,
                    "[1]",
                    "ok",
                    None,
                    32,
                    None,
                    500 + idx,
                    500.0,
                    120.0,
                    40.0,
                    0.3,
                    False,
                    "{}",
                )  # fmt: skip
                for a in range(2)
            ]
            store.add_load_agents(agents)
        store.update_cell(cid, status="ok", finished_at=utcnow())
    store.add_failure(Failure(None, rid, "verify", "bad body", utcnow(), stack_id=sid))
    store.update_run(rid, status="completed", finished_at=utcnow())
    return rid


def test_tables_match_the_model(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        assert store.schema_version == SCHEMA_VERSION
    db = sqlite3.connect(tmp_path / "s.sqlite")
    for table, cls in TABLE_CLASSES.items():
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        assert cols == [f.name for f in dataclasses.fields(cls)], table
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_write_and_read_back(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        rid = make_run(store)
        assert [r.id for r in store.runs()] == [rid]
        assert store.run(rid[:10]).id == rid
        study = store.load_study()
    assert study.runs[0].status == "completed"
    assert study.runs[0].server_cpus == [0]
    assert len(study.cells) == 2 and study.workloads() == ["hello", "json"]
    cell = study.cells[0]
    measured = study.iterations_of(cell.id)
    assert [i.idx for i in measured] == [0, 1]
    assert measured[1].generator_bound is True and measured[0].generator_bound is False
    assert measured[0].result["histogram"] == "HISTFAAA"
    assert len(study.samples_of(measured[0].id)) == 4
    assert study.stack(cell.stack_id).packages == {"flask": "3.1.3"}
    assert study.failures[0].phase == "verify"


def test_export_json_round_trips(tmp_path: Path) -> None:
    with Store(tmp_path / "a.sqlite") as a:
        rid = make_run(a)
        make_run(a)  # another run that is not exported
        original = a.load_study([rid])
        doc = export_json(a, [rid])
    with Store(tmp_path / "b.sqlite") as b:
        make_run(b)  # the target already holds a run: ids get remapped
        assert b.import_study(study_from_dict(json.loads(doc))) == [rid]
        again = b.load_study([rid])
        assert len(again.load_agents) == 12  # per-agent rows travel with their iterations
        assert _same(original, again)
        with pytest.raises(StoreError, match="already"):
            b.import_study(study_from_dict(json.loads(doc)))


def _same(a, b) -> bool:  # noqa: ANN001
    """Equal apart from the integer ids, which an import re-assigns."""

    def strip(study):  # noqa: ANN001, ANN202
        out = {}
        for table in TABLE_CLASSES:
            rows = []
            for row in getattr(study, table):
                d = dataclasses.asdict(row)
                for k in ("id", "stack_id", "cell_id", "iteration_id"):
                    d.pop(k, None)
                rows.append(d)
            out[table] = rows
        return out

    assert strip(a) == strip(b)
    return True


def test_export_csv(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        rid = make_run(store)
        rows = list(csv.DictReader(io.StringIO(export_csv(store, [rid]))))
        assert len(rows) == 6
        assert rows[0]["stack_name"] == "cpython3.11/granian-wsgi/flask"
        assert rows[0]["workload"] == "hello" and rows[0]["kind"] == "warmup"
        samples = list(csv.DictReader(io.StringIO(export_csv(store, [rid], "samples"))))
        assert len(samples) == 24
        with pytest.raises(ValueError, match="unknown table"):
            export_csv(store, [rid], "nope")


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no results store"):
        Store(tmp_path / "missing.sqlite", create=False)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE x (y)").connection.commit()
    with pytest.raises(StoreError, match="not a pywebbench store"):
        Store(other)
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(StoreError, match="holds no runs"):
            store.load_study()
        with pytest.raises(StoreError, match="no run"):
            store.run("nope")
    db = sqlite3.connect(tmp_path / "s.sqlite")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(tmp_path / "s.sqlite")


def test_a_crash_loses_nothing_committed(tmp_path: Path) -> None:
    """A writer killed with os._exit mid-study leaves every committed row readable."""
    path = tmp_path / "s.sqlite"
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_store import make_run\n"
        "from pywebbench.store import Store\n"
        f"s = Store({str(path)!r})\n"
        "make_run(s, 'crashrun')\n"
        "os._exit(9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert proc.returncode == 9
    with Store(path, create=False) as store:
        study = store.load_study(["crashrun"])
    assert len(study.iterations) == 6 and len(study.samples) == 24


def test_a_version_1_store_is_migrated(tmp_path: Path) -> None:
    """Version 2 renamed cells.concurrency to cells.connections; older stores still open."""
    from pywebbench.store.schema import _KNEE_TABLES, AB_DDL, DDL, KNEE_FLIPS_DDL, LOAD_AGENTS_DDL

    path = tmp_path / "v1.sqlite"
    db = sqlite3.connect(path)
    v1 = DDL.replace(_KNEE_TABLES, "").replace(LOAD_AGENTS_DDL, "").replace(AB_DDL, "")
    v1 = v1.replace(KNEE_FLIPS_DDL, "")
    # (the knee tables, the load agents, A/B and knee flips came with versions 4, 5, 10, 11)
    v1 = v1.replace("connections          INTEGER", "concurrency          INTEGER")
    for column in ("warmup_end", "warmup_s", "steady_start_s", "warmup_curve_json",
                   "drift_json", "leak_json", "worker_max_requests", "connection_mode",
                   "syscalls_json", "processes_seen", "bind", "node", "flame_json",
                   "others_cpu_s", "steal_s", "interfered", "remeasured_json",
                   "instructions_json", "interpreter_free_threaded", "interpreter_jit",
                   "interpreter_optimizations", "interpreter_gil", "gil_enabled", "warmup_class",
                   "measured_curve_json", "core_rate", "protocol"):  # fmt: skip
        v1 = "\n".join(line for line in v1.splitlines() if not line.strip().startswith(column))
    v1 = v1.replace("ctx_involuntary      INTEGER,\n);", "ctx_involuntary      INTEGER\n);")
    db.executescript(v1)
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with Store(path) as store:  # migrated on open, then written through the new schema
        run_id = make_run(store)
    with Store(path, create=False) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert {c.connections for c in store.cells(run_id)} == {64}
        assert {c.bind for c in store.cells(run_id)} == {"tcp"}  # added by version 7
        assert {c.protocol for c in store.cells(run_id)} == {"http1"}  # added by version 16
        cell_id = store.cells(run_id)[0].id
        assert cell_id is not None
        its = store.iterations(cell_id)
        assert its
        for it in its:  # added by version 9: not interfered
            assert not it.interfered and it.remeasured == [] and it.others_cpu_s is None
            assert it.core_rate is None  # added by version 15: not probed
        stack = store.stacks(run_id)[0]  # version 13: what the interpreter is
        assert (stack.interpreter_free_threaded, stack.interpreter_gil) == (False, "")


def test_a_slices_latency_histogram_is_read_where_the_group_stores_it() -> None:
    """An interleaved group stores each slice as an iteration whose result holds the slice
    under ``ab_slice`` (run/rows.py ``slice_iteration``): its histogram is the iteration's,
    for compare's latency ratios, the console, the report's series and the HDR exports."""
    from pywebbench.load.histogram import Histogram
    from pywebbench.load.sliced import SliceStats
    from pywebbench.run.rows import slice_iteration

    hist = Histogram.from_values([900, 1000, 1100])
    s = SliceStats(
        index=0, round=0, target=0, requests=3, errors=0, timeouts=0, duration_s=0.25,
        rps=12.0, started_at=1.0, ended_at=1.25, p50_us=1000, p99_us=1100,
        latency={"hist": hist.encoded, "summary": hist.summary().model_dump()},
    )  # fmt: skip
    it = slice_iteration(s, cell_id=1, dropped=None)
    assert it.latency_histogram() == hist.encoded
    no_hist = slice_iteration(s.model_copy(update={"latency": None}), cell_id=1, dropped=None)
    assert no_hist.latency_histogram() is None
