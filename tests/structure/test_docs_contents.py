"""A docs page over 400 lines opens with a table of contents whose links reach its headings
(issue 66)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
LONG = 400


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def contents_links(text: str) -> list[str] | None:
    """The anchors listed under a "Contents" heading, or None when there is none."""
    match = re.search(
        r"^#+ (?:Table of )?Contents\s*\n((?:\s*\n|\s*[-*] .*\n)+)", text, re.M | re.I
    )
    if match is None:
        return None
    return re.findall(r"\]\(#([^)]+)\)", match.group(1))


def headings(text: str) -> set[str]:
    body = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # no '#' comments of code
    return {slug(h) for h in re.findall(r"^#{2,6} (.+)$", body, re.M)}


LONG_PAGES = sorted(
    p for p in DOCS.rglob("*.md") if len(p.read_text(encoding="utf-8").splitlines()) > LONG
)


def test_the_rule_has_pages_to_check() -> None:
    assert LONG_PAGES, f"no docs page over {LONG} lines: is DOCS right?"


@pytest.mark.parametrize("page", LONG_PAGES, ids=lambda p: p.name)
def test_a_long_page_has_contents_that_reach_its_headings(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    links = contents_links(text)
    assert links, f"{page.name}: over {LONG} lines and no '## Contents' list of links"
    missing = [a for a in links if a not in headings(text)]
    assert missing == [], f"{page.name}: contents links to no heading: {missing}"
