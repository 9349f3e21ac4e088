"""Honest comparisons in the report (docs/report.md): ties marked in the ranking, the
headline's CI, and "n/a" instead of a zero-width interval when there are too few values
(the rule itself: tests/analysis/test_ties.py)."""

from __future__ import annotations

from pywebbench.analysis.stats import summarize
from pywebbench.report.build import _rank
from pywebbench.report.markdown import render_markdown
from pywebbench.report.tables import headline, ranking_table, rps_interval
from pywebbench.report.view import Estimate, PointView, ReportView, StackView, WorkloadView


def _stack(interpreter: str, server: str) -> StackView:
    return StackView(
        key=f"{interpreter}/{server}/flask",
        label=f"{interpreter} · {server} · flask",
        interpreter=interpreter,
        interpreter_version="3",
        interpreter_build="",
        server=server,
        interface="wsgi",
        framework="flask",
        workers=1,
        threads=1,
    )


def _point(stack: StackView, replicates: list[list[float]]) -> PointView:
    values = [v for r in replicates for v in r]
    s = summarize(values)
    return PointView(
        stack_key=stack.key,
        workload="hello",
        load_point="c64",
        load_model="closed",
        connections=64,
        rate=None,
        rps=Estimate(s.median, s.ci_low, s.ci_high, s.n),
        rps_by_replicate=replicates,
    )


FAST = [[2000.0, 2010.0, 1990.0], [2020.0, 1995.0, 2005.0], [1985.0, 2000.0, 2015.0]]
CLOSE = [[1990.0, 2012.0, 1980.0], [2008.0, 1999.0, 1994.0], [2003.0, 1987.0, 2011.0]]
SLOW = [[1000.0, 1010.0, 990.0], [1020.0, 995.0, 1005.0], [985.0, 1000.0, 1015.0]]


def test_one_value_has_no_median_ci() -> None:
    s = summarize([8597.0])
    assert rps_interval(Estimate(s.median, s.ci_low, s.ci_high, s.n)) == "n/a (1 value)"
    assert rps_interval(Estimate(8597.0, 8500.0, 8700.0, 4)) == "8,500–8,700 (±1.2%)"


def test_ranking_marks_ties_and_the_headline_carries_its_ci() -> None:
    a, b, c = (
        _stack("pypy3.9", "gunicorn"),
        _stack("cpython3.11", "gunicorn"),
        _stack("cpython3.11", "uwsgi"),
    )
    ranking = _rank(
        "hello", "peak", [(a, _point(a, FAST)), (b, _point(b, CLOSE)), (c, _point(c, SLOW))]
    )
    table = ranking_table(ranking)
    ranks = [row.cells["rank"].text for row in table.rows]
    assert ranks == ["1", "=2", "3"]  # CLOSE is within noise of FAST; SLOW is half
    assert "tied with #1" in table.rows[1].notes
    assert table.rows[2].cells["vs_above"].text == "1.999× [1.980, 2.008]"
    h = headline(ranking)
    assert h is not None and h["vs_second_ci"].startswith("95% CI ")
    view = ReportView(
        title="t",
        generated_at="now",
        pywebbench_version="0",
        stacks={s.key: s for s in (a, b, c)},
        workloads=[
            WorkloadView("hello", points=[r.point for r in ranking.rows], rankings=[ranking])
        ],
    )
    md = render_markdown(view)
    assert f"the runner-up ({b.label}, {h['vs_second_ci']}" in md
    assert "| =2 | cpython3.11 · gunicorn · flask |" in md
    assert "a tie: the CI contains 1" in md


def test_memory_table_reads_negative_intervals_without_a_double_dash() -> None:
    from pywebbench.report.tables import memory_table
    from pywebbench.report.view import MemoryView

    a = _stack("pypy3.9", "granian")
    p = _point(a, FAST)
    p.memory = MemoryView(260.0, 272.0, 271.0, -59.0, (-127.0, -3.8), 100)
    table = memory_table(_rank("hello", "peak", [(a, p)]))
    assert table is not None
    cells = table.rows[0].cells
    assert [cells[k].text for k in ("startup", "warm", "end", "leak", "leak_ci")] == [
        "260",
        "272",
        "271",
        "-59.0",
        "-127 to -3.8",
    ]
