"""The headline's wording and the safe JSON embedding of the HTML report."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from pywebbench.mdtext import md_text
from pywebbench.report.figures import text
from pywebbench.report.html import plotly_js, safe_json
from pywebbench.report.tables import headline


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
    assert two is not None and two["vs_second"] == "2.810×" and "worst" not in two
    three = headline(_ranked(3000.0, 2000.0, 1000.0))  # type: ignore[arg-type]
    assert three is not None and three["vs_second"] == "1.500×"
    assert three["worst"] == "stack2" and three["vs_worst"] == "3.000×"


def test_a_changed_profile_is_titled_a_custom_study() -> None:
    from pywebbench.report.build import _study_name
    from pywebbench.store import Run
    from pywebbench.study.config import resolve

    def run_of(overrides: dict[str, Any] | None) -> Run:
        config = resolve(None, overrides, profile="quick").model_dump(mode="json")
        return SimpleNamespace(profile="quick", config=config)  # type: ignore[return-value]

    assert _study_name(run_of(None)) == "quick study"
    assert _study_name(run_of({"load": {"seed": 7}})) == "quick study"  # run --runs: a seed each
    assert _study_name(run_of({"matrix": {"servers": ["uwsgi"]}})) == "custom study"
    assert _study_name(run_of({"load": {"duration_s": 1.0}})) == "custom study"
