"""Number formatting rules (docs/report.md) and the safe JSON embedding of the HTML report."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from pywebbench.mdtext import md_text
from pywebbench.report.figures import text
from pywebbench.report.html import plotly_js, safe_json
from pywebbench.report.tables import fmt_mib, fmt_ms, fmt_pct, fmt_ratio, fmt_rps, headline


@pytest.mark.parametrize(
    ("value", "shown"),
    [(12345.4, "12,345"), (100.0, "100"), (99.94, "99.9"), (42.25, "42.2"), (0.0, "0.0")],
)
def test_rps_rounding(value: float, shown: str) -> None:
    assert fmt_rps(value) == shown


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
    assert fmt_ms(value) == shown


def test_memory_ratio_and_error_rate() -> None:
    assert fmt_mib(45.26) == "45.3"
    assert fmt_mib(1536.4) == "1,536"
    assert fmt_ratio(1.834) == "1.83×"
    assert fmt_pct(0.0) == "0%"
    assert fmt_pct(0.00012) == "0.012%"
    assert fmt_pct(0.015) == "1.5%"
    assert fmt_pct(1.0) == "100%"


def test_safe_json_cannot_close_a_script_element() -> None:
    evil = {"name": '</script><script>alert("x")</script>', "sep": "\u2028", "amp": "a&b"}
    embedded = safe_json(evil)
    assert "<" not in embedded and ">" not in embedded and "&" not in embedded
    assert json.loads(embedded) == evil


def test_plot_text_and_markdown_show_markup_as_text() -> None:
    assert text('<b>x</b> & "y"') == '&lt;b&gt;x&lt;/b&gt; &amp; "y"'
    assert md_text("a|<script>") == "a\\|&lt;script&gt;"


def test_plotly_bundle_is_embeddable() -> None:
    js = plotly_js()
    assert len(js) > 1_000_000 and "</script" not in js.lower()


def _ranked(*rps: float) -> SimpleNamespace:
    entries = [
        SimpleNamespace(
            stack=SimpleNamespace(label=f"stack{n}"),
            point=SimpleNamespace(rps=SimpleNamespace(median=value), load_point="c64", p99_ms=1.0),
            tied=False,
            vs_above=None,
        )
        for n, value in enumerate(rps)
    ]
    return SimpleNamespace(ranked=entries)


def test_headline_names_the_slowest_only_beyond_the_runner_up() -> None:
    two = headline(_ranked(2810.0, 1000.0))  # type: ignore[arg-type]
    assert two is not None and two["vs_second"] == "2.81×" and "worst" not in two
    three = headline(_ranked(3000.0, 2000.0, 1000.0))  # type: ignore[arg-type]
    assert three is not None and three["vs_second"] == "1.50×"
    assert three["worst"] == "stack2" and three["vs_worst"] == "3.00×"


def test_a_changed_profile_is_titled_a_custom_study() -> None:
    from pywebbench.report.build import _study_name
    from pywebbench.store import Run
    from pywebbench.study.config import resolve

    def run_of(overrides: dict[str, Any] | None) -> Run:
        config = resolve(None, overrides, profile="quick").model_dump(mode="json")
        return SimpleNamespace(profile="quick", config=config)  # type: ignore[return-value]

    assert _study_name(run_of(None)) == "quick study"
    assert _study_name(run_of({"matrix": {"servers": ["uwsgi"]}})) == "custom study"
    assert _study_name(run_of({"load": {"duration_s": 1.0}})) == "custom study"


def test_console_memory_is_mib_labelled_as_such() -> None:
    from pywebbench.run.console import _fmt_bytes

    assert _fmt_bytes(49.3e6) == "47.0"  # 49.3e6 bytes = 47.0 MiB, not "47 MB"
    assert _fmt_bytes(None) == "-"
