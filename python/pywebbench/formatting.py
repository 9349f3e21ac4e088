"""How numbers read: the one formatter of ratios, intervals, rates, latencies, sizes and
percentages, for the console, the report (HTML and Markdown), ``compare`` and ``ab``.

It imports nothing of pywebbench, so every layer may use it. One rule per kind
(docs/report.md lists them):

- ratios: three decimals and "×" ("1.830×"); with their interval in brackets
  ("1.830× [1.712, 1.953]"), or why there is none ("1.830× [CI n/a: 1 replicate]");
- requests/s (and requests per CPU-second): whole numbers with thousands separators from 100
  up ("12,345"), one decimal below 100 ("42.5"); a median's interval
  "8,500–8,700 (±1.2%)";
- latencies: three significant digits, in milliseconds when the column names the unit
  ("0.123", "12.3", whole numbers with separators from 1,000 ms up), else with their unit
  ("850 us", "1.25 ms", "2.50 s");
- sizes: binary units (2^10, 2^20...), whole numbers from 100 up, one decimal below
  ("47.0 MiB", "850 B");
- percentages and half-widths: two significant digits ("0.012%", "1.5%", "±1.2%"), exactly
  "0%" for zero; a change carries its sign ("+0.46%", "-12%").

Rounding is Python's (round half to even on the binary value). A missing value is "–".
"""

from __future__ import annotations

import math
from typing import Protocol

#: What a missing value shows.
MISSING = "–"

#: The sign of a ratio: "1.830×".
TIMES = "×"


def _missing(x: float | None) -> bool:
    return x is None or math.isnan(x)


def significant(x: float, digits: int) -> str:
    """``x`` with ``digits`` significant digits, never in exponent notation."""
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    # Rounding may carry into a new digit (9.995 -> "10.00"): redo with the new magnitude.
    if decimals and len(text.replace("-", "").replace(".", "").lstrip("0")) > digits:
        text = f"{x:.{decimals - 1}f}"
    return text


def ratio(x: float | None) -> str:
    """A ratio: "1.830×"."""
    if x is None or math.isnan(x):
        return MISSING
    return f"{x:.3f}{TIMES}"


def ratio_range(low: float, high: float) -> str:
    """The range a set of ratios spans, "0.90–1.45×" (two decimals: a spread, not an
    estimate)."""
    return f"{low:.2f}–{high:.2f}{TIMES}"


def ratio_interval(low: float | None, high: float | None, why: str = "1 replicate") -> str:
    """A ratio's interval, "[1.712, 1.953]", or "[CI n/a: 1 replicate]" (``why``) when a
    bound is missing."""
    if _missing(low) or _missing(high):
        return f"[CI n/a: {why}]"
    return f"[{low:.3f}, {high:.3f}]"


def ratio_ci(
    x: float | None, low: float | None, high: float | None, why: str = "1 replicate"
) -> str:
    """A ratio with its interval: "1.830× [1.712, 1.953]", "1.830× [CI n/a: 1 replicate]";
    "–" without a ratio."""
    if x is None or math.isnan(x):
        return MISSING
    return f"{ratio(x)} {ratio_interval(low, high, why)}"


class RatioWithInterval(Protocol):
    """What :func:`estimate` reads: a ratio and its interval's bounds (None or NaN when
    there is none), e.g. :class:`pywebbench.analysis.ratio.RatioEstimate` or
    :class:`pywebbench.analysis.ties.RankRatio`."""

    @property
    def ratio(self) -> float: ...

    @property
    def low(self) -> float | None: ...

    @property
    def high(self) -> float | None: ...


def estimate(est: RatioWithInterval | None, why: str = "1 replicate") -> str:
    """:func:`ratio_ci` of an estimate: "1.830× [1.712, 1.953]"; "–" without one."""
    if est is None:
        return MISSING
    return ratio_ci(est.ratio, est.low, est.high, why)


def rate(x: float | None) -> str:
    """Requests per second (or per CPU-second), without the unit: "12,345", "42.5"."""
    if x is None or math.isnan(x):
        return MISSING
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def rate_interval(low: float, high: float, median: float, n: int) -> str:
    """A median's interval and half-width, "8,500–8,700 (±1.2%)"; "n/a (1 value)" when
    there is none (fewer than two values, or a NaN bound)."""
    if n < 2 or math.isnan(low) or math.isnan(high):
        return f"n/a ({n} value{'s' if n != 1 else ''})"
    half = (high - low) / 2 / abs(median) if median else math.nan
    return f"{rate(low)}–{rate(high)} ({half_width(half)})"


def latency_ms(x: float | None) -> str:
    """A latency in milliseconds, without the unit: "0.123", "12.3", "1,234"."""
    if x is None or math.isnan(x):
        return MISSING
    return f"{x:,.0f}" if abs(x) >= 999.5 else significant(x, 3)


def latency_us(us: float | None) -> str:
    """A latency given in microseconds, with its unit: "850 us", "1.25 ms", "2.50 s"."""
    if us is None or math.isnan(us):
        return MISSING
    if abs(us) >= 999_500:
        return f"{significant(us / 1e6, 3)} s"
    if abs(us) >= 999.5:
        return f"{significant(us / 1e3, 3)} ms"
    return f"{significant(us, 3)} us"


def seconds(x: float | None) -> str:
    """A duration in seconds, three significant digits: "1.23 s"."""
    if x is None or math.isnan(x):
        return MISSING
    return significant(x, 3) + " s"


def _size_number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 99.95 else f"{x:.1f}"


def mib(x: float | None) -> str:
    """A size in MiB, without the unit: "47.0", "1,024"."""
    if x is None or math.isnan(x):
        return MISSING
    return _size_number(x)


def kib(x: float | None) -> str:
    """A size in KiB, without the unit, e.g. a leak slope per 1,000 requests."""
    return mib(x)


def size(n: float | None) -> str:
    """A size given in bytes, with its binary unit: "850 B", "1.5 KiB", "47.0 MiB"."""
    if n is None or math.isnan(n):
        return MISSING
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1023.95:
            return f"{n:.0f} {unit}" if unit == "B" else f"{_size_number(n)} {unit}"
        n /= 1024
    return f"{_size_number(n)} GiB"


def size_change(n: float | None) -> str:
    """A signed change of size given in bytes: "+12.3 MiB", "-850 B"."""
    if n is None or math.isnan(n):
        return MISSING
    return ("+" if n >= 0 else "-") + size(abs(n))


def percent(fraction: float | None) -> str:
    """A fraction (0..1) as a percentage, two significant digits: "1.5%", "0%"."""
    if fraction is None or math.isnan(fraction):
        return MISSING
    if fraction == 0:
        return "0%"
    return significant(fraction * 100, 2) + "%"


def change(fraction: float | None) -> str:
    """A relative change (0.05 for 5% more) with its sign: "+5.0%", "-0.46%", "+0%"."""
    if fraction is None or math.isnan(fraction):
        return MISSING
    return ("-" if fraction < 0 else "+") + percent(abs(fraction))


def half_width(fraction: float | None) -> str:
    """An interval's half-width relative to its estimate: "±1.2%"."""
    if fraction is None or math.isnan(fraction):
        return MISSING
    return "±" + percent(fraction)


def count(x: float | None) -> str:
    """A count in whole units with thousands separators: "474,767"."""
    if x is None or math.isnan(x):
        return MISSING
    return f"{x:,.0f}"


def whole(x: float | None, unit: str = "") -> str:
    """A whole number: a robustness score ("85"), retained throughput ("97%", unit "%")."""
    if x is None or math.isnan(x):
        return MISSING
    return f"{x:.0f}{unit}"


def rank(position: int, tied: bool) -> str:
    """A rank as shown: "2", or "=2" when not significantly slower than the one above."""
    return f"={position}" if tied else str(position)
