"""The results store: a versioned SQLite schema, committed writes, a typed read API.

>>> from pywebbench.store import Store
>>> with Store("pywebbench-results/pywebbench.sqlite", create=False) as store:
...     study = store.load_study()          # latest run; or load_study(["20261121-..."])
...     for cell in study.cells: ...

Schema: docs/store-schema.md. Row types: :mod:`pywebbench.store.model`.
"""

from pywebbench.meter.sampler import Sample
from pywebbench.store.db import (
    DEFAULT_FILENAME,
    Store,
    StoreError,
    dumps_study,
    new_run_id,
    study_from_dict,
    study_to_dict,
    utcnow,
)
from pywebbench.store.lock import RunLocked, run_lock
from pywebbench.store.model import (
    Cell,
    CellFlags,
    CellStatus,
    Failure,
    Iteration,
    IterationKind,
    Phase,
    Replicate,
    Run,
    RunStatus,
    StackRow,
    Study,
)
from pywebbench.store.schema import SCHEMA_VERSION
from pywebbench.store.writer import STORE_OPERATIONS, StoreWriter

__all__ = [
    "DEFAULT_FILENAME",
    "SCHEMA_VERSION",
    "STORE_OPERATIONS",
    "Cell",
    "CellFlags",
    "CellStatus",
    "Failure",
    "Iteration",
    "IterationKind",
    "Phase",
    "Replicate",
    "Run",
    "RunLocked",
    "RunStatus",
    "Sample",
    "StackRow",
    "Store",
    "StoreError",
    "StoreWriter",
    "Study",
    "dumps_study",
    "new_run_id",
    "run_lock",
    "study_from_dict",
    "study_to_dict",
    "utcnow",
]
