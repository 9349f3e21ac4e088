"""The comparison as one self-contained HTML page, in the report's look (its stylesheet).

Autoescaped Jinja2: every stack name and failure reason is shown as text.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from pywebbench import __version__
from pywebbench import formatting as fmt
from pywebbench.compare import Comparison
from pywebbench.compare.endpoints import grew_most
from pywebbench.compare.render import (
    counted,
    endpoints_text,
    grown_text,
    notes,
    rows,
    verdict_class,
)
from pywebbench.report.flame import diff_icicle
from pywebbench.report.html import plotly_js, safe_json

TEMPLATES = Path(__file__).resolve().parent.parent / "report" / "templates"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(result: Comparison) -> str:
    """The whole comparison page as a string."""
    template = _environment().get_template("compare.html.j2")
    table = [
        {**row, "cls": verdict_class(c.verdict)}
        for c, row in zip(result.comparisons, rows(result), strict=True)
    ]
    figures: dict[str, Any] = {}
    diffs = []
    for i, c in enumerate(result.comparisons):
        if not (c.grown and c.significant and c.flames):
            continue
        fig = diff_icicle(*c.flames, f"{c.label}: NEW against BASE")
        if fig is not None:
            figures[f"diff-{i}"] = fig
            diffs.append({"fig": f"diff-{i}", "label": c.label, "text": grown_text(c)})
    mixes = [
        {
            "label": c.label,
            "text": endpoints_text(c.endpoints),
            "rows": [
                {
                    "name": e.name,
                    "p50": fmt.estimate(e.p50),
                    "p99": fmt.estimate(e.p99),
                    "top": e is grew_most(c.endpoints),
                }
                for e in c.endpoints
            ],
        }
        for c in result.comparisons
        if c.endpoints
    ]
    return template.render(
        mixes=mixes,
        result=result,
        rows=table,
        notes=notes(result),
        counted=counted(result),
        css=(TEMPLATES / "report.css").read_text(encoding="utf-8"),
        version=__version__,
        diffs=diffs,
        plotly_js=plotly_js() if diffs else "",
        figures_json=safe_json(figures),
    )
