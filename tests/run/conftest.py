"""Shared helpers of the runner tests: a process census by environment marker."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from pwbtest import MARK_VAR, marked_processes


@pytest.fixture
def census() -> Iterator[str]:
    """A fresh marker put in this process's environment (inherited by everything the test
    starts); after the test no process may still carry it."""
    mark = uuid.uuid4().hex
    old = os.environ.get(MARK_VAR)
    os.environ[MARK_VAR] = mark
    try:
        yield mark
    finally:
        if old is None:
            os.environ.pop(MARK_VAR, None)
        else:
            os.environ[MARK_VAR] = old
    left = marked_processes(MARK_VAR, mark)
    assert not left, f"processes left behind: {left}"
