"""Opens a report in headless Debian Chromium (playwright) and prints, as JSON, what its
robustness curve shows: the figure as drawn (traces, markers, the 50 % line, panel titles,
the x axis ticks), the breaking-point table, and any page error. Run as a child process (see
report_probe.py).

    python curve_probe.py REPORT.html
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def probe(html: Path) -> dict:
    """The curve figure and the breaking-point table of the first workload."""
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(html.resolve().as_uri())
            page.wait_for_function("window.PWB_READY === true", timeout=30_000)
            card = page.locator("section.workload.active div.card.robustness")
            plot = card.locator(".plot.fault-curve")
            plot.scroll_into_view_if_needed()
            page.wait_for_function(
                "document.querySelector('.plot.fault-curve svg.main-svg') !== null",
                timeout=30_000,
            )
            table = card.locator("table.breaking")
            rows = table.locator("tbody tr")
            return {
                "plot_visible": plot.is_visible(),
                "traces": plot.locator("g.trace").count(),
                "markers": plot.locator("g.trace path.point").count(),
                "shapes": plot.locator("g.shapelayer path").count(),
                "titles": plot.locator("g.annotation text").all_text_contents(),
                "xticks": plot.locator("g.xtick text").all_text_contents(),
                "table_visible": table.is_visible(),
                "rows": [
                    {
                        k: rows.nth(i).locator(f"td.col-{k}").inner_text()
                        for k in ("stack", "breaking", "retained", "settings")
                    }
                    for i in range(rows.count())
                ],
                "errors": errors,
            }
        finally:
            browser.close()


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]))))
