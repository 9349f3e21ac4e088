"""Opens a report in headless Debian Chromium (playwright) and prints, as JSON, what its
robustness curve shows: the figure as drawn (traces, the 50 % line, panel titles), the
breaking-point table, and any page error. Run as a child process (see report_probe.py).

    python curve_probe.py REPORT.html
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from report_probe import opened


def probe(html: Path) -> dict:
    """The curve figure and the breaking-point table of the first workload."""
    with opened(html) as (page, errors):
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
            "shapes": plot.locator("g.shapelayer path").count(),
            "titles": plot.locator("g.annotation text").all_text_contents(),
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


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]))))
