"""The one formatter's rules (docs/report.md): one sign and precision per kind of number, the
same in the report, the console, ``compare`` and ``ab``; and that it stays at the bottom of
the package (it imports nothing of pywebbench)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from pywebbench import formatting as fmt
from pywebbench.analysis.ratio import RatioEstimate


@pytest.mark.parametrize(
    ("value", "shown"),
    [(12345.4, "12,345"), (100.0, "100"), (99.94, "99.9"), (42.25, "42.2"), (0.0, "0.0")],
)
def test_rate_rounding(value: float, shown: str) -> None:
    assert fmt.rate(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.12345, "0.123"),
        (1.2345, "1.23"),
        (12.345, "12.3"),
        (123.45, "123"),
        (999.6, "1,000"),
        (1234.5, "1,234"),
        (9.996, "10.0"),
        (0.0, "0"),
        (None, "–"),
    ],
)
def test_latency_three_significant_digits(value: float | None, shown: str) -> None:
    assert fmt.latency_ms(value) == shown


@pytest.mark.parametrize(
    ("us", "shown"),
    [(850.0, "850 us"), (999.6, "1.00 ms"), (1250.0, "1.25 ms"), (2.5e6, "2.50 s"), (None, "–")],
)
def test_latency_with_its_unit(us: float | None, shown: str) -> None:
    assert fmt.latency_us(us) == shown


def test_sizes_are_binary_and_say_their_unit() -> None:
    assert fmt.mib(45.26) == "45.3"
    assert fmt.mib(1536.4) == "1,536"
    assert fmt.size(49.3e6) == "47.0 MiB"  # 49.3e6 bytes = 47.0 MiB, not "47 MB"
    assert fmt.size(850) == "850 B"
    assert fmt.size(1536) == "1.5 KiB"
    assert fmt.size(3 * 2**30) == "3.0 GiB"
    assert fmt.size_change(-12.3 * 2**20) == "-12.3 MiB"


def test_ratios_have_one_sign_and_three_decimals() -> None:
    assert fmt.ratio(1.834) == "1.834×"
    assert fmt.ratio(None) == fmt.ratio(math.nan) == "–"
    assert fmt.ratio_ci(0.97, 0.9624, 0.978) == "0.970× [0.962, 0.978]"
    assert fmt.ratio_ci(1.01, None, None) == "1.010× [CI n/a: 1 replicate]"
    est = RatioEstimate(3.0, math.nan, math.nan, 1.0, 3.0)
    assert fmt.estimate(est) == "3.000× [CI n/a: 1 replicate]"
    assert fmt.estimate(None) == "–"


def test_percentages_and_half_widths_two_significant_digits() -> None:
    assert fmt.percent(0.0) == "0%"
    assert fmt.percent(0.00012) == "0.012%"
    assert fmt.percent(0.015) == "1.5%"
    assert fmt.percent(1.0) == "100%"
    assert fmt.change(0.0046) == "+0.46%"
    assert fmt.change(-0.12) == "-12%"
    assert fmt.half_width(0.005) == "±0.50%"


def test_a_medians_interval_or_why_there_is_none() -> None:
    assert fmt.rate_interval(8500.0, 8700.0, 8597.0, 4) == "8,500–8,700 (±1.2%)"
    assert fmt.rate_interval(math.nan, math.nan, 8597.0, 1) == "n/a (1 value)"


def test_rank_marks_a_tie() -> None:
    assert (fmt.rank(2, True), fmt.rank(2, False)) == ("=2", "2")


def test_the_formatter_imports_nothing_of_pywebbench() -> None:
    tree = ast.parse(Path(fmt.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + [
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    ]
    assert not [m for m in imported if m.split(".")[0] == "pywebbench"]


def test_a_range_of_ratios_is_two_decimals_with_one_times_sign() -> None:
    assert fmt.ratio_range(0.58, 1.0504) == "0.58–1.05×"
