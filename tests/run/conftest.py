"""Shared helpers of the runner tests: a process census by environment marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pwbtest import process_census


@pytest.fixture
def census() -> Iterator[str]:
    """A fresh marker inherited by everything the test starts; after the test no process may
    still carry it (pwbtest.process_census)."""
    with process_census() as mark:
        yield mark
