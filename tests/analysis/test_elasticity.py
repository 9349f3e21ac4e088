"""The elasticity of figures to the core's speed (pywebbench.analysis.elasticity), on plain
(core rate, figure) points: the slope the groups share, each centred on its own level."""

from __future__ import annotations

import pytest
from pywebbench.analysis.elasticity import (
    ELASTICITY_BOUNDS,
    UNIDENTIFIED_ELASTICITY,
    at_one_speed,
    centred_logs,
    pooled_slope,
    speed_factor,
)

RATES = (0.8e6, 1.0e6, 1.3e6)


def _group(
    level: float, slope: float, rates: tuple[float, ...] = RATES
) -> list[tuple[float, float]]:
    return [(r, level * (r / 1e6) ** slope) for r in rates]


def test_groups_at_different_levels_share_one_slope() -> None:
    groups = [_group(level, 0.6) for level in (2000.0, 9000.0, 400.0)]
    assert pooled_slope(groups) == pytest.approx(0.6)
    xs, ys = centred_logs(groups)
    assert len(xs) == len(ys) == 9
    assert sum(xs) == pytest.approx(0.0, abs=1e-12)


def test_a_slope_the_points_cannot_show_is_not_claimed() -> None:
    assert pooled_slope([_group(1000.0, 0.6) for _ in range(2)]) == UNIDENTIFIED_ELASTICITY
    flat = [_group(1000.0, 0.6, (1.0e6, 1.01e6, 0.99e6)) for _ in range(4)]
    assert pooled_slope(flat) == UNIDENTIFIED_ELASTICITY
    assert pooled_slope([[(1.0e6, 5.0)] for _ in range(9)]) == UNIDENTIFIED_ELASTICITY


def test_the_slope_is_kept_within_its_bounds() -> None:
    assert pooled_slope([_group(1000.0, 3.0) for _ in range(3)]) == ELASTICITY_BOUNDS[1]
    assert pooled_slope([_group(1000.0, -1.0) for _ in range(3)]) == ELASTICITY_BOUNDS[0]


def test_figures_are_scaled_to_the_reference_rate_all_together_or_not_at_all() -> None:
    # a server that followed its core: half the core rate, half the req/s
    assert at_one_speed([1000.0, 500.0], [2.0e6, 1.0e6], 1.5e6) == [750.0, 750.0]
    assert at_one_speed([1000.0, 500.0], [2.0e6, None], 1.5e6) == [1000.0, 500.0]
    assert at_one_speed([1000.0, 500.0], [2.0e6, 1.0e6], None) == [1000.0, 500.0]


def test_a_time_per_unit_of_work_follows_the_inverse_factor() -> None:
    """req/s on a core at 0.8 of the reference read 1.25x; CPU per request there read 0.8x,
    so that their product (the share of a core used) stays as measured."""
    assert speed_factor(0.8, 1.0) == pytest.approx(1.25)
    assert speed_factor(0.8, 1.0, -1.0) == pytest.approx(0.8)
    assert speed_factor(0.8, 1.0, 0.5) * speed_factor(0.8, 1.0, -0.5) == pytest.approx(1.0)
    assert speed_factor(0.8, 1.0, 0.0) == 1.0  # an unidentified elasticity: as measured
