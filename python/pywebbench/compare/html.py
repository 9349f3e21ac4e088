"""The comparison as one self-contained HTML page, in the report's look (its stylesheet).

Autoescaped Jinja2: every stack name and failure reason is shown as text.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

from pywebbench import __version__
from pywebbench.compare import Comparison
from pywebbench.compare.render import counted, notes, rows, verdict_class

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
    return template.render(
        result=result,
        rows=table,
        notes=notes(result),
        counted=counted(result),
        css=(TEMPLATES / "report.css").read_text(encoding="utf-8"),
        version=__version__,
    )
