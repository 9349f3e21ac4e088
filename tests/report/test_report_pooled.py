"""The report's section across runs (report/pooled.py, docs/pooling.md): several runs of a
study pooled cell by cell, with their hosts; one run said to be within-run only (no servers:
the cells' group figures are written as an interleaved run stores them)."""

from __future__ import annotations

import json
import math

import pytest
from pooled_runs import group_flags, key
from pywebbench.report.html import render_html
from pywebbench.report.markdown import render_markdown
from pywebbench.report.pooled import WITHIN_ONLY, pooled_view
from pywebbench.report.view import ReportView
from pywebbench.store import Cell, Run, StackRow, Study

STACKS = ["gunicorn-sync", "granian-wsgi", "waitress"]
XEON, EPYC = "Intel Xeon E5", "AMD EPYC 7B13"


def _run(i: int, cpu: str) -> Run:
    return Run(
        f"run{i}", f"2026-12-05T{i * 2:02d}:00:00.000+00:00",
        f"2026-12-05T{i * 2:02d}:30:00.000+00:00", "completed", "quick", f"host{i}", cpu, 2,
        "6.1", None, None, "Linux", "0", "3.11", "[0]", "[1]", "{}",
    )  # fmt: skip


def _study(runs: int, *, lacking: int | None = None) -> Study:
    """``runs`` runs of three stacks 1.3x and 1.1x apart, each run's levels moved by a
    fixed pattern of a few percent; run ``lacking`` has no waitress cell."""
    study = Study()
    wobble = [0.00, 0.02, -0.015, 0.01, -0.02, 0.005, 0.015]
    for r in range(runs):
        study.runs.append(_run(r, XEON if r % 2 == 0 else EPYC))
        names = [s for s in STACKS if not (r == lacking and s == "waitress")]
        base = {"gunicorn-sync": 0.0, "granian-wsgi": math.log(1.3), "waitress": math.log(1.1)}
        logs = {s: base[s] + (wobble[r] if s == "granian-wsgi" else 0.0) for s in names}
        for s in names:
            sid = len(study.stacks) + 1
            row = StackRow(sid, f"run{r}", key(s), key(s), "cpython3.11", "cpython", "3.11",
                           "", "/usr/bin/python3", s, "wsgi", "raw-wsgi", 1, 1)  # fmt: skip
            study.stacks.append(row)
            cell = Cell(sid, f"run{r}", sid, f"{s}|hello|c64", sid, "hello", "{}", "closed",
                        64, None, "c64", "ok")  # fmt: skip
            cell.flags_json = json.dumps({"group": group_flags(logs, s)})
            study.cells.append(cell)
    return study


def _page(study: Study) -> tuple[str, str]:
    view = ReportView(title="t", generated_at="now", pywebbench_version="0")
    view.pooled = pooled_view(study)
    return render_markdown(view), render_html(view)


def test_six_runs_from_two_hosts_are_pooled_cell_by_cell() -> None:
    view = pooled_view(_study(6))
    assert view is not None and view.runs == 6
    assert view.lines[0] == (
        f"6 runs from 2 host(s) over 10.5 hours: {XEON} (runs run0, run2, run4); "
        f"{EPYC} (runs run1, run3, run5)."
    )
    rows = {r.stack: r for r in view.rows}
    assert [r.stack for r in view.rows] == [key("granian-wsgi"), key("waitress"),
                                            key("gunicorn-sync")]  # fmt: skip
    granian = rows[key("granian-wsgi")]
    assert granian.versus == "geometric mean of 3"
    assert (granian.runs, granian.hosts) == ("6", "2")
    # granian/geomean: exp(2/3 log 1.3 - 1/3 log 1.1) = 1.1539, each run moved by 2/3 of
    # its wobble, which averages 0 over the 6 runs (equal weights: the plain mean)
    pooled = math.exp((2 * math.log(1.3) - math.log(1.1)) / 3)
    assert granian.ratio.startswith(f"{pooled:.3f}× [") and f"{pooled:.3f}" == "1.154"
    assert granian.tau not in ("–", "0%")  # the runs moved granian by +-2%
    low, high = (float(x) for x in granian.prediction.strip("[]").split(", "))
    assert low < pooled < high and high / low < 1.15
    # granian over waitress, the next stack down: 1.3 / 1.1 = 1.182
    assert granian.next_gap.startswith("1.18") and granian.next_gap.endswith(key("waitress"))
    assert rows[key("gunicorn-sync")].next_gap == "–"
    assert view.coverage.startswith("Leave one run out: ")
    assert " of 18 run ratios " in view.coverage
    md, html = _page(_study(6))
    assert "## Across runs" in md and "| hello | c64 | cpython3.11/granian-wsgi/raw-wsgi |" in md
    assert '<section id="pooled"' in html and "geometric mean of 3" in html
    assert '<a href="#pooled">' in html


def test_a_run_without_a_stack_pools_what_is_there_and_says_how_many_runs() -> None:
    """run3 lacks waitress: the geometric mean of its group is over two stacks, so its
    figures pool apart (and are counted), and waitress's cell pools 5 of 6 runs."""
    view = pooled_view(_study(6, lacking=3))
    assert view is not None
    rows = {r.stack: r for r in view.rows}
    assert rows[key("waitress")].runs == "5 of 6"
    assert rows[key("granian-wsgi")].runs == "5 of 6"
    assert any(line.startswith("2 run figures are to another reference") for line in view.lines)


def test_one_run_says_its_intervals_are_within_run_only() -> None:
    view = pooled_view(_study(1))
    assert view is not None and view.lines == [WITHIN_ONLY] and not view.rows
    md, html = _page(_study(1))
    assert WITHIN_ONLY in md
    assert "within-run only" in html and '<a href="#pooled">' not in html


def test_two_runs_pool_without_a_prediction_interval() -> None:
    view = pooled_view(_study(2))
    assert view is not None and view.rows
    assert all(r.prediction == "[n/a: 3 runs needed]" for r in view.rows)
    assert view.coverage == ""  # leave one out needs 4 runs of a cell


@pytest.mark.parametrize("runs", [3, 7])
def test_every_row_counts_every_run(runs: int) -> None:
    view = pooled_view(_study(runs))
    assert view is not None and {r.runs for r in view.rows} == {str(runs)}
