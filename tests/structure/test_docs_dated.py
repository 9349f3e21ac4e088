"""A docs page states at most one dated figure, and that paragraph links to its history in
docs/measurements.md; every other dated measurement lives there (issue 66, item 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
# The pages where dates belong: the measurements themselves.
EXEMPT = {"measurements.md"}

MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
DATE = re.compile(
    rf"\b20\d\d-[01]\d-[0-3]\d\b"  # 2026-11-27
    rf"|\b[0-3]?\d {MONTH} 20\d\d\b"  # 27 Nov 2026
    rf"|\b{MONTH} [0-3]?\d,? 20\d\d\b"  # Nov 27, 2026
)


def paragraphs(text: str) -> list[str]:
    """The page's blank-line separated blocks, without fenced code, code spans or link
    targets: a date in an example, a schema or the CLI's output is not a measurement."""
    prose = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    blocks = re.split(r"\n\s*\n", prose)
    return [b for b in blocks if b.strip()]


def links_measurements(block: str) -> bool:
    return (
        re.search(r"\]\((?:\.\./docs/|docs/|\./)?measurements\.md(?:#[^)]*)?\)", block) is not None
    )


def dated(block: str) -> bool:
    return DATE.search(re.sub(r"\]\([^)]*\)", "]", block)) is not None


PAGES = sorted(p for p in DOCS.rglob("*.md") if p.name not in EXEMPT)


def test_the_rule_has_pages_to_check() -> None:
    assert len(PAGES) > 10, f"only {len(PAGES)} docs pages: is DOCS right?"


def test_the_rule_sees_a_history_and_spares_an_example() -> None:
    history = "Until 2026-12-05 the rule was X.\n\nRun A read 3.1x on 27 Nov 2026.\n"
    assert [dated(b) for b in paragraphs(history)] == [True, True]
    example = "Ids look like `2026-11-21T15:30:12`.\n\n```\nrun 2026-12-06 done\n```\n"
    assert not any(dated(b) for b in paragraphs(example))
    current = "It takes 13 minutes (2026-12-05): [history](measurements.md#ab-2026-12-05).\n"
    assert [links_measurements(b) for b in paragraphs(current)] == [True]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_states_one_current_figure_and_links_its_history(page: Path) -> None:
    found = [b for b in paragraphs(page.read_text(encoding="utf-8")) if dated(b)]
    unlinked = [b.strip()[:100] for b in found if not links_measurements(b)]
    assert unlinked == [], (
        f"{page.name}: a dated paragraph with no link to measurements.md; move the "
        f"measurement there and leave the current figure and a link: {unlinked}"
    )
    assert len(found) <= 1, (
        f"{page.name}: {len(found)} dated paragraphs; a page keeps one current figure, its "
        f"history goes to measurements.md: {[b.strip()[:60] for b in found]}"
    )
