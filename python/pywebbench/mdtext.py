"""Text for Markdown: the one escaper of table cells and prose, and wire text as a code span.

Shared by the report's Markdown (:mod:`pywebbench.report.markdown` and the sections it
draws from other modules) and ``compare``'s Markdown, so both escape alike.
"""

from __future__ import annotations


def md_text(s: str) -> str:
    """Text safe inside a Markdown table cell: backslashes and pipes escaped, HTML shown
    literally, line breaks as spaces."""
    return (
        s.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def md_code(s: str, limit: int = 400) -> str:
    """Wire text (already escaped by the engine) as a code span, at most ``limit`` chars."""
    s = s if len(s) <= limit else s[: limit - 1] + "…"
    return "`" + s.replace("`", "'").replace("\r", " ").replace("\n", " ") + "`"
