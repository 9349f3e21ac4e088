"""Which node measured which cell (``--executor ray``, docs/scale-out.md): the report's Nodes
section, and its warning when compared cells ran on different node types."""

from __future__ import annotations

from pywebbench.report.html import render_html
from pywebbench.report.markdown import render_markdown
from pywebbench.report.nodes import nodes_view
from pywebbench.report.view import ReportView
from pywebbench.store import Cell, Replicate, StackRow, Study

RUN = "20261123-160000-abcd"


def _stack(i: int, server: str) -> StackRow:
    name = f"cpython3.11/{server}/raw-wsgi"
    return StackRow(
        i, RUN, name, name, "cpython3.11", "cpython", "3.11", "", "/usr/bin/python3",
        server, "wsgi", "raw-wsgi", 1, 1,
    )  # fmt: skip


def _cell(i: int, stack_id: int) -> Cell:
    return Cell(i, RUN, stack_id, f"k{i}|hello|c16", i, "hello", "{}", "closed", 16, None,
                "c16", "ok")  # fmt: skip


def _rep(cell_id: int, n: int, node: str | None, cpu: str = "Xeon", cores: int = 2) -> Replicate:
    rep = Replicate(None, cell_id, n, "ok", "2026-11-23T16:00:00.000+00:00")
    if node is None:
        return rep
    rep.node, rep.node_id, rep.node_cpu_model, rep.node_cpus = (
        f"{node} (10.0.0.{n})",
        node * 4,
        cpu,
        cores,
    )
    return rep


def _study(*reps: Replicate) -> Study:
    stacks = [_stack(1, "gunicorn-sync"), _stack(2, "granian-wsgi")]
    return Study(stacks=stacks, cells=[_cell(1, 1), _cell(2, 2)], replicates=list(reps))


def _page(study: Study) -> tuple[str, str]:
    view = ReportView(title="t", generated_at="now", pywebbench_version="0")
    view.nodes = nodes_view(study)
    return render_markdown(view), render_html(view)


def test_each_cell_lists_its_nodes_and_one_node_type_gives_no_warning() -> None:
    view = nodes_view(_study(_rep(1, 0, "a"), _rep(1, 1, "a"), _rep(2, 0, "b")))
    assert view is not None and not view.warnings
    assert [(r.stack, r.nodes) for r in view.rows] == [
        ("cpython3.11/gunicorn-sync/raw-wsgi", ["a (10.0.0.0) #aaaa", "a (10.0.0.1) #aaaa"]),
        ("cpython3.11/granian-wsgi/raw-wsgi", ["b (10.0.0.0) #bbbb"]),
    ]
    assert view.rows[0].types == ["Xeon, 2 cores"]
    md, html = _page(_study(_rep(1, 0, "a"), _rep(2, 0, "b")))
    assert "## Nodes" in md and "| cpython3.11/granian-wsgi/raw-wsgi | hello | c16 |" in md
    assert '<section id="nodes"' in html and "b (10.0.0.0) #bbbb" in html


def test_compared_cells_on_different_node_types_are_warned_about() -> None:
    study = _study(_rep(1, 0, "a"), _rep(2, 0, "b", cpu="EPYC", cores=4))
    view = nodes_view(study)
    assert view is not None
    assert view.warnings == [
        "hello: the compared cells ran on different node types: EPYC, 4 cores "
        "(cpython3.11/granian-wsgi/raw-wsgi c16); Xeon, 2 cores "
        "(cpython3.11/gunicorn-sync/raw-wsgi c16). Differences between them may be the "
        "hardware's."
    ]
    md, html = _page(study)
    assert "> **Warning**: hello: the compared cells ran on different node types" in md
    assert "Warning: hello: the compared cells ran on different node types" in html


def test_a_local_run_records_no_node_and_shows_no_nodes_section() -> None:
    study = _study(_rep(1, 0, None), _rep(2, 0, None))
    assert nodes_view(study) is None
    md, html = _page(study)
    assert "## Nodes" not in md and 'id="nodes"' not in html
