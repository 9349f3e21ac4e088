"""Opens a report in headless Debian Chromium (playwright) and prints what its robustness parts
show, as JSON. Run as a child process: the report tests hold their own session-wide playwright,
and two sync playwrights cannot share one process.

    python report_probe.py REPORT.html
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@contextlib.contextmanager
def opened(html: Path) -> Iterator[tuple[Any, list[str]]]:
    """The report loaded and ready in headless Chromium: (page, page errors so far)."""
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(html.resolve().as_uri())
            page.wait_for_function("window.PWB_READY === true", timeout=30_000)
            yield page, errors
        finally:
            browser.close()


def probe(html: Path) -> dict:
    """The robustness column, table and findings of the first workload, and any page error."""
    with opened(html) as (page, errors):
        sec = page.locator("section.workload.active")
        cell = sec.locator("table.ranking td.col-robustness").first
        card = sec.locator("div.card.robustness")
        table = card.locator("table.robustness")
        row = table.locator("tbody tr").first
        findings = card.locator("table.findings tbody tr")
        return {
            "column_header": sec.locator("table.ranking th.col-robustness").first.inner_text(),
            "score_text": cell.inner_text().strip(),
            "tooltip": cell.get_attribute("title") or "",
            "caption": card.locator("p.sub").first.inner_text(),
            "table_visible": table.is_visible(),
            "table_heads": table.locator("th").all_inner_texts(),
            "row": {
                k: row.locator(f"td.col-{k}").inner_text()
                for k in ("score", "retained", "survived", "answered_after", "accepted")
            },
            "findings": [
                {
                    k: findings.nth(i).locator(f"td.col-{k}").inner_text()
                    for k in ("kind", "what", "status", "request")
                }
                for i in range(findings.count())
            ],
            "findings_visible": findings.count() > 0 and findings.first.is_visible(),
            "errors": errors,
        }


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]))))
