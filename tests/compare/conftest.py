"""The session's stored runs for the compare tests (see compare_study.py)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from compare_study import StoredRuns, study
from pwbtest import MARK_VAR, exclusive, marked_processes


@pytest.fixture(scope="session")
def stored_runs(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> StoredRuns:
    """Three real runs in one store: A/A pair and the fib(27) regression (compare_study.py).

    Built once per session: under ``pytest -n 2`` (scripts/test.sh) the first worker to ask
    builds them in the session's shared temporary directory, holding a lock, and the other
    reads them there (the tests only read the store: edits go to copies)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if worker_id != "master" else base  # popen-gwN's parent: the session
    root = shared / "compare-stored-runs"
    ids = root / "runs.json"
    with exclusive(f"compare-{shared.name}"):
        if ids.exists():
            a1, a2, slow = json.loads(ids.read_text())
            return StoredRuns(root / "results" / "pywebbench.sqlite", a1, a2, slow)
        root.mkdir(parents=True, exist_ok=True)
        runs = _build(root)
        ids.write_text(json.dumps([runs.a1, runs.a2, runs.slow]))
        return runs


def _build(root: Path) -> StoredRuns:
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
        # 1 s window may then see no response at all. One a replicate: the gate's interval is
        # over the 3 replicates' figures, and a1 keeps the 2 a replicate that pyperf's
        # export of iterations as values reads.
        slow = study(
            results,
            *("--config", str(slow_config), "-d", "3", "--warmup-duration", "1"),
            *("--iterations", "1"),
        )
    finally:
        if old is None:
            os.environ.pop(MARK_VAR, None)
        else:
            os.environ[MARK_VAR] = old
    assert not marked_processes(MARK_VAR, mark), "processes left behind by the studies"
    return StoredRuns(results / "pywebbench.sqlite", a1, a2, slow)
