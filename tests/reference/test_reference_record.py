"""The reference record (reference/record.py, docs/reference-table.md): one run reduced to
what pooling reads and its host facts; written by ``pywebbench export --format reference``
into a folder, read back to the same estimates, pooled to the same table as the stored runs;
bad input refused in one line, exit 2, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pooled_runs import HOST_EXTRA, key, run_row, study
from pywebbench.analysis.pooling import CellKey, RunEstimate, pool
from pywebbench.cli import cli
from pywebbench.reference.estimates import study_estimates
from pywebbench.reference.record import (
    FORMAT,
    VERSION,
    Record,
    RecordError,
    check_record,
    dumps,
    machine_id,
    read_folder,
    read_record,
    record_of,
)
from pywebbench.store import Store, Study


def _store(tmp_path: Path, s: Study) -> Path:
    path = tmp_path / "pywebbench.sqlite"
    with Store(path) as store:
        store.import_study(s)
    return path


def _export(store: Path, folder: Path, *runs: str) -> tuple[int, str]:
    args = ["export", *runs, "--store", str(store), "--format", "reference", "-o", str(folder)]
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.output


def test_a_record_round_trips_to_the_estimates_of_its_run() -> None:
    s = study(3)
    doc = record_of(s, "run1")
    text = dumps(doc)
    back = json.loads(text)
    assert back == doc and dumps(back) == text
    assert back["format"] == FORMAT and back["version"] == VERSION
    assert back["run"] == {
        "id": "run1", "created_at": run_row(1).created_at, "finished_at": run_row(1).finished_at,
        "profile": "quick", "seed": 101, "design": None, "pywebbench_version": "0.1.0",
        "commit": HOST_EXTRA["pywebbench_git"],
    }  # fmt: skip
    host = back["host"]
    assert host["machine"] == machine_id("host1") and "host1" not in text
    assert host["cpu_cache_bytes"] == HOST_EXTRA["cpu_cache_bytes"]
    assert host["pypy_gc"] == HOST_EXTRA["pypy_gc"] and host["kernel"] == "6.1"
    assert [(g["workload"], g["load_point"], g["df"], g["rounds"]) for g in back["groups"]] == [
        ("cpu", "c64", 4, 12),
        ("hello", "c64", 4, 12),
    ]
    cell = back["groups"][0]["cells"][key("granian-wsgi")]
    assert set(cell) == {"ratio", "low", "high", "rps", "rps_low", "rps_high", "processes"}
    mine = [e for e in study_estimates(s).reference if e.run == "run1"]
    assert sorted(read_back(back), key=_order) == sorted(mine, key=_order) and len(mine) == 6
    assert len(text) < 4000  # a few KB: 6 cells here, the quick study's 21 about 6 KB


def read_back(doc: dict[str, Any]) -> list[RunEstimate]:
    return Record(None, check_record(doc, "x")).estimates()


def _order(e: RunEstimate) -> CellKey:
    return e.key


def test_pooling_the_records_equals_pooling_the_stored_runs(tmp_path: Path) -> None:
    """Six runs from two machines, one without waitress: the records written by the
    command pool to exactly the figures the stored runs pool to."""
    s = study(6, lacking=3)
    store = _store(tmp_path, s)
    folder = tmp_path / "reference" / "runs"
    code, out = _export(store, folder, *(f"run{i}" for i in range(6)))
    assert code == 0, out
    assert sorted(p.name for p in folder.iterdir()) == [f"run{i}.json" for i in range(6)]
    records = read_folder(folder)
    assert [r.run_id for r in records] == [f"run{i}" for i in range(6)]
    with Store(store, create=False) as db:
        stored = study_estimates(db.load_study([f"run{i}" for i in range(6)])).reference
    from_store = pool(stored)
    from_records = pool(e for r in records for e in r.estimates())
    assert from_records == from_store
    assert {p.runs for p in from_records} == {1, 5}  # run3 lacks waitress: pools apart
    assert {h for p in from_records for h in p.hosts} == {"Intel Xeon E5", "AMD EPYC 7B13"}


def _one_line_error(code: int, out: str, *words: str) -> None:
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert all(w in lines[0] for w in words), out


def test_the_command_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    s = study(2)
    s.runs[1].status = "interrupted"
    store = _store(tmp_path, s)
    folder = tmp_path / "runs"
    args = ["export", "run0", "--store", str(store), "--format", "reference"]
    result = CliRunner().invoke(cli, args)  # no -o
    _one_line_error(result.exit_code, result.output, "--output", "directory")
    # run1 is interrupted: neither record is written, not even run0's
    _one_line_error(*_export(store, folder, "run0", "run1"), "run1", "interrupted")
    assert not folder.exists() or list(folder.iterdir()) == []
    _one_line_error(*_export(store, folder, "nosuch"), "nosuch")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    _one_line_error(*_export(store, a_file, "run0"), "is a file")
    assert a_file.read_text() == "x"
    code, out = _export(store, folder, "run0")
    assert code == 0 and [p.name for p in folder.iterdir()] == ["run0.json"], out


def test_a_run_without_group_figures_is_refused(tmp_path: Path) -> None:
    s = study(1)
    for c in s.cells:
        c.flags_json = "{}"
    with pytest.raises(RecordError, match="no interleaved group figures"):
        record_of(s, "run0")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "not JSON"),
        ('{"format": "pywebbench-study"}', "not a reference record"),
        ('{"format": "pywebbench-reference-run", "version": 2}', "newer than"),
        ('{"format": "pywebbench-reference-run", "version": 1, "run": {}}', "run.id"),
    ],
)
def test_a_bad_record_is_one_line_naming_its_file(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(RecordError) as info:
        read_record(path)
    message = str(info.value)
    assert why in message and str(path) in message and "\n" not in message


def test_a_record_without_a_ratio_or_recorded_twice_is_refused(tmp_path: Path) -> None:
    doc = record_of(study(1), "run0")
    doc["groups"][0]["cells"][key("waitress")]["ratio"] = None
    with pytest.raises(RecordError, match=r"cells\[.*waitress.*\] has no positive ratio"):
        check_record(doc, "x.json")
    good = dumps(record_of(study(1), "run0"))
    (tmp_path / "a.json").write_text(good)
    (tmp_path / "b.json").write_text(good)
    with pytest.raises(RecordError, match="recorded twice"):
        read_folder(tmp_path)
    assert read_folder(tmp_path / "none") == []


def test_machines_sharing_a_hostname_are_told_apart_by_their_cpu() -> None:
    """VMs share hostnames (an Intel Xeon and an AMD EPYC VM were both ``vm``): a record's
    machine is its hostname with the CPU and caches it reported, so two CPU kinds under one
    name are two machines, and one name on one CPU kind stays one."""
    s = study(4, machines=2)
    for run in s.runs:
        run.hostname = "vm"
    records = [Record(None, record_of(s, f"run{i}")) for i in range(4)]
    assert {r.doc["host"]["machine"] for r in records} == {machine_id("vm")}
    by_cpu = {(r.doc["host"]["cpu_model"], r.machine) for r in records}
    assert len(by_cpu) == 2 and len({m for _, m in by_cpu}) == 2
    assert records[0].machine == records[2].machine != records[1].machine
    assert "vm" not in records[0].machine and len(records[0].machine) == 12
