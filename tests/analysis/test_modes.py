"""Consistency across processes: the modes of a cell's replicates (pywebbench.analysis.modes)."""

from __future__ import annotations

import math

from pywebbench.analysis.modes import Mode, levels_disagree, modes


def test_the_issue_cell_is_two_modes_described_in_words() -> None:
    found = modes([2940.0, 1162.0, 3044.0])  # pypy3.9/gunicorn-gthread/flask cpu (issue 21)
    assert not found.consistent
    assert found.modes == (Mode(2992.0, 2), Mode(1162.0, 1))
    assert found.describe() == "inconsistent: 2 of 3 processes at ~2,990, 1 at ~1,160"
    assert found.to_list() == [[2992.0, 2], [1162.0, 1]]
    assert levels_disagree([2940.0, 1162.0, 3044.0])


def test_replicates_within_the_gap_are_one_mode() -> None:
    found = modes([3793.0, 3749.0, 3400.0])
    assert found.consistent and found.describe() == "consistent"
    assert found.modes == (Mode(3749.0, 3),)
    assert not levels_disagree([15816.0, 12065.0 * 1.1, 14000.0])


def test_the_gap_bounds_the_span_of_a_mode() -> None:
    assert not levels_disagree([1000.0, 1250.0])  # exactly the gap: one level
    assert levels_disagree([1000.0, 1251.0])
    assert levels_disagree([15816.0, 12065.0, 21304.0])  # the issue's granian-wsgi hello
    # each within 1.25x of the next, 1.42x end to end (pypy3.9/gunicorn-gthread/flask cpu,
    # a quick study of 2026-11-27): the lowest is 0.77x the others' median, two levels
    found = modes([2073.0, 1456.0, 1710.0])
    assert found.modes == (Mode(1583.0, 2), Mode(2073.0, 1))
    assert found.describe() == "inconsistent: 2 of 3 processes at ~1,580, 1 at ~2,070"


def test_nothing_to_compare_is_consistent() -> None:
    assert modes([]).consistent and modes([5.0]).consistent
    assert modes([math.nan, 10.0]).modes == (Mode(10.0, 1),)
