"""The console of ``pywebbench run`` for cells loaded with a traffic mix (docs/mix.md): after the
ranked tables, a table per workload and load point of each stack's endpoints (share of the
requests sent, p50, p99, errors), from stored iterations made up here (no server, no load)."""

from __future__ import annotations

import json

from pywebbench.load.histogram import Histogram
from pywebbench.run.console import endpoint_tables, summary_tables
from pywebbench.store import Cell, Iteration, StackRow, Study
from rich.console import Console

RUN = "20261206-120000-abcd"
STAMP = "2026-12-06T12:00:00.000+00:00"


def _stack(i: int, server: str) -> StackRow:
    name = f"cpython3.11/{server}/app-mixapp.app"
    return StackRow(
        i, RUN, name, name, "cpython3.11", "cpython", "3.11", "", "/usr/bin/python3",
        server, "wsgi", "app-mixapp.app", 1, 1,
    )  # fmt: skip


def _cell(i: int, stack_id: int, workload: str) -> Cell:
    return Cell(i, RUN, stack_id, f"k{i}|{workload}|c4", i, workload, "{}", "closed", 4, None,
                "c4", "ok")  # fmt: skip


def _endpoint(name: str, share: float, requests: int, errors: int, us: int) -> dict[str, object]:
    """An endpoint as the engine gives it: its latencies all ``us`` (p99 twice that)."""
    values = [us] * (requests - requests // 10) + [2 * us] * (requests // 10)
    hist = Histogram.from_values(values)
    return {
        "name": name,
        "weight": share * 100,
        "weight_share": share,
        "requests": requests,
        "errors": errors,
        "error_classes": {"check_failed": errors} if errors else {},
        "timeouts": 0,
        "status_counts": {"200": requests},
        "latency": {"hist": hist.encoded, "summary": hist.summary().model_dump()},
    }


def _iteration(i: int, cell_id: int, endpoints: list[dict[str, object]]) -> Iteration:
    requests = sum(int(str(e["requests"])) for e in endpoints)
    doc = {"endpoints": endpoints} if endpoints else {}
    return Iteration(
        i, cell_id, 0, "measured", 0, STAMP, 1.0, requests, 0, 0, 0, float(requests),
        latency_p50_us=1000.0, latency_p99_us=2000.0, result_json=json.dumps(doc),
    )  # fmt: skip


def _study() -> Study:
    fast = [_endpoint("GET /", 0.75, 600, 0, 800), _endpoint("POST /search", 0.25, 200, 3, 1200)]
    slow = [_endpoint("GET /", 0.75, 300, 0, 1500), _endpoint("POST /search", 0.25, 100, 0, 2000)]
    return Study(
        stacks=[_stack(1, "granian-wsgi"), _stack(2, "gunicorn-sync")],
        cells=[_cell(1, 1, "mix:mix.toml"), _cell(2, 2, "mix:mix.toml"), _cell(3, 1, "path:/")],
        iterations=[_iteration(1, 1, fast), _iteration(2, 2, slow), _iteration(3, 3, [])],
    )


def _text(*tables: object) -> str:
    console = Console(record=True, width=160)
    for t in tables:
        console.print(t)
    return console.export_text()


def test_a_table_of_each_stacks_endpoints_per_point() -> None:
    (table,) = endpoint_tables(_study())  # the path:/ cell has no mix: no table of its own
    said = _text(table)
    rows = [line.split("│")[1:-1] for line in said.splitlines() if line.count("│") > 2]
    assert [str(c.header) for c in table.columns] == [
        "stack",
        "endpoint",
        "share",
        "p50",
        "p99",
        "errors",
    ]
    assert [[c.strip() for c in row] for row in rows] == [
        ["cpython3.11/granian-wsgi/app-mixapp.app", "GET /", "75%", "800 us", "1.60 ms", "0"],
        ["", "POST /search", "25%", "1.20 ms", "2.40 ms", "3"],
        ["cpython3.11/gunicorn-sync/app-mixapp.app", "GET /", "75%", "1.50 ms", "3.00 ms", "0"],
        ["", "POST /search", "25%", "2.00 ms", "4.00 ms", "0"],
    ]
    assert "mix:mix.toml @ c4: endpoints of the mix (measured iterations)" in said
    assert "share: of the requests sent" in said


def test_the_summary_prints_it_after_the_ranked_tables() -> None:
    titles = [str(t.title) for t in summary_tables(_study())]
    assert titles == [
        "mix:mix.toml @ c4: ranked by requests/s (median, 95% CI)",
        "path:/ @ c4: ranked by requests/s (median, 95% CI)",
        "mix:mix.toml @ c4: endpoints of the mix (measured iterations)",
    ]


def test_a_study_without_a_mix_has_no_endpoint_table() -> None:
    study = _study()
    study.cells = [c for c in study.cells if c.workload == "path:/"]
    assert endpoint_tables(study) == []
