"""Ties as a rule (pywebbench.analysis.ties): neighbours are tied when the CI of their
ratio of medians contains 1; too few replicates give no interval, and no claimed tie."""

from __future__ import annotations

from pywebbench import formatting as fmt
from pywebbench.analysis.ties import ACROSS_GROUPS, group_neighbour, rank_ratio, ranked_gaps

FAST = [[2000.0, 2010.0, 1990.0], [2020.0, 1995.0, 2005.0], [1985.0, 2000.0, 2015.0]]
CLOSE = [[1990.0, 2012.0, 1980.0], [2008.0, 1999.0, 1994.0], [2003.0, 1987.0, 2011.0]]
SLOW = [[1000.0, 1010.0, 990.0], [1020.0, 995.0, 1005.0], [985.0, 1000.0, 1015.0]]


def test_neighbours_whose_ratio_ci_contains_one_are_tied() -> None:
    same = rank_ratio(FAST, CLOSE, name="a")
    assert same is not None and same.low is not None and same.high is not None
    assert same.low <= 1.0 <= same.high and same.tie
    double = rank_ratio(FAST, SLOW, name="b")
    assert double is not None and double.low is not None
    assert 1.9 < double.low <= double.ratio <= (double.high or 0) < 2.1 and not double.tie
    assert rank_ratio(FAST, CLOSE, name="a") == same  # seeded: reproducible


def test_one_replicate_has_no_ratio_ci_and_no_claimed_tie() -> None:
    r = rank_ratio([[2000.0, 2010.0]], [[1990.0, 2000.0]], name="x")
    assert r is not None and r.low is None and r.high is None and not r.tie
    assert fmt.estimate(r, r.why) == "1.005× [CI n/a: 1 replicate]"


def test_an_interleaved_groups_ratio_only_between_members_of_one_group() -> None:
    above = {"group": {"group": "g1", "span": ["a", "b"], "vs": {"s2": [1.5, 1.4, 1.6]}}}
    below = {"group": {"group": "g1", "span": ["a", "b"]}}
    got = group_neighbour(above, below, "s2")
    assert got is not None and (got.ratio, got.low, got.high) == (1.5, 1.4, 1.6)
    elsewhere = {"group": {"group": "g2", "span": ["a", "b"]}}
    assert group_neighbour(above, elsewhere, "s2") is None
    no_interval = {"group": {**above["group"], "vs": {"s2": [1.5, None, None]}}}
    got = group_neighbour(no_interval, below, "s2")
    assert got is not None and got.why == "no interval" and not got.tie


def test_a_gap_has_an_interval_only_from_the_same_rounds() -> None:
    """Within one group: the group's ratio. Between lone cells (replicates spread over the
    study in rounds): Welch's t. Between different groups, or a group's row and a lone one:
    the ratio alone, never a tie, even where the replicates' interval would contain 1."""
    g1 = {"group": {"group": "g1", "span": ["a", "b"], "vs": {"b": [1.01, 0.99, 1.03]}}}
    g1_below = {"group": {"group": "g1", "span": ["a", "b"], "vs": {}}}
    g2 = {"group": {"group": "g2", "span": ["c", "d"], "vs": {}}}
    lone: dict[str, object] = {}
    rps = [2000.0, 1999.0, 1998.0, 1997.0, 1996.0]
    gaps = ranked_gaps(
        rps,
        [FAST, CLOSE, CLOSE, CLOSE, CLOSE],
        [g1, g1_below, g2, lone, lone],
        ["a@c64", "b@c64", "c@c64", "d@c64", "e@c64"],
        ["a", "b", "c", "d", "e"],
        workload="hello",
    )
    first, same, across, beside, alone = gaps
    assert first is None
    assert same is not None and (same.ratio, same.low, same.high) == (1.01, 0.99, 1.03)
    for gap in (across, beside):  # g1 above g2; g2 above a lone cell
        assert gap is not None and (gap.low, gap.high, gap.why) == (None, None, ACROSS_GROUPS)
        assert not gap.tie
    assert alone is not None and alone.low is not None and alone.tie  # Welch's t
