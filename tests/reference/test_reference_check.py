"""A user's run against the published table (analysis.pooling.check_run,
reference/check.py): how many of its ratios fall inside the table's prediction intervals,
which fall outside and by how much, what could not be compared (a run without a stack), and
one line when there is no table yet."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pooled_runs import key, study
from pywebbench.analysis.pooling import check_run
from pywebbench.reference.check import against_published, lines
from pywebbench.reference.estimates import study_estimates
from pywebbench.reference.record import Record, dumps, record_of
from pywebbench.reference.table import build
from pywebbench.store import Study


def _records(s: Study, *runs: str) -> list[Record]:
    return [Record(None, record_of(s, r)) for r in runs]


def _user(s: Study, run: str) -> list:  # type: ignore[type-arg]
    return [e for e in study_estimates(s).reference if e.run == run]


def test_a_run_like_the_others_falls_inside_every_interval() -> None:
    s = study(7)
    table = build(_records(s, *(f"run{i}" for i in range(6))))
    got = check_run(table.rows, _user(s, "run6"))
    assert (got.checked, got.inside, got.misses) == (6, 6, [])
    assert (got.other_reference, got.without_interval, got.not_in_table, got.lacking) == (
        0, 0, 0, [],
    )  # fmt: skip


def test_a_run_that_lands_elsewhere_is_named_with_how_far_outside() -> None:
    """run6's granian level is 30% higher: granian's ratio to the geometric mean rises by
    1.3^(2/3), the other two stacks' fall by 1.3^(-1/3), in both workloads: all 6 outside."""
    s = study(7, shift={6: math.log(1.3)})
    table = build(_records(s, *(f"run{i}" for i in range(6))))
    got = check_run(table.rows, _user(s, "run6"))
    assert (got.checked, got.inside, len(got.misses)) == (6, 0, 6)
    granian = next(m for m in got.misses if m.key.stack == key("granian-wsgi"))
    row = next(p for p in table.rows if p.key == granian.key)
    assert granian.off == pytest.approx(granian.ratio / row.pred_high - 1.0)
    assert granian.off > 0.1
    sync = next(m for m in got.misses if m.key.stack == key("gunicorn-sync"))
    assert sync.off < -0.05  # below the interval: a negative miss
    said = lines(_user(s, "run6"), _records(s, *(f"run{i}" for i in range(6))))
    assert said[0].startswith("Against the published table (docs/reference-table.md: 6 runs, "
                              "2 machine(s), bar met): 0 of 6 ratios fall inside")  # fmt: skip
    assert said[1].startswith("  outside: cpython3.11/granian-wsgi/raw-wsgi @ ")
    assert " and 1 more." in said[1] and len(said) == 2


def test_a_run_missing_a_stack_is_compared_over_the_stacks_it_has() -> None:
    """run6 lacks waitress: the geometric mean of its groups is over two stacks, another
    reference than the table's. Held against the table itself, nothing compares (4 ratios
    to another reference, the table's 2 waitress cells lacking); the lines re-express the
    table's runs over the same two stacks, where run6's 4 ratios fall inside, and a run
    that lands elsewhere falls outside."""
    s = study(7, lacking=6)
    records = _records(s, *(f"run{i}" for i in range(6)))
    table = build(records)
    got = check_run(table.rows, _user(s, "run6"))
    assert (got.checked, got.inside, got.other_reference, got.not_in_table) == (0, 0, 4, 0)
    assert [k.stack for k in got.lacking] == [key("waitress")] * 2
    assert lines(_user(s, "run6"), records) == [
        "Against the published table (docs/reference-table.md: 6 runs, 2 machine(s), bar "
        "met): 4 of 4 ratios fall inside its 95% prediction intervals.",
        "  4 ratios are to the geometric mean of the stacks this run has (it lacks some of "
        "the table's): held against the table's runs re-expressed over the same stacks.",
        "  2 of the table's cells are not in this run.",
    ]
    # granian 30% up in a run without waitress: granian / sqrt(granian * sync) is
    # sqrt(1.3 * 1.3) = 1.3 where the table's runs re-expressed give sqrt(1.3) = 1.14
    moved = study(7, lacking=6, shift={6: math.log(1.3)})
    said = lines(_user(moved, "run6"), _records(moved, *(f"run{i}" for i in range(6))))
    assert "0 of 4 ratios fall inside" in said[0]
    assert said[1].startswith("  outside: cpython3.11/granian-wsgi/raw-wsgi @ hello c64 "
                              "1.310× against [1.1")  # fmt: skip
    assert "(+11%)" in said[1] and "(-10%)" in said[1]


def test_a_table_missing_a_stack_compares_what_it_has() -> None:
    """The table's run2 lacks waitress (its figures pool apart); a full run compares with
    the 5 runs of the full groups: every ratio inside."""
    s = study(7, lacking=2)
    table = build(_records(s, *(f"run{i}" for i in range(6))))
    got = check_run(table.rows, _user(s, "run6"))
    assert (got.checked, got.inside, got.other_reference) == (6, 6, 0)


def test_two_runs_give_no_prediction_interval_and_fewer_say_there_is_no_table() -> None:
    s = study(3)
    user = _user(s, "run2")
    assert lines(user, _records(s, "run0")) == [
        "No published table yet to compare with: reference/runs holds 1 comparable run(s) "
        "(docs/reference-table.md)."
    ]
    said = lines(user, _records(s, "run0", "run1"))
    assert "none of this run's ratios has a prediction interval" in said[0]
    assert said[1] == "  not compared: 6 ratio(s) of cells the table has from fewer than 3 runs."
    # the run's own record is not part of the table it is held against
    assert lines(user, _records(s, "run0", "run2"))[0].startswith("No published table yet")
    assert lines([], _records(s, "run0", "run1")) == []


def test_the_folder_is_read_and_an_empty_one_is_one_line(tmp_path: Path) -> None:
    s = study(5)
    user = _user(s, "run4")
    assert against_published(user, tmp_path / "none") == [
        "No published table yet to compare with: reference/runs holds 0 comparable run(s) "
        "(docs/reference-table.md)."
    ]
    for r in ("run0", "run1", "run2", "run3"):
        (tmp_path / f"{r}.json").write_text(dumps(record_of(s, r)))
    said = against_published(user, tmp_path)
    assert said == [
        "Against the published table (docs/reference-table.md: 4 runs, 2 machine(s), "
        "provisional): 6 of 6 ratios fall inside its 95% prediction intervals."
    ]


def test_the_end_of_a_run_says_it_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pywebbench run``'s last lines (commands/run.py): none for a run without groups, one
    when there is no table, one naming the file when a record is bad."""
    import pywebbench.reference.check as check
    from pywebbench.reference.check import latest_run_lines as at_the_end

    s = study(1)
    monkeypatch.setattr(check, "RECORDS", tmp_path)
    assert at_the_end(s) == [
        "No published table yet to compare with: reference/runs holds 0 comparable run(s) "
        "(docs/reference-table.md)."
    ]
    (tmp_path / "broken.json").write_text("{")
    said = at_the_end(s)
    assert len(said) == 1 and said[0].startswith("The published table cannot be read: ")
    assert "broken.json: not JSON" in said[0]
    for c in s.cells:
        c.flags_json = "{}"
    assert at_the_end(s) == []


def test_the_report_shows_the_latest_run_against_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's "Across runs" section ends with the same comparison, naming the run
    when the report covers several."""
    import pywebbench.reference.check as check
    from pywebbench.report.html import render_html
    from pywebbench.report.markdown import render_markdown
    from pywebbench.report.pooled import pooled_view, published_lines
    from pywebbench.report.view import ReportView

    s = study(7)
    for r in ("run0", "run1", "run2", "run3"):
        (tmp_path / f"{r}.json").write_text(dumps(record_of(s, r)))
    monkeypatch.setattr(check, "RECORDS", tmp_path)
    mine = Study(runs=s.runs[6:], stacks=s.stacks, cells=[c for c in s.cells if c.run_id == "run6"])
    said = published_lines(mine)
    assert said == [
        "Against the published table (docs/reference-table.md: 4 runs, 2 machine(s), "
        "provisional): 6 of 6 ratios fall inside its 95% prediction intervals."
    ]
    assert published_lines(s)[0].startswith("Run run6: against the published table (")
    view = ReportView(title="t", generated_at="now", pywebbench_version="0")
    view.pooled = pooled_view(mine)
    assert view.pooled is not None
    view.pooled.published = said
    assert said[0] in render_markdown(view) and "6 of 6 ratios fall inside" in render_html(view)


def test_a_run_on_a_cpu_the_table_never_saw_says_so() -> None:
    """Stacks' ratios move between CPU kinds: a run on an AMD EPYC held against a table of
    Intel Xeon runs says its CPU is not the table's; a run on the table's CPU does not."""
    s = study(7, machines=1)
    records = _records(s, *(f"run{i}" for i in range(6)))
    assert "another CPU" not in " ".join(lines(_user(s, "run6"), records))
    next(r for r in s.runs if r.id == "run6").cpu_model = "AMD EPYC 7B13"
    said = lines(_user(s, "run6"), records)
    assert said[0].startswith("Against the published table (docs/reference-table.md: 6 runs, "
                              "1 machine(s), one machine so far)")  # fmt: skip
    assert said[1] == (
        "  The table's runs are all from another CPU (Intel Xeon E5) than this run's (AMD "
        "EPYC 7B13): stacks' ratios move between CPU kinds, so a ratio outside may be the "
        "machine's and not this run's."
    )
