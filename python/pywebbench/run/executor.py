"""Where a study's rounds run: the executor strategy of :class:`~pywebbench.run.runner.StudyRunner`.

The scheduler (:mod:`~pywebbench.run.schedule`) forms groups of cells (a cell, or a whole
stack under ``server_scope = "stack"``) and runs them in rounds of replicates. An executor runs
one round's groups, given as plain :class:`~pywebbench.run.schedule.CellProgress` values, and
hands back one :class:`~pywebbench.run.schedule.CellOutcome` per cell:

- :class:`LocalExecutor`: one group after another on this host (the default);
- :class:`~pywebbench.run.ray_executor.RayExecutor` (``--executor ray``): the round's groups
  in parallel as Ray tasks on the nodes of a cluster (docs/scale-out.md).

Both measure a group with the same code, :meth:`HostBench.run_round
<pywebbench.run.bench.HostBench.run_round>`, on the host that measures it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from pywebbench.run.bench import HostBench, StudyContext
from pywebbench.run.schedule import CellOutcome, CellProgress
from pywebbench.run.seams import Seams
from pywebbench.study.config import ConfigError, LoadConfig


class Executor(Protocol):
    """Runs the rounds of a study's groups of cells (see the module doc). A context manager:
    what it connected to (a Ray cluster) is let go on exit."""

    name: str
    #: Whether it runs several groups at once (the runner then hands it every interleaved
    #: group in one call; else one group a call, each finished as soon as it is measured).
    parallel: bool

    def prepared(self, study: StudyContext) -> AbstractContextManager[None]:
        """Around the whole study: what must be ready before the first round."""
        ...

    def run_round(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        """One replicate of every cell of ``groups`` (each group on one fresh server): each
        group's outcomes, cell by cell. Raises on Ctrl-C (what was measured is stored)."""
        ...

    def run_groups(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        """Every interleaved group of ``groups`` measured whole
        (:meth:`HostBench.run_group <pywebbench.run.bench.HostBench.run_group>`): each
        group's outcomes, cell by cell. Raises on Ctrl-C (what was measured is stored)."""
        ...

    @property
    def loaded_s(self) -> float:
        """The sum of the load windows run so far."""
        ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


class LocalExecutor:
    """Every group on this host, one after another, on one :class:`HostBench`; ``seams``:
    where it reaches the world (the real ones unless given: run/seams.py)."""

    name = "local"
    parallel = False

    def __init__(self, seams: Seams | None = None) -> None:
        self.seams = seams or Seams()
        self._bench: HostBench | None = None
        self._loaded_s = 0.0

    @contextmanager
    def prepared(self, study: StudyContext) -> Iterator[None]:
        """This host's bench, its stacks provisioned and services started for the study."""
        bench = HostBench(study.setup, study.store, study.agent, study.events, self.seams)
        self._bench = bench
        try:
            with bench.prepared(study.cells):
                yield
        finally:
            self._loaded_s += bench.loaded_s
            self._bench = None

    def run_round(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        if self._bench is None:
            raise RuntimeError("run_round outside prepared()")
        return [self._bench.run_round(group) for group in groups]

    def run_groups(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        if self._bench is None:
            raise RuntimeError("run_groups outside prepared()")
        return [self._bench.run_group(group) for group in groups]

    @property
    def loaded_s(self) -> float:
        return self._loaded_s + (self._bench.loaded_s if self._bench is not None else 0.0)

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def open_executor(load: LoadConfig) -> Executor:
    """The executor ``load.executor`` names, ready to use (``ray``: Ray joined at
    ``load.ray_address``, or a local Ray started, until it is closed).

    Raises:
        ConfigError: Ray is not installed, or cannot be started or joined (one line naming
        the flag).
    """
    if load.executor != "ray":
        return LocalExecutor()
    from pywebbench.run.ray_executor import RayExecutor

    return RayExecutor.connect(load.ray_address)


def check_executor(load: LoadConfig) -> None:
    """The executor options that cannot go together (one line naming the flag).

    Raises:
        ConfigError: ``--ray`` with neither ``--executor ray`` nor load agents; ``--executor
        ray`` with ``--load-agents``.
    """
    if load.executor == "ray" and load.load_agents > 1:
        raise ConfigError(
            "--load-agents: cannot be combined with --executor ray (each cell's load runs on "
            "the node that runs the cell); use one or the other"
        )
    if load.ray_address is not None and load.executor != "ray" and load.load_agents <= 1:
        raise ConfigError("--ray: needs --executor ray (or --load-agents N with N > 1)")
