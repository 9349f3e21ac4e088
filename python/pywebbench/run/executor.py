"""Where a study's cells run: the executor strategy of :class:`~pywebbench.run.runner.StudyRunner`.

The runner forms groups of cells (a cell, or a whole stack under ``server_scope = "stack"``)
and runs them in rounds of replicates. The executor decides where one round's groups run:

- :class:`LocalExecutor`: one group after another on this host (the default);
- :class:`~pywebbench.run.ray_executor.RayExecutor` (``--executor ray``): the round's groups
  in parallel as Ray tasks on the nodes of a cluster (docs/scale-out.md).

Both measure a group with the same code, :meth:`StudyRunner._round`, after provisioning its
stacks and starting its services with :func:`prepared_here` on the host that measures it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Protocol

from pywebbench import bringup
from pywebbench.bringup import StackFailure
from pywebbench.run.config import ConfigError, LoadConfig

if TYPE_CHECKING:
    from pywebbench.run.runner import StudyRunner, _CellState


class Executor(Protocol):
    """Runs the rounds of a study's groups of cells (see the module doc). A context manager:
    what it connected to (a Ray cluster) is let go on exit."""

    name: str

    def prepared(self, runner: StudyRunner) -> AbstractContextManager[None]:
        """Around the whole study: what must be ready before the first round."""
        ...

    def run_round(self, runner: StudyRunner, groups: Sequence[list[_CellState]]) -> None:
        """One replicate of every cell of ``groups`` (each group on one fresh server)."""
        ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...


def provision_pending(runner: StudyRunner) -> None:
    """Provision (or find cached) the virtualenv of every stack with a cell still to run,
    on this host; a failure is kept for the stack's cells and the matrix carries on."""
    from pywebbench.provision import venv as venv_mod

    venv_mod.UV_TIMEOUT_S = runner.config.timeouts.provision_s
    done = runner._done_cells()
    for variant in runner.matrix.variants:
        if all(c.key in done for c in runner.matrix.cells_of(variant)):
            continue
        if variant.key in runner._envs or variant.key in runner._provision_failed:
            continue
        runner.events.phase(f"provisioning {variant.stack.name}")
        t0 = time.monotonic()
        stack_id = runner._stack_ids[variant.key]
        try:
            env = bringup.provision(variant.stack, progress=runner.events.phase)
        except StackFailure as exc:
            runner._provision_failed[variant.key] = exc
            runner.store.update_stack(stack_id, provision_s=time.monotonic() - t0)
            continue
        runner._envs[variant.key] = env
        runner.store.update_stack(
            stack_id,
            packages_json=json.dumps(dict(env.packages), sort_keys=True),
            provision_s=float(env.seconds),
            provision_cached=bool(env.cached),
        )


@contextmanager
def prepared_here(runner: StudyRunner) -> Iterator[None]:
    """The runner's pending stacks provisioned and the services its pending cells need
    running, on this host, for the duration of the block."""
    provision_pending(runner)
    pending = [c for c in runner.matrix.cells if c.key not in runner._done_cells()]
    needed = bringup.services_needed(c.workload for c in pending)
    if needed:
        runner.events.phase(f"starting services: {', '.join(needed)}")
    workdir = runner.results_dir / "services" / runner.run_id
    with bringup.Services(needed, workdir) as services:
        runner._services = services
        try:
            yield
        finally:
            runner._services = None


class LocalExecutor:
    """Every group on this host, one after another (the order of ``_run_groups``)."""

    name = "local"

    def prepared(self, runner: StudyRunner) -> AbstractContextManager[None]:
        return prepared_here(runner)

    def run_round(self, runner: StudyRunner, groups: Sequence[list[_CellState]]) -> None:
        for active in groups:
            runner._round(active)

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
