"""Short real studies for the compare tests (the session fixture is in conftest.py).

Three runs of one real stack (gunicorn-sync serving raw-wsgi on the running CPython, the
``cpu`` workload, 3 replicates x 2 measured 1 s iterations) go into one store:

- ``a1`` and ``a2``: the same study twice (an A/A pair: any difference is noise);
- ``slow``: the same study with each request computing fib(27) instead of fib(20), about
  29x the work, in one measured 3 s iteration a replicate (conftest.py): a real regression,
  large enough that 3 replicates a side detect it at the tests' designed false-failure rate
  (test_compare_cmd.py).

Every process the studies start carries a marker; none may be left at the end.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable
from pathlib import Path

from pwbtest import command
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import Store, Study, new_run_id

CPYTHON = default_interpreters()[0].name
STACK = f"{CPYTHON}/gunicorn-sync/raw-wsgi"
STUDY = [
    "run",
    "--python",
    CPYTHON,
    "--server",
    "gunicorn-sync",
    "--framework",
    "raw-wsgi",
    "--workload",
    "cpu",
    "-c",
    "8",
    "-d",
    "1",
    "--warmup",
    "fixed",
    "--max-replicates",
    "1",
    "--warmup-duration",
    "0.5",
    "--iterations",
    "2",
    "--replicates",
    "3",
    "--no-report",
    # These studies judge compare's statistics on real servers; on a machine shared with
    # other work every iteration could be interfered and every verdict "interfered". The
    # guard has its own tests (tests/run/test_interference_guard.py, test_compare_cmd.py).
    "--interference-max",
    "2",
]


@dataclasses.dataclass(frozen=True)
class StoredRuns:
    """The session's store and the ids of its runs."""

    store: Path
    a1: str
    a2: str
    slow: str


def pwb(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``pywebbench ARGS``, output captured as text (:func:`pwbtest.command`)."""
    return command(args, timeout=timeout)


def study(results: Path, *extra: str) -> str:
    proc = pwb(*STUDY, "--results-dir", str(results), *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Store(results / "pywebbench.sqlite", create=False) as store:
        latest = store.latest_run()
    assert latest is not None and latest.status == "completed"
    return latest.id


def edited_copy(
    source: Path, run_id: str, dest: Path, edit: Callable[[Study], None]
) -> tuple[str, str]:
    """A new store at ``dest`` holding run ``run_id`` and a copy of it under a new id,
    changed in place by ``edit`` (a stack renamed, a cell marked interrupted...).
    Returns (original id, copy id)."""
    with Store(source, create=False) as store:
        original = store.load_study([run_id])
        study = store.load_study([run_id])
    new_id = new_run_id() + "-copy"
    study.runs[0].id = new_id
    for row in (*study.stacks, *study.cells, *study.failures):
        row.run_id = new_id
    edit(study)
    with Store(dest) as store:
        store.import_study(original)
        store.import_study(study)
    return run_id, new_id
