"""Fixtures of the report tests: a headless Debian Chromium driven by playwright.

The browser is Debian's ``/usr/bin/chromium`` (installed by scripts/setup.sh); playwright's
wheel brings only the driver, no browser is downloaded. With ``PWB_SCREENSHOT_DIR`` set, the
tests save PNG screenshots of the reports they open there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the whole session (closed, with its processes, at the end)."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run ./scripts/setup.sh"
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class PageEvents:
    """What a page did that a report must never do: errors, dialogs, network requests."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_report(browser: Any, html: Path, *, width: int = 1366, height: int = 900) -> tuple:
    """Open a report file in a fresh page; returns (page, events) once the page script ran."""
    page = browser.new_page(viewport={"width": width, "height": height})
    events = PageEvents()
    page.on(
        "console",
        lambda m: events.console_errors.append(f"{m.type}: {m.text}")
        if m.type in ("error", "assert")
        else None,
    )
    page.on("pageerror", lambda e: events.page_errors.append(str(e)))

    def on_dialog(d: Any) -> None:
        events.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.on(
        "request",
        lambda r: events.requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None,
    )
    page.goto(html.resolve().as_uri())
    page.wait_for_function("window.PWB_READY === true", timeout=30_000)
    return page, events


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
