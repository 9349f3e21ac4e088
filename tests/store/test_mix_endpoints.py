"""Per-endpoint figures of a study with a traffic mix (docs/mix.md), read from the stored
iterations (no table of their own) and exported: the JSON export's ``endpoints`` rows, the
CSV ``endpoints`` table, and an HdrHistogram log per endpoint."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from pwbmix import ENDPOINTS, shared_study
from pwbtest import command
from pywebbench.export.csv import export_csv
from pywebbench.export.json import export_json
from pywebbench.load.histogram import Histogram
from pywebbench.store import Store, study_from_dict
from pywebbench.store.endpoints import cell_endpoints, endpoint_rows


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_study(tmp_path_factory)


def test_each_measured_iteration_has_its_endpoints(store_path: Path) -> None:
    with Store(store_path, create=False) as store:
        study = store.load_study()
    (cell,) = study.cells
    measured = study.iterations_of(cell.id)
    assert len(measured) == 2
    rows = endpoint_rows(study)
    assert len(rows) == len(measured) * len(ENDPOINTS)
    for it in measured:
        mine = [r for r in rows if r["iteration_id"] == it.id]
        assert [r["endpoint"] for r in mine] == ENDPOINTS
        assert sum(r["requests"] for r in mine) == it.requests
        for r in mine:  # the histogram as the engine encoded it
            assert Histogram(r["latency_hist"]).count == r["requests"]
    figures = cell_endpoints(measured)
    merged = Histogram.merge_all(f.hist for f in figures)
    assert merged.count == sum(i.requests for i in measured)
    assert [f.weight_share for f in figures] == [0.5, 0.3, 0.15, 0.05]


def test_exports_carry_the_endpoints(store_path: Path, tmp_path: Path) -> None:
    with Store(store_path, create=False) as store:
        doc = json.loads(export_json(store))
        table = list(csv.DictReader(io.StringIO(export_csv(store, table="endpoints"))))
        study = store.load_study()
    assert doc["endpoints"] == endpoint_rows(study)
    assert len(study_from_dict(doc).iterations) == len(study.iterations)  # still imports
    assert [r["endpoint"] for r in table] == [r["endpoint"] for r in doc["endpoints"]]
    assert sum(int(r["requests"]) for r in table) == sum(
        i.requests for i in study.iterations if i.kind == "measured"
    )
    out = tmp_path / "hdr"
    proc = command(["export", "--format", "hdr", "-o", str(out), "--store", str(store_path)])
    assert proc.returncode == 0, proc.stderr
    logs = sorted(p.name for p in out.glob("*.hlog"))
    assert len(logs) == 1 + len(ENDPOINTS), logs  # the cell's, then one per endpoint
    for name in ("GET_items_id", "POST_search", "GET_missing"):
        (log,) = [p for p in out.glob(f"*_{name}.hlog")]
        intervals = [ln for ln in log.read_text().splitlines() if ln[:1].isdigit()]
        assert len(intervals) == 2  # one per measured iteration
