"""Helpers of the report tests: open a report in a page, record what it did, screenshots."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class PageEvents:
    """What a page did that a report must never do: errors, dialogs, network requests."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_report(
    browser: Any, html: Path, *, width: int = 1366, height: int = 900, timeout_ms: int = 30_000
) -> tuple:
    """Open a report file in a fresh page; returns (page, events) once the page script ran
    (within ``timeout_ms``: a report is megabytes of inline script)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    events = PageEvents()
    page.on(
        "console",
        lambda m: (
            events.console_errors.append(f"{m.type}: {m.text}")
            if m.type in ("error", "assert")
            else None
        ),
    )
    page.on("pageerror", lambda e: events.page_errors.append(str(e)))

    def on_dialog(d: Any) -> None:
        events.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)

    def on_request(r: Any) -> None:
        if not r.url.startswith(("file:", "data:", "blob:")):
            events.requests.append(r.url)

    page.on("request", on_request)
    page.goto(html.resolve().as_uri(), timeout=timeout_ms)
    page.wait_for_function("window.PWB_READY === true", timeout=timeout_ms)
    return page, events


#: How long a page may take to draw its visible plots: a bound on a hang, not a pause that
#: must be long enough (issue 52: a host that steals up to 50% of the cores can make any
#: fixed pause too short).
DRAW_TIMEOUT_MS = 15_000


def wait_drawn(page: Any) -> None:
    """Until every visible plot holds the figure chosen for it: the page sets ``data-drawn``
    as it hands the figure to Plotly, whose cartesian plots are drawn before that call
    returns. A wait on the page's own state, not a fixed pause."""
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('.plot[data-figure]'))
            .filter(el => el.offsetParent !== null)
            .every(el => el.getAttribute('data-drawn') === el.getAttribute('data-figure'))""",
        timeout=DRAW_TIMEOUT_MS,
    )


def screenshot(page: Any, name: str, *, full_page: bool = False) -> Path | None:
    """Save a PNG into $PWB_SCREENSHOT_DIR when it is set."""
    target = os.environ.get("PWB_SCREENSHOT_DIR")
    if not target:
        return None
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
