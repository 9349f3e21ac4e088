"""Bring one stack up, verified, and take it down: provision -> services -> launch -> verify.

This is the only implementation of the per-stack pipeline. ``pywebbench run`` (between
its load iterations), ``pywebbench verify`` (for every workload of every stack) and
``pywebbench ab`` (both sides) all call it, so a stack that one accepts the others accept too:
:func:`launch_options` is the one builder of how a server starts, and :class:`ServerPool`
keeps several verified server processes up and stops every one of them (an A/B's sides, an
interleaved group's stacks).

Every step raises :class:`StackFailure` naming its :class:`Phase`, a one-line reason, and
where to find more (a log tail, the log's path).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from pywebbench.bind import Bind
from pywebbench.catalogue.base import Stack
from pywebbench.catalogue.byo import UserFramework, UserWorkload
from pywebbench.catalogue.workloads import Workload
from pywebbench.store.model import Phase
from pywebbench.verify.user_app import check_path

if TYPE_CHECKING:
    from pywebbench.launch import RunningServer
    from pywebbench.load.mix import EndpointCheck
    from pywebbench.provision.venv import ProvisionedEnv
    from pywebbench.study.config import StudyConfig
    from pywebbench.study.matrix import CellPlan, Matrix, Variant

Progress = Callable[[str], None]


class StackFailure(Exception):
    """A stack cannot go on: the ``phase``, a one-line ``reason``, and the evidence."""

    def __init__(
        self,
        phase: Phase,
        reason: str,
        detail: str | None = None,
        log_path: Path | None = None,
    ) -> None:
        super().__init__(f"{phase.value}: {reason}")
        self.phase = phase
        self.reason = reason
        self.detail = detail
        self.log_path = log_path


def one_line(text: object, limit: int = 300) -> str:
    """``text`` folded onto one line of at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _tail(path: Path | None, limit: int = 4000) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(errors="replace")[-limit:]
    except OSError:
        return None


# ------------------------------------------------------------------------------ provision


def provision(
    stack: Stack, *, progress: Progress | None = None, timeout_s: float | None = None
) -> ProvisionedEnv:
    """The stack's virtualenv, built or found cached (each uv command bounded by ``timeout_s``,
    default the provisioner's); :class:`StackFailure` (provision)."""
    from pywebbench.provision.venv import ProvisionError
    from pywebbench.provision.venv import provision as build

    try:
        return build(stack, progress=progress, timeout_s=timeout_s)
    except ProvisionError as exc:
        raise StackFailure(
            Phase.PROVISION, one_line(exc.reason), _tail(exc.log_path), exc.log_path
        ) from None


# ------------------------------------------------------------------------------- services


def services_needed(workloads: Iterable[Workload]) -> list[str]:
    """The services (``redis``, ``postgres``) the workloads need, sorted."""
    return sorted({s for w in workloads for s in w.services})


class Services:
    """The services a set of workloads needs, running on loopback for as long as the block.

    A service that fails to start does not raise: :attr:`failure` holds it, and
    :meth:`failure_for` hands it to each workload that needs a service, so workloads that
    need none still run.
    """

    def __init__(self, names: Sequence[str], workdir: Path) -> None:
        self.names = list(names)
        self.workdir = Path(workdir)
        self.env: dict[str, str] = {}
        self.failure: StackFailure | None = None
        self._running: object | None = None

    def __enter__(self) -> Services:
        if not self.names:
            return self
        from pywebbench.provision.services import start_services

        self.workdir.mkdir(parents=True, exist_ok=True)
        running = start_services(self.names, self.workdir)
        try:
            self.env = dict(running.__enter__())
        except Exception as exc:  # noqa: BLE001 - recorded; the workloads needing it fail
            self.failure = StackFailure(
                Phase.SERVICES, one_line(f"starting {', '.join(self.names)} failed: {exc}")
            )
            return self
        self._running = running
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        running, self._running = self._running, None
        if running is not None:
            running.__exit__(None, None, None)  # type: ignore[attr-defined]

    def failure_for(self, workload: Workload) -> StackFailure | None:
        """Why ``workload`` cannot run (its service failed to start), or None."""
        return self.failure if self.failure is not None and workload.services else None


# ------------------------------------------------------------------------ a user's app


def with_interfaces_detected(matrix: Matrix) -> Matrix:
    """The bring-up of a study's app: a matrix planned before its interface was known
    (:func:`pywebbench.study.matrix.expand` plans it on WSGI and ASGI servers) with the
    interface detected (in a virtualenv of the matrix's first interpreter:
    :func:`pywebbench.provision.user_app.detect_interfaces`) and the cells of the servers
    that cannot serve it dropped (:meth:`pywebbench.study.matrix.Matrix.servable`).
    Raises ValueError naming ``--app`` when the app cannot be imported or told."""
    from pywebbench.provision.user_app import detect_interfaces  # a venv, a subprocess

    detect_interfaces(
        matrix.apps, interpreter=matrix.interpreters[0] if matrix.interpreters else None
    )
    return matrix.servable()


# --------------------------------------------------------------------------------- launch


def is_user_app(stack: Stack) -> bool:
    """True when the stack serves a user's own app (``--app``) rather than a built-in one."""
    return isinstance(stack.framework, UserFramework)


def ready_path(stack: Stack, workloads: Sequence[Workload]) -> str:
    """The path whose answer means the server is up: the first GET path of the workloads
    (a user's app may answer nothing else), ``/hello`` for built-in apps otherwise."""
    for w in workloads:
        request = w.request(**w.resolve())
        if request.method == "GET":
            return request.path
    return "/" if is_user_app(stack) else "/hello"


@dataclass(frozen=True)
class LaunchOptions:
    """How to start a server: where, how many workers, the environment its app gets."""

    log_dir: Path
    cpus: Sequence[int] = (0,)
    workers: int = 1
    threads: int = 1
    app_env: Mapping[str, str] = field(default_factory=dict)
    start_timeout_s: float = 60.0
    max_requests: int = 0  # recycle each worker after this many requests; 0 = never
    #: Server settings the user set (the adapter's ``settable`` ones).
    server_options: Mapping[str, int] = field(default_factory=dict)
    #: Where the server listens: "tcp" (a loopback port) or "unix" (a unix socket).
    bind: Bind = "tcp"
    #: A command the server runs under (valgrind for ``--instructions``); empty: none.
    wrapper: Sequence[str] = ()
    #: What the server is asked to speak: "http1" or "h2c" (``--protocol``).
    protocol: str = "http1"


def launch_options(
    variant: Variant,
    *,
    log_dir: Path,
    cpus: Sequence[int] = (0,),
    services: Services | None = None,
    bind: Bind = "tcp",
    protocol: str = "http1",
    config: StudyConfig | None = None,
    wrapper: Sequence[str] = (),
) -> LaunchOptions:
    """How ``variant``'s servers start: the one place :class:`LaunchOptions` are built.

    Its workers, threads and worker recycling, pinned to ``cpus``, logging under
    ``log_dir``, listening on ``bind``, speaking ``protocol``, under ``wrapper``, with the
    environment of the running ``services`` (redis, PostgreSQL). A study's ``config`` adds
    its start timeout, the server options set for the variant's server and, with
    ``--flamegraph``, the vmprof hook's environment; without one (``verify``) the defaults.
    """
    app_env = dict(services.env) if services is not None else {}
    study: dict[str, Any] = {}
    if config is not None:
        from pywebbench.meter.vmprof import vmprof_env

        app_env.update(vmprof_env(config.load.flamegraph, variant.stack))
        study["start_timeout_s"] = config.timeouts.start_s
        study["server_options"] = config.matrix.server_options.get(variant.stack.server.name, {})
    return LaunchOptions(
        log_dir=log_dir,
        cpus=cpus,
        workers=variant.workers,
        threads=variant.threads,
        app_env=app_env,
        max_requests=variant.max_requests,
        bind=bind,
        wrapper=wrapper,
        protocol=protocol,
        **study,
    )


def start(stack: Stack, env: ProvisionedEnv, options: LaunchOptions, ready: str) -> RunningServer:
    """Start the stack's server pinned to its cores; return once ``ready`` answers.

    :class:`StackFailure` (start) with the log tail when it does not come up.
    """
    from pywebbench.launch import LaunchError, start_server

    fw = stack.framework
    user = fw if isinstance(fw, UserFramework) else None
    try:
        return start_server(
            stack,
            env,
            cpus=options.cpus,
            workers=options.workers,
            threads=options.threads,
            app_env=options.app_env,
            app_dir=user.app_dir if user else None,
            app=user.app if user else None,
            log_dir=options.log_dir,
            ready_path=ready,
            start_timeout_s=options.start_timeout_s,
            max_requests=options.max_requests,
            server_options=options.server_options,
            bind=options.bind,
            wrapper=options.wrapper,
            protocol=options.protocol,
        )
    except LaunchError as exc:
        tail = " | ".join(exc.log_tail.strip().splitlines()[-3:])
        reason = f"{exc.phase}: {exc.reason}" + (f" [log: {tail}]" if tail else "")
        raise StackFailure(
            Phase.START, one_line(reason), exc.log_tail or None, exc.log_path
        ) from None


def stop(server: RunningServer) -> float:
    """Stop the server's whole process group; returns how long it took."""
    started = time.monotonic()
    server.stop()
    return time.monotonic() - started


@contextmanager
def running(
    stack: Stack, env: ProvisionedEnv, options: LaunchOptions, ready: str
) -> Iterator[RunningServer]:
    """The stack's server, started and stopped around the block."""
    server = start(stack, env, options, ready)
    try:
        yield server
    finally:
        stop(server)


# --------------------------------------------------------------------------------- verify


@dataclass
class Check:
    """The verdict on one workload of a running server."""

    workload: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: A user's mix: each endpoint's check, in the mix's order (``problems`` has a line per
    #: endpoint that failed); empty for any other workload.
    endpoints: list[EndpointCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def failure(self) -> StackFailure | None:
        """The verify failure this check is, or None when it passed."""
        if self.ok:
            return None
        return StackFailure(
            Phase.VERIFY, one_line("; ".join(self.problems)), "\n".join(self.problems)
        )


def _check_mix(server: RunningServer, workload: UserWorkload, timeout_s: float) -> Check:
    """Each endpoint of a user's mix requested once and its status checked, as ``load --mix``
    does (:func:`pywebbench.load.mix.check_endpoints`): a problem per endpoint that failed,
    and every endpoint's check."""
    from pywebbench.load.mix import check_endpoints
    from pywebbench.load.spec import spec_for_request

    spec = spec_for_request(
        server.base_url, workload.request(), connections=1, duration_s=1.0,
        timeout_s=timeout_s, cpus=[], protocol="h2c" if server.protocol == "h2c" else "http1",
    ).replace(mix=list(workload.mix))  # fmt: skip
    checks = check_endpoints(spec)
    problems = [f"{c.label}: {c.problem}" for c in checks if not c.ok]
    return Check(workload.name, problems, endpoints=checks)


def check(
    server: RunningServer,
    stack: Stack,
    workload: Workload,
    params: Mapping[str, int] | None = None,
    *,
    timeout_s: float = 10.0,
) -> Check:
    """Verify that ``server`` answers ``workload`` correctly.

    A user's path is checked against the user's expectations; a built-in workload against
    its TechEmpower-style rules, lenient where the server's adapter says it omits the
    Server or Date header (a warning then, not a problem). A crashing checker is a problem.
    The requests speak what the server was started for (``server.protocol``).
    """
    from pywebbench.verify import verify

    adapter = stack.server
    try:
        if workload.websocket:
            from pywebbench.verify.websocket import verify_ws

            problems, warnings = verify_ws(
                server.base_url, workload, timeout_s=timeout_s, **dict(params or {})
            )
            return Check(workload.name, problems, warnings)
        if isinstance(workload, UserWorkload) and workload.mix:
            return _check_mix(server, workload, timeout_s)
        if isinstance(workload, UserWorkload):
            path = check_path(
                server.base_url, workload, timeout_s=timeout_s, protocol=server.protocol
            )
            return Check(workload.name, list(path.problems), list(path.warnings))
        report = verify(
            server.base_url,
            workload,
            expect_server_header=getattr(adapter, "sends_server_header", True),
            expect_date_header=getattr(adapter, "sends_date_header", True),
            timeout_s=timeout_s,
            protocol=server.protocol,
            **dict(params or {}),
        )
    except Exception as exc:  # noqa: BLE001 - a verification crash is a verify failure
        return Check(workload.name, [f"verification raised {type(exc).__name__}: {exc}"])
    return Check(workload.name, list(report.problems), list(report.warnings))


class ProvisionStep(Protocol):
    """:func:`provision`: a stack's virtualenv, built or found cached."""

    def __call__(
        self,
        stack: Stack,
        *,
        progress: Progress | None = None,
        timeout_s: float | None = None,
    ) -> ProvisionedEnv: ...


class CheckStep(Protocol):
    """:func:`check`: does a running server answer a workload correctly?"""

    def __call__(
        self,
        server: RunningServer,
        stack: Stack,
        workload: Workload,
        params: Mapping[str, int] | None = None,
        *,
        timeout_s: float = 10.0,
    ) -> Check: ...


@dataclass(frozen=True)
class BringUp:
    """The steps of the per-stack pipeline as one value, this module's by default; a test
    hands in fakes (tests/fake_bench.py, through run/seams.py)."""

    provision: ProvisionStep = provision
    #: The services a set of workloads needs (names, working directory), a context manager.
    services: Callable[[Sequence[str], Path], Services] = Services
    #: Start a stack's server (stack, virtualenv, launch options, ready path).
    start: Callable[[Stack, ProvisionedEnv, LaunchOptions, str], RunningServer] = start
    check: CheckStep = check
    #: Stop a server's process group; the seconds it took.
    stop: Callable[[RunningServer], float] = stop

    def verify(
        self, server: RunningServer, cell: CellPlan, timeout_s: float
    ) -> StackFailure | None:
        """Why ``server`` does not answer ``cell``'s workload correctly (None: it does)."""
        return self.check(
            server, cell.variant.stack, cell.workload, cell.params, timeout_s=timeout_s
        ).failure()


# ----------------------------------------------------------------------------- server pool


class ServerPool:
    """Server processes of one or more stacks, kept up together: each started pinned to the
    server cores (its log in a directory of its own), verified on its cell's workload, and
    every one stopped when the block ends, whatever ends it (an exception, Ctrl-C).
    ``pywebbench ab`` keeps both sides' processes in one, an interleaved group
    (run/interleaved.py) every stack's.

    ``launch`` gives a cell's virtualenv and launch options (:func:`launch_options`), whose
    log directory is its stack's: each process logs in ``process-K`` under it. ``steps``
    start, check and stop each process (default: this module's; the study's host bench hands
    in its seams, run/seams.py).
    """

    def __init__(
        self,
        launch: Callable[[CellPlan], tuple[ProvisionedEnv, LaunchOptions]],
        *,
        verify_timeout_s: float = 10.0,
        steps: BringUp | None = None,
    ) -> None:
        self._launch = launch
        self.verify_timeout_s = verify_timeout_s
        self._steps = steps or BringUp()
        #: Every process started and not stopped yet, in the order they started.
        self.running: list[RunningServer] = []

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self, cell: CellPlan, k: int) -> RunningServer:
        """Start process ``k`` of ``cell``'s stack and keep it; :class:`StackFailure`
        (start) when it does not come up."""
        server = self._start_process(cell, k)
        self.running.append(server)
        return server

    def _start_process(self, cell: CellPlan, k: int) -> RunningServer:
        env, options = self._launch(cell)
        stack = cell.variant.stack
        own = replace(options, log_dir=Path(options.log_dir) / f"process-{k}")
        return self._steps.start(stack, env, own, ready_path(stack, [cell.workload]))

    def verify(self, server: RunningServer, cell: CellPlan) -> StackFailure | None:
        """Why ``server`` does not answer ``cell``'s workload correctly (None: it does)."""
        return self._steps.verify(server, cell, self.verify_timeout_s)

    def stop(self, server: RunningServer) -> None:
        """Stop one process of the pool; it leaves the pool once stopped (one whose stop
        failed stays, and :meth:`close` tries it again)."""
        self._stop_process(server)
        if server in self.running:
            self.running.remove(server)

    def _stop_process(self, server: RunningServer) -> None:
        self._steps.stop(server)

    def close(self) -> None:
        """Stop every process still up, all at once (each stop waits for its process group
        to exit; an interleaved group's 48 processes waited one after another). One that
        fails to stop, or a Ctrl-C while they stop, does not keep the others up: the first
        such error is raised once they are all stopped."""
        servers, self.running = self.running[::-1], []
        errors: list[BaseException] = []

        def stop(server: RunningServer) -> None:
            try:
                self._stop_process(server)
            except BaseException as exc:  # noqa: BLE001 - raised after the others stop
                errors.append(exc)

        threads = [threading.Thread(target=stop, args=(s,), name="pwb-stop") for s in servers]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                try:
                    t.join()
                except KeyboardInterrupt as exc:  # the stops go on; raised once they end
                    errors.append(exc)
        if errors:
            raise errors[0]
