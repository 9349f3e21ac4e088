"""Every relative link in README.md and docs/ reaches a file, and its anchor a heading of that
file; so do the docs/*.md#anchor references in the code's help texts and the tests (issue 66)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MENTION = re.compile(r"\bdocs/([\w.-]+\.md)#([\w-]+)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """A page's anchors as GitHub makes them: one per heading, a repeated one numbered."""
    text = re.sub(r"^(```|~~~).*?^\1", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    seen: dict[str, int] = {}
    found = set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))
    for heading in re.findall(r"^#{1,6} (.+?)#*\s*$", text, re.M):
        explicit = re.search(r"\s*\{#([\w-]+)\}$", heading)  # "## PyPy {#pypy}"
        if explicit:
            found.add(explicit.group(1))
            heading = heading[: explicit.start()]
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"^(```|~~~).*?^\1", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def broken(page: Path, target: str) -> str | None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"{target}: no such file"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{target}: no heading with that anchor in {dest.name}"
    return None


def test_the_check_sees_a_missing_file_and_a_missing_anchor() -> None:
    page = ROOT / "README.md"
    assert broken(page, "docs/no-such-page.md") is not None
    assert broken(page, "docs/measurements.md" + "#no-such-heading") is not None
    assert broken(page, "docs/measurements.md#contents") is None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    bad = [b for t in links(page) if (b := broken(page, t)) is not None]
    assert bad == [], f"{page.relative_to(ROOT)}: {bad}"


def test_each_docs_anchor_the_code_and_tests_name_exists() -> None:
    bad = []
    for tree in ("python", "tests", "benchmarks", "scripts"):
        for source in sorted((ROOT / tree).rglob("*.py")):
            for name, anchor in MENTION.findall(source.read_text(encoding="utf-8")):
                page = ROOT / "docs" / name
                if not page.exists() or anchor not in anchors(page):
                    bad.append(f"{source.relative_to(ROOT)}: docs/{name}#{anchor}")
    assert bad == [], bad
