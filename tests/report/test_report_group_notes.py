"""The line under an interleaved ranking says how many server processes each stack got, and
why a stack got more (issue 63: repetitions where the variance lives)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from pywebbench.report.tables import group_notes


def _ranking(
    processes: dict[str, int],
    grown: list[dict[str, Any]] | None,
    interpreters: dict[str, str] | None = None,
) -> Any:
    rows = []
    for label, k in processes.items():
        group: dict[str, Any] = {
            "group": "cpython3.11 | hello @ c64",
            "span": ["2026-12-07T03:00:00+00:00", "2026-12-07T03:02:00+00:00"],
            "stacks": len(processes),
            "processes": k,
            "rounds": 30,
            "df": 7,
            "reference": "geometric mean",
            "ratio": 1.0,
        }
        if grown:
            group["grown"] = grown
        rows.append(
            SimpleNamespace(
                stack=SimpleNamespace(label=label, interpreter=(interpreters or {}).get(label, "")),
                point=SimpleNamespace(group=group),
            )
        )
    return cast(Any, SimpleNamespace(ranked=rows))


def test_a_group_whose_stacks_got_the_same_processes_says_how_many() -> None:
    (note,) = group_notes(_ranking({"a": 3, "b": 3, "c": 3}, None))
    assert "3 stacks x 3 server processes," in note.summary
    assert "more processes" not in note.summary


def test_a_stack_given_more_processes_is_named_with_its_count_and_why() -> None:
    why = "the processes disagree 6.1x more than their slices' noise explains"
    grown = [{"stack": "b", "added": 2, "processes": 5, "why": why}]
    (note,) = group_notes(_ranking({"a": 3, "b": 5, "c": 3}, grown))
    assert "3 stacks x 3 server processes (b: 5)," in note.summary
    assert f"b got 2 more processes, as {why}." in note.summary


def test_an_interpreter_given_its_own_count_is_named_once_not_stack_by_stack() -> None:
    """``jit_replicates``: PyPy's stacks got 3 where CPython's got 4, and one PyPy stack got
    2 more where its processes disagreed."""
    processes = {"a": 4, "b": 4, "c": 4, "pa": 3, "pb": 5}
    family = {"a": "cpython", "b": "cpython", "c": "cpython", "pa": "pypy", "pb": "pypy"}
    (note,) = group_notes(_ranking(processes, None, family))
    assert "5 stacks x 4 server processes (pypy: 3, pb: 5)," in note.summary


def test_a_stack_whose_idle_processes_burn_cpu_is_named_with_what_they_took() -> None:
    ranking = _ranking({"a": 3, "b": 3}, None)
    for row in ranking.ranked:
        row.point.group["idle_burn"] = {"b": 0.031}
    (note,) = group_notes(ranking)
    assert "b's idle processes took 3.1% of a core each during the others' slices" in note.summary


def test_a_stack_whose_processes_spread_apart_is_named() -> None:
    """:func:`pywebbench.analysis.group.stacks_apart`: its intervals carry its own spread,
    and the note says so, so that its width is not read as the group's."""
    ranking = _ranking({"a": 4, "b": 4, "c": 4}, None)
    for row in ranking.ranked:
        row.point.group["apart"] = ["b"]
    (note,) = group_notes(ranking)
    assert (
        "b's processes spread apart from the other stacks' (an F test at 5%): its intervals "
        "carry its own spread." in note.summary
    )
    (plain,) = group_notes(_ranking({"a": 4, "b": 4, "c": 4}, None))
    assert "spread apart" not in plain.summary
