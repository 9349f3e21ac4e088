"""The line between a Ray task that measures cells on a node and the driver that owns the store.

The SQLite store has one writer, the driver: its run lock, ``--resume`` and Ctrl-C rest on that.
A task measures with the host bench's own code (:class:`~pywebbench.run.bench.HostBench`),
which writes to a :class:`~pywebbench.store.StoreWriter` and tells ``events`` as it goes; on a
node both are stand-ins (:class:`RemoteStore`, :func:`remote_events`) that send each call to a
:class:`Mailbox` actor. The driver takes the calls from the mailbox, runs them
on the real store and display, and posts the answers back (:mod:`~pywebbench.run.ray_executor`).
So an iteration is in the store the moment it ends on its node, as it would be locally.

The mailbox also carries the driver's stop (Ctrl-C) to every task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pywebbench.run.events import Events
from pywebbench.store import Cell, Failure, Iteration, Replicate, Run, Sample, StackRow
from pywebbench.store.knee_rows import Knee, KneeProbe
from pywebbench.store.model import LoadAgentRow
from pywebbench.study.matrix import CellPlan

#: (number awaiting an answer, or None for a one-way letter; sender; request)
Letter = tuple[int | None, str, tuple[Any, ...]]

#: How often a task sends its live requests/s to the driver (the display's only use of it).
LIVE_EVERY_S = 1.0


class Mailbox:
    """A Ray actor (async) between the tasks and the driver: calls that wait for the driver's
    answer, one-way letters, and the driver's stop."""

    def __init__(self) -> None:
        self._inbox: asyncio.Queue[Letter] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._numbers = 0
        self._stop = asyncio.Event()

    async def call(self, sender: str, request: tuple[Any, ...]) -> Any:
        """A task's request; returns the driver's answer once it comes."""
        self._numbers += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[self._numbers] = future
        self._inbox.put_nowait((self._numbers, sender, request))
        return await future

    async def post(self, sender: str, request: tuple[Any, ...]) -> None:
        """A one-way letter from a task (an event for the display)."""
        self._inbox.put_nowait((None, sender, request))

    async def take(self, wait_s: float) -> list[Letter]:
        """The driver's turn: every letter waiting, after up to ``wait_s`` for the first."""
        try:
            first = await asyncio.wait_for(self._inbox.get(), wait_s)
        except asyncio.TimeoutError:
            return []
        letters = [first]
        while not self._inbox.empty():
            letters.append(self._inbox.get_nowait())
        return letters

    async def answer(self, number: int, reply: Any) -> None:
        """The driver's answer to call ``number``."""
        future = self._waiting.pop(number, None)
        if future is not None and not future.done():
            future.set_result(reply)

    async def stop(self) -> None:
        """The driver stops the run (Ctrl-C): every task is told (see :meth:`stopping`)."""
        self._stop.set()

    async def stopping(self, wait_s: float) -> bool:
        """True once the run is stopping; waits up to ``wait_s`` for it."""
        try:
            await asyncio.wait_for(self._stop.wait(), wait_s)
        except asyncio.TimeoutError:
            pass
        return self._stop.is_set()


class TaskRelay:
    """A task's end of the mailbox, as ``sender``."""

    def __init__(self, ray: Any, mailbox: Any, sender: str) -> None:
        self.ray = ray
        self.mailbox = mailbox
        self.sender = sender

    def call(self, request: tuple[Any, ...]) -> Any:
        """Send ``request`` to the driver and wait for its answer (re-raising its error)."""
        status, value = self.ray.get(self.mailbox.call.remote(self.sender, request))
        if status == "error":
            raise value
        return value

    def post(self, request: tuple[Any, ...]) -> None:
        """Send ``request`` without waiting."""
        self.mailbox.post.remote(self.sender, request)


@dataclass(frozen=True)
class NodeFacts:
    """The Ray node a task ran on, and its type (CPU model, cores)."""

    node_id: str
    host: str
    ip: str
    cpu_model: str
    cpus: int

    @property
    def label(self) -> str:
        """The node as people read it: ``host (ip)``."""
        return f"{self.host} ({self.ip})"

    def stamp(self, rep: Replicate) -> Replicate:
        """``rep`` with this node recorded as the one that measured it."""
        return dataclasses.replace(
            rep,
            node=self.label,
            node_id=self.node_id,
            node_cpu_model=self.cpu_model,
            node_cpus=self.cpus,
        )


class RemoteStore:
    """The driver's store on a node: a :class:`~pywebbench.store.StoreWriter` whose every
    operation the driver runs (it runs nothing else). Replicates are stamped with the node
    that measures them, and ``add_iteration`` sets the row's id, as the store itself does."""

    def __init__(self, relay: TaskRelay, node: NodeFacts, path: Path) -> None:
        self._relay = relay
        self._node = node
        self.path = path

    def _call(self, operation: str, *args: Any, **changes: Any) -> Any:
        return self._relay.call(("store", operation, args, changes))

    def create_run(self, run: Run) -> str:
        return str(self._call("create_run", run))

    def update_run(self, run_id: str, **changes: Any) -> None:
        self._call("update_run", run_id, **changes)

    def add_stack(self, stack: StackRow) -> int:
        return int(self._call("add_stack", stack))

    def update_stack(self, stack_id: int, **changes: Any) -> None:
        self._call("update_stack", stack_id, **changes)

    def stacks(self, run_id: str) -> list[StackRow]:
        return list(self._call("stacks", run_id))

    def add_cell(self, cell: Cell) -> int:
        return int(self._call("add_cell", cell))

    def update_cell(self, cell_id: int, **changes: Any) -> None:
        self._call("update_cell", cell_id, **changes)

    def cells(self, run_id: str) -> list[Cell]:
        return list(self._call("cells", run_id))

    def add_replicate(self, rep: Replicate) -> int:
        return int(self._call("add_replicate", self._node.stamp(rep)))

    def update_replicate(self, replicate_id: int, **changes: Any) -> None:
        self._call("update_replicate", replicate_id, **changes)

    def replicates(self, cell_id: int) -> list[Replicate]:
        return list(self._call("replicates", cell_id))

    def add_iteration(self, it: Iteration, samples: Sequence[Sample] = ()) -> int:
        it.id = int(self._call("add_iteration", it, samples))
        return it.id

    def iterations(self, cell_id: int) -> list[Iteration]:
        return list(self._call("iterations", cell_id))

    def add_load_agents(self, rows: Sequence[LoadAgentRow]) -> None:
        self._call("add_load_agents", rows)

    def add_failure(self, failure: Failure) -> int:
        return int(self._call("add_failure", failure))

    def add_knee_probe(self, probe: KneeProbe) -> int:
        return int(self._call("add_knee_probe", probe))

    def add_knee(self, knee: Knee) -> int:
        return int(self._call("add_knee", knee))


@dataclass(frozen=True)
class CellRef:
    """A cell named in an event from a node (the driver holds the :class:`CellPlan`)."""

    key: str


def remote_events(relay: TaskRelay) -> Events:
    """Events that go to the driver's display; live requests/s at most every
    :data:`LIVE_EVERY_S` (never raises: the engine's progress callback calls it)."""
    last = [0.0]

    def send(name: str) -> Callable[..., None]:
        def event(*args: Any) -> None:
            if name == "live_rps":
                now = time.monotonic()
                if now - last[0] < LIVE_EVERY_S:
                    return
                last[0] = now
            refs = tuple(CellRef(a.key) if isinstance(a, CellPlan) else a for a in args)
            try:
                relay.post(("event", name, refs))
            except Exception:  # noqa: BLE001 - display only
                pass

        return event

    names = [f.name for f in dataclasses.fields(Events)]
    return Events(**{name: send(name) for name in names})
