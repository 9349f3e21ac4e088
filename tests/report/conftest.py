"""Fixtures of the report tests: a headless Debian Chromium driven by playwright.

The browser is Debian's ``/usr/bin/chromium`` (installed by scripts/setup.sh); playwright's
wheel brings only the driver, no browser is downloaded. With ``PWB_SCREENSHOT_DIR`` set, the
tests save PNG screenshots of the reports they open there.
"""

from __future__ import annotations

from collections.abc import Iterator
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
