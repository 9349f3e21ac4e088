"""``pywebbench run --executor ray``: a study's groups of cells measured in parallel, as Ray
tasks on the nodes of a cluster (docs/scale-out.md).

Each round of the scheduler (:mod:`~pywebbench.run.schedule`) becomes one Ray task per group
(a cell, or a whole stack under ``server_scope = "stack"``), and the driver waits for every
task of a round before it starts the next, so rounds keep their meaning. A task does on its
node what the local executor does here, with the same code, a
:class:`~pywebbench.run.bench.HostBench`: it provisions the group's stacks (in the node's own
venv cache), starts the services its cells need, and runs the bench's round: one fresh server
and one replicate of each cell, server and generator pinned to the node's cores by the same
rules. Its store writes (the operations of :class:`~pywebbench.store.StoreWriter`) and display
events go to the driver through the mailbox (:mod:`~pywebbench.run.relay`), and the driver
alone writes the store.

Honest pinning: several Ray nodes may share one host, and two groups pinned to the same cores
of a host must not overlap, so a task measures only while it holds a host-wide lock.

A task whose worker or node dies is a failure of the replicate it was measuring, recorded
with the node and the reason; the other tasks carry on. Ctrl-C stops every task (each stores
its partial iteration and stops its server, as locally) and leaves the run resumable.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from pywebbench.bringup import StackFailure, one_line
from pywebbench.faults.outcome import CellRobustness
from pywebbench.load import LocalAgent
from pywebbench.run.bench import HostBench, StudyContext, StudySetup
from pywebbench.run.host import cpu_model, split_cpus, usable_cpus
from pywebbench.run.measure import Interrupted, no_sigint
from pywebbench.run.relay import (
    CellRef,
    Letter,
    Mailbox,
    NodeFacts,
    RemoteStore,
    TaskRelay,
    remote_events,
)
from pywebbench.run.schedule import CellOutcome, CellProgress, lost_outcome
from pywebbench.store import STORE_OPERATIONS, CellStatus, Phase, StoreWriter, utcnow
from pywebbench.study.config import ConfigError, StudyConfig
from pywebbench.study.matrix import CellPlan

#: How long the driver waits for the first letter of a turn (letters are served at once;
#: this bounds how soon it sees a task end).
POLL_S = 0.25
#: After Ctrl-C, how long the tasks get to store what they measured and stop their servers.
STOP_GRACE_S = 45.0
#: One group measures at a time on a host, whichever Ray node it came through.
HOST_LOCK = Path(tempfile.gettempdir()) / "pywebbench-host.lock"
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# -------------------------------------------------------------------------- on the node


@dataclass(frozen=True)
class RoundWork:
    """What one task measures: one replicate of each of ``cells``, in order, on one server."""

    key: str
    config_json: str
    run_id: str
    results_dir: str
    stack_ids: dict[str, int]
    cells: list[CellPlan]
    cell_ids: list[int]
    ok: list[int]
    next_rep: list[int]
    #: The cells are an interleaved group (run/interleaved.py), measured at once; else one
    #: replicate of each on one server.
    interleaved: bool = False


@dataclass(frozen=True)
class FlatOutcome:
    """A :class:`~pywebbench.run.schedule.CellOutcome` as plain values (an exception with
    its own arguments does not travel)."""

    ok: int
    next_rep: int
    failure: tuple[str, str, str | None] | None  # phase, reason, detail
    robustness: CellRobustness | None
    group: dict[str, Any] | None = None

    @classmethod
    def of(cls, outcome: CellOutcome) -> FlatOutcome:
        """``outcome`` as plain values."""
        f = outcome.failure
        flat = None if f is None else (str(f.phase), f.reason, f.detail)
        return cls(outcome.ok, outcome.next_rep, flat, outcome.robustness, outcome.group)

    def outcome(self) -> CellOutcome:
        """The outcome again."""
        failure = None
        if self.failure is not None:
            phase, reason, detail = self.failure
            failure = StackFailure(Phase(phase), reason, detail)
        return CellOutcome(self.ok, self.next_rep, failure, self.robustness, self.group)


@dataclass(frozen=True)
class RoundOutcome:
    """What a task hands back: each cell's outcome (none when Ctrl-C ended it), whether
    Ctrl-C ended it, and the seconds of load it ran."""

    cells: list[FlatOutcome]
    interrupted: bool
    loaded_s: float


def this_node(ray: Any) -> NodeFacts:
    """The Ray node this process runs on."""
    return NodeFacts(
        node_id=ray.get_runtime_context().get_node_id(),
        host=socket.gethostname(),
        ip=ray.util.get_node_ip_address(),
        cpu_model=cpu_model(),
        cpus=len(usable_cpus()),
    )


@contextmanager
def host_lock(relay: TaskRelay) -> Iterator[None]:
    """This host's measuring lock, held for the block (another group's task waits)."""
    fd = os.open(HOST_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    relay.post(("event", "phase", ("waiting for this host's other group",)))
                    told = True
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


class _Stoppable:
    """Turns the driver's stop into a Ctrl-C of this task's main thread, sent again until it
    lands: inside a shielded section (a store write, stopping the server) it is ignored, as a
    Ctrl-C is locally. Ray blocks SIGINT in its workers; it is unblocked for the task."""

    def __init__(self, ray: Any, mailbox: Any) -> None:
        self._ray = ray
        self._mailbox = mailbox
        self._done = threading.Event()
        self._landed = threading.Event()
        self._main = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._old_handler: Any = None
        self._old_mask: set[int | signal.Signals] = set()

    def __enter__(self) -> _Stoppable:
        self._old_handler = signal.signal(signal.SIGINT, self._hit)
        self._old_mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        return self

    def watch(self) -> None:
        """Start listening for the driver's stop."""
        self._thread.start()

    def _hit(self, signum: int, frame: FrameType | None) -> None:
        self._landed.set()
        if not self._done.is_set():
            raise KeyboardInterrupt

    def _watch(self) -> None:
        while not self._done.is_set():
            try:
                if self._ray.get(self._mailbox.stopping.remote(0.5)):
                    break
            except Exception:  # noqa: BLE001 - the driver is gone: Ray ends this worker
                return
        while not self._done.is_set() and not self._landed.is_set():
            signal.pthread_kill(self._main, signal.SIGINT)
            self._done.wait(0.5)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)
        signal.signal(signal.SIGINT, self._old_handler)


def _writable(results_dir: Path) -> Path:
    """The driver's results directory on this node (for server logs), else a temporary one."""
    try:
        (results_dir / "logs").mkdir(parents=True, exist_ok=True)
        return results_dir
    except OSError:
        return Path(tempfile.gettempdir()) / "pywebbench-results"


def _node_bench(work: RoundWork, relay: TaskRelay, node: NodeFacts) -> HostBench:
    """This node's bench for ``work``'s cells: the store and the display are the driver's
    (through the relay), the load generator and the cores are this node's."""
    config = StudyConfig.model_validate_json(work.config_json)
    results_dir = Path(work.results_dir)
    server_cpus, generator_cpus = split_cpus(config.cpus.server, config.cpus.generator)
    setup = StudySetup(
        config=config,
        run_id=work.run_id,
        results_dir=_writable(results_dir),
        stack_ids=dict(work.stack_ids),
        server_cpus=server_cpus,
        generator_cpus=generator_cpus,
    )
    store = RemoteStore(relay, node, results_dir / "pywebbench.sqlite")
    return HostBench(setup, store, LocalAgent(), remote_events(relay))


def measure_round(work: RoundWork, mailbox: Any) -> RoundOutcome:
    """Run by Ray on a node: one replicate of each of ``work``'s cells (see the module doc)."""
    import ray

    from pywebbench.load.ray_agents import measuring_priority

    measuring_priority()  # before any server or load starts from this worker

    relay = TaskRelay(ray, mailbox, work.key)
    node = this_node(ray)
    relay.post(("hello", node, os.getpid()))
    bench = _node_bench(work, relay, node)
    group = [
        CellProgress(cell=c, cell_id=i, ok=ok, next_rep=n)
        for c, i, ok, n in zip(work.cells, work.cell_ids, work.ok, work.next_rep, strict=True)
    ]
    outcomes: list[CellOutcome] = []
    interrupted = False
    with _Stoppable(ray, mailbox) as stoppable:
        try:
            stoppable.watch()
            with host_lock(relay), bench.prepared(work.cells):
                outcomes = bench.run_group(group) if work.interleaved else bench.run_round(group)
        except (KeyboardInterrupt, Interrupted):
            interrupted = True
    return RoundOutcome(
        cells=[FlatOutcome.of(o) for o in outcomes],
        interrupted=interrupted,
        loaded_s=bench.loaded_s,
    )


# ------------------------------------------------------------------------ on the driver


@dataclass
class _Task:
    """A task in flight: its place in the round, its group's cells, their outcomes once it
    ended, and where it runs once it said so."""

    key: str
    index: int
    group: str
    cells: Sequence[CellProgress]
    interleaved: bool = False
    outcomes: list[CellOutcome] | None = None
    node: NodeFacts | None = None
    pid: int | None = None


@contextmanager
def _deferred_interrupt() -> Iterator[None]:
    """Ctrl-C (SIGTERM, SIGHUP) waits for the end of the block, then raises: a letter taken
    from the mailbox is always served and answered."""
    hit: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        hit.append(signum)

    old = {sig: signal.signal(sig, note) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if hit:
        raise KeyboardInterrupt(f"signal {hit[0]}")


def store_reply(
    store: StoreWriter, operation: str, args: Sequence[Any], changes: dict[str, Any]
) -> tuple[str, Any]:
    """The driver's answer to a task's store call: ``("ok", result)``, or ``("error", exc)``
    (raised again in the task), also for anything not in ``STORE_OPERATIONS``."""
    try:
        if operation not in STORE_OPERATIONS:
            raise ValueError(f"{operation!r} is not a store operation a task may ask for")
        return "ok", getattr(store, operation)(*args, **changes)
    except Exception as exc:  # noqa: BLE001 - raised again in the task
        return "error", exc


def _reachable(address: str) -> None:
    """A one-line :class:`ConfigError` when nothing answers at ``HOST:PORT``."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray: {address!r} is not HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=5.0).close()
    except OSError as exc:
        raise ConfigError(f"--ray: cannot reach the Ray cluster at {address}: {exc}") from None


def _lost_reason(exc: BaseException) -> str:
    """One line saying why a task ended without its outcome."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if type(exc).__name__.startswith("RayTaskError") and len(lines) > 1:
        return one_line(lines[-1], 240)  # the task raised: its exception's own line
    return one_line(f"{type(exc).__name__}: {lines[0] if lines else ''}", 240)


@dataclass
class RayExecutor:
    """Runs each round's groups in parallel as Ray tasks; see the module doc."""

    ray: Any
    session: ExitStack
    name: str = "ray"
    parallel: bool = True
    interrupted: bool = False
    _mailbox: Any = None
    _remote: Any = None  # measure_round as a Ray remote function
    _rounds: int = 0
    _home: dict[str, str] = field(default_factory=dict)  # group -> the node it ran on
    _study: StudyContext | None = None
    _loaded_s: float = 0.0

    @classmethod
    def connect(cls, address: str | None) -> RayExecutor:
        """Join the cluster at ``address``, or start a local Ray (stopped on exit).

        Raises:
            ConfigError: Ray is not installed, or cannot be reached, joined or started.
        """
        from pywebbench.load.ray_agents import RayUnavailable, ray_session

        if address is not None:
            _reachable(address)
        session = ExitStack()
        try:
            ray = session.enter_context(ray_session(address))  # keeps our SIGTERM handler
        except RayUnavailable as exc:
            from pywebbench.study.options import flag_of

            # the field at fault, named by run's flag; anything else is --executor ray's need
            where = flag_of("load.ray_address") if exc.field == "ray_address" else "--executor ray"
            raise ConfigError(f"{where}: {exc.why}") from None
        return cls(ray, session)

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.session.close()

    @property
    def loaded_s(self) -> float:
        """The sum of the load windows of the tasks that ended."""
        return self._loaded_s

    @property
    def study(self) -> StudyContext:
        """The study being run (inside :meth:`prepared`)."""
        if self._study is None:
            raise RuntimeError("the ray executor is used outside prepared()")
        return self._study

    @contextmanager
    def prepared(self, study: StudyContext) -> Iterator[None]:
        """The mailbox, on this node, for the whole study (nothing is provisioned here)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(
            self.ray.get_runtime_context().get_node_id(), soft=True
        )
        self._study = study
        self._mailbox = (
            self.ray.remote(Mailbox)
            .options(num_cpus=0, max_concurrency=1000, scheduling_strategy=here)
            .remote()
        )
        self._remote = self.ray.remote(measure_round)
        try:
            yield
        finally:
            try:
                self.ray.kill(self._mailbox)
            except Exception:  # noqa: BLE001 - Ray is already gone
                pass
            self._mailbox = None
            self._study = None

    def run_round(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        """Every group of the round as a task at once; back when all have ended, with each
        group's outcomes.

        Raises:
            Interrupted: a task was stopped by Ctrl-C (what it measured is stored).
        """
        return self._tasks(groups, interleaved=False)

    def run_groups(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        """Every interleaved group as a task at once, each measured whole on its node (one
        group at a time on a host: the host lock); back when all have ended.

        Raises:
            Interrupted: a task was stopped by Ctrl-C (what it measured is stored).
        """
        return self._tasks(groups, interleaved=True)

    def _tasks(
        self, groups: Sequence[Sequence[CellProgress]], *, interleaved: bool
    ) -> list[list[CellOutcome]]:
        """Each of ``groups`` as a task at once (module doc); each group's outcomes.

        Raises:
            Interrupted: a task was stopped by Ctrl-C (what it measured is stored).
        """
        if not groups:
            return []
        tasks: dict[Any, _Task] = {}
        ended: list[_Task] = []
        self._rounds += 1
        try:
            for i, cells in enumerate(groups):
                task = _Task(
                    f"round{self._rounds}-group{i}", i, self._group(cells), cells, interleaved
                )
                where = self._where(task.group)
                ref = self._remote.options(
                    max_retries=0, num_cpus=1, scheduling_strategy=where
                ).remote(self._work(task), self._mailbox)
                tasks[ref] = task
            while tasks:
                with _deferred_interrupt():
                    ended += self._turn(tasks)
        except BaseException:
            with no_sigint():
                self._stop(tasks)
            raise
        if self.interrupted:
            raise Interrupted()
        by_index = {t.index: t.outcomes for t in ended}
        return [list(by_index[i] or []) for i in range(len(groups))]

    def _group(self, cells: Sequence[CellProgress]) -> str:
        first = cells[0].cell
        scope = self.study.setup.config.load.server_scope
        return first.variant.key if scope == "stack" else first.key

    def _where(self, group: str) -> Any:
        """A group goes back to the node it ran on (soft: elsewhere if that node is gone);
        a new one is spread over the nodes."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        home = self._home.get(group)
        return NodeAffinitySchedulingStrategy(home, soft=True) if home else "SPREAD"

    def _work(self, task: _Task) -> RoundWork:
        setup = self.study.setup
        return RoundWork(
            key=task.key,
            config_json=setup.config.model_dump_json(),
            run_id=setup.run_id,
            results_dir=str(setup.results_dir.resolve()),
            stack_ids=dict(setup.stack_ids),
            cells=[p.cell for p in task.cells],
            cell_ids=[p.cell_id for p in task.cells],
            ok=[p.ok for p in task.cells],
            next_rep=[p.next_rep for p in task.cells],
            interleaved=task.interleaved,
        )

    def _turn(self, tasks: dict[Any, _Task]) -> list[_Task]:
        """Serve the letters waiting, then settle the tasks that ended (returned)."""
        letters = self.ray.get(self._mailbox.take.remote(POLL_S))
        self._serve(tasks, letters)
        done, _ = self.ray.wait(list(tasks), num_returns=len(tasks), timeout=0)
        ended = [tasks.pop(ref) for ref in done]
        for task, ref in zip(ended, done, strict=True):
            self._settle(task, ref)
        return ended

    def _serve(self, tasks: dict[Any, _Task], letters: list[Letter]) -> None:
        """Run the letters' store operations (only those of ``STORE_OPERATIONS``) and show
        their events."""
        study = self.study
        by_key = {t.key: t for t in tasks.values()}
        cells = {c.key: c for c in study.cells}
        for number, sender, request in letters:
            kind, *rest = request
            task = by_key.get(sender)
            if kind == "hello" and task is not None:
                task.node, task.pid = rest
                self._home[task.group] = rest[0].node_id
            elif kind == "event":
                name, args = rest
                args = tuple(cells[a.key] if isinstance(a, CellRef) else a for a in args)
                if name == "phase" and task is not None and task.node is not None:
                    args = (f"{task.node.host}: {args[0]}",)
                getattr(study.events, name)(*args)
            elif kind == "store" and number is not None:
                self._mailbox.answer.remote(number, store_reply(study.store, *rest))

    def _settle(self, task: _Task, ref: Any) -> None:
        """Take a task's outcome (a lost task: see :meth:`_lost`)."""
        from ray.exceptions import TaskCancelledError

        try:
            outcome: RoundOutcome = self.ray.get(ref)
        except TaskCancelledError:
            self.interrupted = True
            return
        except Exception as exc:  # noqa: BLE001 - the worker or its node died, or the task failed
            self._lost(task, exc)
            return
        self._loaded_s += outcome.loaded_s
        if outcome.interrupted:
            self.interrupted = True
            return
        task.outcomes = [flat.outcome() for flat in outcome.cells]

    def _lost(self, task: _Task, exc: BaseException) -> None:
        """A task that ended without its outcome: the replicate it was measuring is failed,
        with the node and the reason, and so is every cell of the group that had not finished
        this round's replicate (what was stored before stays)."""
        node = task.node
        where = f"{node.label} node {node.node_id[:12]}" if node else "an unknown node"
        raised = type(exc).__name__.startswith("RayTaskError")
        reason = f"{'failed' if raised else 'lost'} on {where}: {_lost_reason(exc)}"
        store = self.study.store
        task.outcomes = []
        for p in task.cells:
            reps = store.replicates(p.cell_id)
            for rep in reps:
                if rep.status == CellStatus.RUNNING and rep.id is not None:
                    store.update_replicate(
                        rep.id,
                        status=CellStatus.FAILED,
                        finished_at=utcnow(),
                        failure_phase=Phase.MEASURE,
                        failure_reason=reason,
                    )
            task.outcomes.append(lost_outcome(p, reps, reason, str(exc)))

    def _stop(self, tasks: dict[Any, _Task]) -> None:
        """Ctrl-C (or a failure here): every task is stopped and given time to store what it
        measured and stop its server; a task still running after that is killed with its
        worker, whose server's watchdog then stops the server."""
        self.interrupted = True
        try:
            self.ray.get(self._mailbox.stop.remote(), timeout=10)
        except Exception:  # noqa: BLE001 - the mailbox is gone: the tasks are killed below
            pass
        deadline = time.monotonic() + STOP_GRACE_S
        while tasks and time.monotonic() < deadline:
            try:
                self._turn(tasks)
            except Exception:  # noqa: BLE001 - nothing more can be served
                break
        for ref in tasks:
            self.ray.cancel(ref, force=True)
