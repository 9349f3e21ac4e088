"""Golden captures of what a study does: the load spec of every load it starts, every server it
starts and stops, what it shows (phases, iterations, cells) and every row it writes to the
store, for the quick profile's matrix and for studies that use every run option
(tests/run/golden/*.json).

A fake load agent and a fake bring-up (tests/fake_bench.py) stand in for the engine and
the servers, so the figures are a pure function of the order of the loads, and a study runs
in about a second. Ids stay as the store gave them (they follow the order of the writes);
timestamps, the run id, the temporary directory, the interpreter and this process's pid and
memory are normalised.

The captures were taken before run/ was split into a scheduler, a host bench and executors
(issue 20): the split must not change a study's loads or rows. To take them again after a
deliberate change of behaviour, run with ``PWB_GOLDEN_WRITE=1`` and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fake_bench import FakeAgent, Timeline, fake_bench, recording_events
from pwbtest import planned
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.run.runner import run_study
from pywebbench.store import Store
from pywebbench.study.config import StudyConfig, resolve

GOLDEN = Path(__file__).parent / "golden"
CPYTHON = default_interpreters()[0].name
WRITE = os.environ.get("PWB_GOLDEN_WRITE") == "1"

#: Columns that depend on the host or the clock, not on what the study did.
VOLATILE = {
    "runs": {"hostname", "cpu_model", "cpu_count", "kernel", "governor", "memory_bytes", "os"}
    | {"pywebbench_version", "orchestrator_python", "host_json"},
    "stacks": {"interpreter_version", "interpreter_build", "interpreter_path", "env_key"},
    "knees": {"search_s"},  # the wall time of the search
    "replicates": {"pid", "idle_rss_bytes", "idle_uss_bytes", "idle_pss_bytes", "processes"},
}
#: Tables with the study's rows (meta holds the schema version only).
TABLES = (
    "runs stacks cells replicates iterations samples failures knees knee_probes load_agents"
).split()
#: Every spec field at its default is left out of a capture (the file stays readable).
SPEC_DEFAULTS = {
    "method": "GET",
    "headers": [],
    "body": "",
    "threads": 1,
    "max_requests": None,
    "warmup_s": 0.0,
    "connect_timeout_s": None,
    "fresh_share": 0.0,
    "pipeline": 1,
    "requests_per_connection": 0,
    "rate_profile": [],
    "arrival": "constant",
    "seed": 1,
    "queue_limit": None,
    "expect_status": [],
    "expect_body": None,
    "faults": [],
    "start_at_unix_ns": None,
    "source_addresses": [],
    "unix_socket": None,
}

#: Longer values (a result document, a warm-up curve) are kept as a digest of their text.
LONG = 160

_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")


def _study(profile: str | None, load: dict[str, Any], matrix: dict[str, Any]) -> StudyConfig:
    return resolve(
        {
            "matrix": {"interpreters": [CPYTHON], **matrix},
            "load": load,
            "cpus": {"server": [0], "generator": [1]},
            "report": False,
        },
        profile=profile,
    )


#: Every run option, server_scope = cell, fixed warm-up, closed loop.
EVERY_OPTION_CELL = (
    None,
    {
        "connections": [8],
        "connection_mode": ["keepalive", "close", 20],
        "warmup": "fixed",
        "warmup_iterations": 1,
        "warmup_duration_s": 0.5,
        "iterations": 2,
        "duration_s": 1.0,
        "replicates": 2,
        "ci_target": 0.01,
        "max_replicates": 3,
        "server_scope": "cell",
        "slo": "p50=200ms",
        "slo_budget_s": 30.0,
        "slo_warmup_s": 0.25,
        "faults": "slowloris=2,4,fresh=20%",
        "syscalls": True,
        "syscalls_duration_s": 0.5,
        "flamegraph": True,
        "flamegraph_duration_s": 0.5,
        "io": "epoll",
        "timeout_s": 2.5,
    },
    {
        "servers": ["gunicorn-gthread"],
        "frameworks": ["raw-wsgi"],
        "workloads": ["hello"],
        "worker_max_requests": [1000],
    },
)
#: server_scope = stack, steady warm-up, open loop, two workloads, both binds and both
#: protocols (faults need TCP and HTTP/1.1, so they are in the other study; waitress serves no
#: h2c), a stack that fails to start (its cells failed, the matrix carries on).
EVERY_OPTION_STACK = (
    None,
    {
        "model": "open",
        "rates": [500.0],
        "warmup": "steady",
        "warmup_cap_s": 4.0,
        "steady_window_s": 1.0,
        "iterations": 1,
        "duration_s": 1.0,
        "replicates": 3,
        "server_scope": "stack",
        "bind": ["tcp", "unix"],
        "protocol": ["http1", "h2c"],
        "streams": 2,
        "pause_s": 0.0,
    },
    {
        "servers": ["waitress", "granian-wsgi"],
        "frameworks": ["raw-wsgi"],
        "workloads": ["hello", "cpu"],
        "workload_params": {"cpu": {"n": 5}},
        "server_options": {"waitress": {"connection_limit": 50}},
    },
)
#: The quick profile's matrix on the per-cell path (its interleaved groups need servers that
#: answer on ports of their own: tests/run/test_interleaved.py runs them on reference servers).
QUICK = ("quick", {"design": "sequential"}, {})
STUDIES = {
    "quick": (QUICK, ()),
    "every_option_cell": (EVERY_OPTION_CELL, ()),
    "every_option_stack": (EVERY_OPTION_STACK, ("granian-wsgi",)),
}


def _spec(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in SPEC_DEFAULTS or SPEC_DEFAULTS[k] != v}


def _timeline(timeline: Timeline) -> list[Any]:
    out: list[Any] = []
    for entry in timeline.entries:
        if entry["entry"] == "load":
            out.append({"load": _spec(entry["spec"])})
        else:
            out.append(entry)
    return out


def _rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    try:
        out = {}
        for table in TABLES:
            drop = VOLATILE.get(table, set())
            rows = db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()  # noqa: S608
            out[table] = [{k: _short(row[k]) for k in row.keys() if k not in drop} for row in rows]
        samples = out.pop("samples")  # many alike rows: their number and digest
        out["samples"] = [{"rows": len(samples), "digest": _short(json.dumps(samples), 0)}]
        return out
    finally:
        db.close()


def _short(value: Any, longest: int = LONG) -> Any:
    if isinstance(value, str) and len(value) > longest:
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:20]
    return value


def _normalised(doc: Any, run_id: str, tmp: Path) -> Any:
    text = json.dumps(doc, indent=1, sort_keys=True, default=str)
    text = text.replace(str(tmp), "<tmp>").replace(run_id, "<run>").replace(CPYTHON, "<python>")
    text = _STAMP.sub("<time>", text)
    return json.loads(text)


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_a_study_loads_and_writes_as_captured(name: str, tmp_path: Path) -> None:
    (profile, load, matrix), fail_start = STUDIES[name]
    config = _study(profile, load, matrix)
    bench = fake_bench(fail_start)
    timeline = bench.timeline
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(
            config,
            planned(config),
            store,
            results_dir=tmp_path,
            agent=FakeAgent(timeline),
            events=recording_events(timeline),
            executor=bench.executor(),
        )
    capture = _normalised(
        {
            "outcome": {
                "status": str(outcome.status),
                "cells_ok": outcome.cells_ok,
                "cells_failed": outcome.cells_failed,
            },
            "timeline": _timeline(timeline),
            "rows": _rows(tmp_path / "s.sqlite"),
        },
        outcome.run_id,
        tmp_path,
    )
    path = GOLDEN / f"{name}.json"
    if WRITE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(capture, indent=1, sort_keys=True) + "\n")
    golden = json.loads(path.read_text())
    for part in ("outcome", "timeline"):
        assert capture[part] == golden[part], part
    for table, rows in golden["rows"].items():
        assert capture["rows"][table] == rows, table
