"""``pywebbench run --executor ray``: a study's groups of cells measured in parallel, as Ray
tasks on the nodes of a cluster (docs/scale-out.md).

Each round of the runner's ``_run_groups`` becomes one Ray task per group (a cell, or a whole
stack under ``server_scope = "stack"``), and the driver waits for every task of a round
before it starts the next, so rounds keep their meaning. A task does on its node what the
local executor does here, with the same code: it provisions the group's stacks (in the node's
own venv cache), starts the services its cells need, and runs the runner's ``_round``: one
fresh server and one replicate of each cell, server and generator pinned to the node's cores
by the same rules. Its store writes and display events go to the driver through the mailbox
(:mod:`~pywebbench.run.relay`), and the driver alone writes the store.

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
from typing import TYPE_CHECKING, Any, cast

from pywebbench.bringup import StackFailure, one_line
from pywebbench.faults.outcome import CellRobustness
from pywebbench.run.config import ConfigError, StudyConfig
from pywebbench.run.executor import prepared_here
from pywebbench.run.host import cpu_model, usable_cpus
from pywebbench.run.matrix import CellPlan, Matrix
from pywebbench.run.measure import Interrupted, no_sigint
from pywebbench.run.relay import CellRef, Letter, Mailbox, NodeFacts, RemoteStore, TaskRelay
from pywebbench.run.relay import remote_events as _remote_events
from pywebbench.store import CellStatus, Phase, Store, utcnow

if TYPE_CHECKING:
    from pywebbench.run.runner import StudyRunner, _CellState

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


@dataclass(frozen=True)
class CellOutcome:
    """How one cell's replicate of a round went (what the driver's cell state needs)."""

    ok: int
    next_rep: int
    failure: tuple[str, str, str | None] | None  # phase, reason, detail
    robustness: CellRobustness | None


@dataclass(frozen=True)
class RoundOutcome:
    """What a task hands back: each cell's outcome, and whether Ctrl-C ended it."""

    cells: list[CellOutcome]
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


def _node_runner(work: RoundWork, relay: TaskRelay, node: NodeFacts) -> StudyRunner:
    """The study's runner on this node for ``work``'s cells: the store and the display are
    the driver's (through the relay), the load generator is this node's."""
    from pywebbench.run.runner import StudyRunner

    config = StudyConfig.model_validate_json(work.config_json)
    variants = list({c.variant.key: c.variant for c in work.cells}.values())
    results_dir = Path(work.results_dir)
    runner = StudyRunner(
        config,
        Matrix(variants=variants, cells=list(work.cells)),
        cast(Store, RemoteStore(relay, node, results_dir / "pywebbench.sqlite")),
        results_dir=_writable(results_dir),
        events=_remote_events(relay),
        run_id=work.run_id,
    )
    runner._stack_ids = dict(work.stack_ids)
    return runner


def measure_round(work: RoundWork, mailbox: Any) -> RoundOutcome:
    """Run by Ray on a node: one replicate of each of ``work``'s cells (see the module doc)."""
    import ray

    from pywebbench.load.ray_agents import measuring_priority
    from pywebbench.run.runner import _CellState

    measuring_priority()  # before any server or load starts from this worker

    relay = TaskRelay(ray, mailbox, work.key)
    node = this_node(ray)
    relay.post(("hello", node, os.getpid()))
    runner = _node_runner(work, relay, node)
    states = [
        _CellState(cell=c, cell_id=i, ok=ok, next_rep=n)
        for c, i, ok, n in zip(work.cells, work.cell_ids, work.ok, work.next_rep, strict=True)
    ]
    interrupted = False
    with _Stoppable(ray, mailbox) as stoppable:
        try:
            stoppable.watch()
            with host_lock(relay), prepared_here(runner):
                for st in states:  # this node could not provision the stack or start a service
                    st.failure = runner._provision_failed.get(st.cell.variant.key)
                    if st.failure is None and runner._services is not None:
                        st.failure = runner._services.failure_for(st.cell.workload)
                runner._round(states)
        except (KeyboardInterrupt, Interrupted):
            interrupted = True
    return RoundOutcome(
        cells=[
            CellOutcome(
                ok=st.ok,
                next_rep=st.next_rep,
                failure=_flat(st.failure),
                robustness=runner._robustness.get(st.cell_id),
            )
            for st in states
        ],
        interrupted=interrupted,
        loaded_s=runner._measure.loaded_s,
    )


def _flat(failure: StackFailure | None) -> tuple[str, str, str | None] | None:
    """A failure as plain values (an exception with its own arguments does not travel)."""
    return None if failure is None else (str(failure.phase), failure.reason, failure.detail)


# ------------------------------------------------------------------------ on the driver


@dataclass
class _Task:
    """A task in flight: its group's cell states, and where it runs once it said so."""

    key: str
    group: str
    states: list[_CellState]
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
    interrupted: bool = False
    _mailbox: Any = None
    _remote: Any = None  # measure_round as a Ray remote function
    _rounds: int = 0
    _home: dict[str, str] = field(default_factory=dict)  # group -> the node it ran on

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
            from pywebbench.run.options import flag_of

            # the field at fault, named by run's flag; anything else is --executor ray's need
            where = flag_of("load.ray_address") if exc.field == "ray_address" else "--executor ray"
            raise ConfigError(f"{where}: {exc.why}") from None
        return cls(ray, session)

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.session.close()

    @contextmanager
    def prepared(self, runner: StudyRunner) -> Iterator[None]:
        """The mailbox, on this node, for the whole study (nothing is provisioned here)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(
            self.ray.get_runtime_context().get_node_id(), soft=True
        )
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

    def run_round(self, runner: StudyRunner, groups: Sequence[list[_CellState]]) -> None:
        """Every group of the round as a task at once; back when all have ended.

        Raises:
            Interrupted: a task was stopped by Ctrl-C (what it measured is stored).
        """
        if not groups:
            return
        tasks: dict[Any, _Task] = {}
        self._rounds += 1
        try:
            for i, active in enumerate(groups):
                task = _Task(f"round{self._rounds}-group{i}", self._group(runner, active), active)
                where = self._where(task.group)
                ref = self._remote.options(
                    max_retries=0, num_cpus=1, scheduling_strategy=where
                ).remote(self._work(runner, task), self._mailbox)
                tasks[ref] = task
            while tasks:
                with _deferred_interrupt():
                    self._turn(runner, tasks)
        except BaseException:
            with no_sigint():
                self._stop(runner, tasks)
            raise
        if self.interrupted:
            raise Interrupted()

    @staticmethod
    def _group(runner: StudyRunner, active: list[_CellState]) -> str:
        first = active[0].cell
        return first.variant.key if runner.config.load.server_scope == "stack" else first.key

    def _where(self, group: str) -> Any:
        """A group goes back to the node it ran on (soft: elsewhere if that node is gone);
        a new one is spread over the nodes."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        home = self._home.get(group)
        return NodeAffinitySchedulingStrategy(home, soft=True) if home else "SPREAD"

    @staticmethod
    def _work(runner: StudyRunner, task: _Task) -> RoundWork:
        return RoundWork(
            key=task.key,
            config_json=runner.config.model_dump_json(),
            run_id=runner.run_id,
            results_dir=str(runner.results_dir.resolve()),
            stack_ids=dict(runner._stack_ids),
            cells=[st.cell for st in task.states],
            cell_ids=[st.cell_id for st in task.states],
            ok=[st.ok for st in task.states],
            next_rep=[st.next_rep for st in task.states],
        )

    def _turn(self, runner: StudyRunner, tasks: dict[Any, _Task]) -> None:
        """Serve the letters waiting, then settle the tasks that ended."""
        letters = self.ray.get(self._mailbox.take.remote(POLL_S))
        self._serve(runner, tasks, letters)
        done, _ = self.ray.wait(list(tasks), num_returns=len(tasks), timeout=0)
        for ref in done:
            self._settle(runner, tasks.pop(ref), ref)

    def _serve(self, runner: StudyRunner, tasks: dict[Any, _Task], letters: list[Letter]) -> None:
        by_key = {t.key: t for t in tasks.values()}
        cells = {c.key: c for c in runner.matrix.cells}
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
                getattr(runner.events, name)(*args)
            elif kind == "store" and number is not None:
                method, args, kwargs = rest
                try:
                    reply: tuple[str, Any] = ("ok", getattr(runner.store, method)(*args, **kwargs))
                except Exception as exc:  # noqa: BLE001 - raised again in the task
                    reply = ("error", exc)
                self._mailbox.answer.remote(number, reply)

    def _settle(self, runner: StudyRunner, task: _Task, ref: Any) -> None:
        """Take a task's outcome into its cells' states (a lost task: see :meth:`_lost`)."""
        from ray.exceptions import TaskCancelledError

        try:
            outcome: RoundOutcome = self.ray.get(ref)
        except TaskCancelledError:
            self.interrupted = True
            return
        except Exception as exc:  # noqa: BLE001 - the worker or its node died, or the task failed
            self._lost(runner, task, exc)
            return
        for st, cell in zip(task.states, outcome.cells, strict=True):
            st.ok, st.next_rep = cell.ok, cell.next_rep
            if cell.failure is not None:
                phase, reason, detail = cell.failure
                st.failure = StackFailure(Phase(phase), reason, detail)
            if cell.robustness is not None:
                runner._robustness[st.cell_id] = cell.robustness
        runner._measure.loaded_s += outcome.loaded_s
        self.interrupted = self.interrupted or outcome.interrupted

    def _lost(self, runner: StudyRunner, task: _Task, exc: BaseException) -> None:
        """A task that ended without its outcome: the replicate it was measuring is failed,
        with the node and the reason, and so is every cell of the group that had not finished
        this round's replicate (what was stored before stays)."""
        node = task.node
        where = f"{node.label} node {node.node_id[:12]}" if node else "an unknown node"
        raised = type(exc).__name__.startswith("RayTaskError")
        reason = f"{'failed' if raised else 'lost'} on {where}: {_lost_reason(exc)}"
        store = runner.store
        for st in task.states:
            reps = store.replicates(st.cell_id)
            running = [r for r in reps if r.status == CellStatus.RUNNING and r.id is not None]
            for rep in running:
                store.update_replicate(
                    cast(int, rep.id),
                    status=CellStatus.FAILED,
                    finished_at=utcnow(),
                    failure_phase=Phase.MEASURE,
                    failure_reason=reason,
                )
            this_round = [r for r in reps if r.replicate >= st.next_rep]
            st.ok = sum(1 for r in reps if r.status == CellStatus.OK)
            st.next_rep = max((r.replicate for r in reps), default=st.next_rep - 1) + 1
            if not any(r.status == CellStatus.OK for r in this_round):
                phase = Phase.MEASURE if running else Phase.START
                st.failure = StackFailure(phase, reason, str(exc))

    def _stop(self, runner: StudyRunner, tasks: dict[Any, _Task]) -> None:
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
                self._turn(runner, tasks)
            except Exception:  # noqa: BLE001 - nothing more can be served
                break
        for ref in tasks:
            self.ray.cancel(ref, force=True)
