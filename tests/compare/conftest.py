"""The session's stored runs for the compare tests (see compare_study.py)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from compare_study import StoredRuns, study
from pwbtest import MARK_VAR, marked_processes


@pytest.fixture(scope="session")
def stored_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoredRuns]:
    """Three real runs in one store: A/A pair and the fib(27) regression (compare_study.py)."""
    root = tmp_path_factory.mktemp("compare")
    results = root / "results"
    slow_config = root / "slow.toml"
    slow_config.write_text("[matrix.workload_params]\ncpu = { n = 27 }\n")
    mark = uuid.uuid4().hex
    old = os.environ.get(MARK_VAR)
    os.environ[MARK_VAR] = mark
    try:
        a1 = study(results)
        a2 = study(results)
        # 3 s windows: a request of fib(27) takes ~70 ms of CPU, ~1 s on a loaded core, and a
        # 1 s window may then see no response at all.
        slow = study(results, "--config", str(slow_config), "-d", "3", "--warmup-duration", "1")
    finally:
        if old is None:
            os.environ.pop(MARK_VAR, None)
        else:
            os.environ[MARK_VAR] = old
    assert not marked_processes(MARK_VAR, mark), "processes left behind by the studies"
    yield StoredRuns(results / "pywebbench.sqlite", a1, a2, slow)
