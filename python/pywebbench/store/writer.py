"""What a study writes and reads back while it runs: the :class:`StoreWriter` protocol.

The study runner, the host bench and the phases of a replicate see the store only through
this protocol. :class:`~pywebbench.store.Store` implements it, and so does the Ray relay's
:class:`~pywebbench.run.relay.RemoteStore`, which sends each operation to the driver; the
driver runs only the operations named in :data:`STORE_OPERATIONS` (tests/store keep the list,
the protocol and the store in agreement).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pywebbench.meter.sampler import Sample
from pywebbench.store.knee_rows import Knee, KneeProbe
from pywebbench.store.model import (
    Cell,
    Failure,
    Iteration,
    LoadAgentRow,
    Replicate,
    Run,
    StackRow,
)

#: Every operation of :class:`StoreWriter`, by name: what the Ray driver may run for a task.
STORE_OPERATIONS = (
    "create_run",
    "update_run",
    "add_stack",
    "update_stack",
    "stacks",
    "add_cell",
    "update_cell",
    "cells",
    "add_replicate",
    "update_replicate",
    "replicates",
    "add_iteration",
    "iterations",
    "add_load_agents",
    "add_failure",
    "add_knee_probe",
    "add_knee",
)


class StoreWriter(Protocol):
    """The store as a running study uses it (see the module doc)."""

    #: The store's file (a run's lock is taken beside it).
    path: Path

    def create_run(self, run: Run) -> str:
        """Insert a run; returns its id."""
        ...

    def update_run(self, run_id: str, **changes: Any) -> None:
        """Set columns of a run."""
        ...

    def add_stack(self, stack: StackRow) -> int:
        """Insert a stack variant (or find it again, on resume); returns its id."""
        ...

    def update_stack(self, stack_id: int, **changes: Any) -> None:
        """Set columns of a stack."""
        ...

    def stacks(self, run_id: str) -> list[StackRow]:
        """The stacks of a run."""
        ...

    def add_cell(self, cell: Cell) -> int:
        """Insert a cell (or find it again by its key, on resume); returns its id."""
        ...

    def update_cell(self, cell_id: int, **changes: Any) -> None:
        """Set columns of a cell."""
        ...

    def cells(self, run_id: str) -> list[Cell]:
        """The cells of a run."""
        ...

    def add_replicate(self, rep: Replicate) -> int:
        """Insert a replicate; returns its id."""
        ...

    def update_replicate(self, replicate_id: int, **changes: Any) -> None:
        """Set columns of a replicate."""
        ...

    def replicates(self, cell_id: int) -> list[Replicate]:
        """The replicates of a cell."""
        ...

    def add_iteration(self, it: Iteration, samples: Sequence[Sample] = ()) -> int:
        """Insert an iteration and its samples; sets ``it.id`` and returns it."""
        ...

    def iterations(self, cell_id: int) -> list[Iteration]:
        """The iterations of a cell."""
        ...

    def add_load_agents(self, rows: Sequence[LoadAgentRow]) -> None:
        """Insert the per-agent results of an iteration."""
        ...

    def add_failure(self, failure: Failure) -> int:
        """Insert a failure; returns its id."""
        ...

    def add_knee_probe(self, probe: KneeProbe) -> int:
        """Insert one probe of a knee search; returns its id."""
        ...

    def add_knee(self, knee: Knee) -> int:
        """Insert the knee of a replicate; returns its id."""
        ...
