"""Matrix expansion: a :class:`StudyConfig` -> stack variants and cells, in run order.

A cell is one stack variant (stack + workers/threads) x workload x load point. Each cell has a
key that is stable for a given config, so ``--resume`` finds what is already measured.
Cells are independent units (own port, own cores) so they could be scheduled elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pywebbench.bind import Bind, can_bind_unix, cannot_bind_unix
from pywebbench.catalogue.base import Interpreter, Stack
from pywebbench.catalogue.byo import UserFramework, UserWorkload, parse_user_apps
from pywebbench.catalogue.mix import MixEntry
from pywebbench.catalogue.workloads import HttpRequest, Workload
from pywebbench.load.spec import LoadSpec, spec_for_request
from pywebbench.protocol import (
    Protocol,
    cannot_speak_h2c,
    cannot_speak_websocket,
    speaks_h2c,
    speaks_websocket,
)
from pywebbench.study.config import ConfigError, LoadConfig, StudyConfig


@dataclass(frozen=True)
class Variant:
    """A stack with its worker/thread settings: one row of the ``stacks`` table."""

    stack: Stack
    workers: int
    threads: int
    key: str
    max_requests: int = 0  # workers recycled after this many requests; 0 = never

    @property
    def name(self) -> str:
        return self.stack.name


@dataclass(frozen=True)
class CellPlan:
    """One unit of work of the matrix."""

    key: str
    ordinal: int
    variant: Variant
    workload: Workload
    params: dict[str, int]
    load_model: str  # "closed" | "open"
    connections: int
    rate: float | None
    #: "keepalive", "close" (a new connection per request) or a number N as text (a new
    #: connection after every N requests, httperf's --num-calls).
    connection_mode: str = "keepalive"
    bind: Bind = "tcp"  # or "unix": the server listens on a unix-domain socket
    protocol: Protocol = "http1"  # or "h2c": HTTP/2 with prior knowledge (docs/http2.md)
    streams: int = 1  # h2c: requests in flight per connection

    @property
    def load_point(self) -> str:
        """``c64`` / ``r1000``, with `` unix`` for a server on a unix socket, `` close`` for
        a connection per request (`` 100/conn`` for one every 100 requests) and `` h2c``
        (`` h2c×10`` with 10 streams per connection) for HTTP/2 (``c64 unix close``,
        ``c16 100/conn h2c×10``). TCP, keep-alive and HTTP/1.1 are
        the unlabelled defaults, so such cells keep their labels and keys."""
        point = f"r{self.rate:g}" if self.rate is not None else f"c{self.connections}"
        point += " unix" if self.bind == "unix" else ""
        if self.connection_mode == "close":
            point += " close"
        elif self.requests_per_connection:
            point += f" {self.requests_per_connection}/conn"
        if self.protocol == "h2c":
            point += " h2c" + (f"×{self.streams}" if self.streams > 1 else "")
        return point

    @property
    def requests_per_connection(self) -> int:
        """Requests each connection serves before it is closed and opened again; 0: no limit
        (keep-alive, or close: the engine's connection per request)."""
        return int(self.connection_mode) if self.connection_mode.isdigit() else 0

    @property
    def request(self) -> HttpRequest:
        return self.workload.request(**self.params)

    @property
    def label(self) -> str:
        return f"{self.variant.key} {self.workload.name} {self.load_point}"

    def load_spec(
        self,
        base_url: str,
        load: LoadConfig,
        cpus: Sequence[int],
        *,
        duration_s: float,
        **changes: Any,
    ) -> LoadSpec:
        """The load this cell puts on the server at ``base_url``: the one place a phase's spec
        is built (warm-up, measured iterations, knee probes, fault phase, syscalls window,
        instructions batches).

        The cell's settings (request, or a user's mix, connections, rate, connection mode,
        protocol and streams; the bind is in ``base_url``) and the study's (per-request timeout, I/O
        backend) are always carried; a phase adds only what is its own through ``changes``
        (a knee probe's ``rate`` and ``warmup_s``, and a connection per request to a server
        that closes every connection; the fault phase's ``fresh_share``).
        """
        spec = spec_for_request(
            base_url,
            self.request,
            connections=self.connections,
            duration_s=duration_s,
            timeout_s=load.timeout_s,
            cpus=cpus,
            rate=self.rate,
            keepalive=self.connection_mode != "close",
            io=load.io,
            protocol=self.protocol,
            streams=self.streams,
            requests_per_connection=self.requests_per_connection,
            message_bytes=self.params["size"] if self.workload.websocket else None,
        )
        if isinstance(self.workload, UserWorkload) and self.workload.mix:
            changes = {"mix": list(self.workload.mix), **changes}
        return spec.replace(**changes) if changes else spec


@dataclass
class Matrix:
    """Everything a study will run, plus what it cannot and why."""

    variants: list[Variant] = field(default_factory=list)
    cells: list[CellPlan] = field(default_factory=list)
    unavailable: list[tuple[str, str]] = field(default_factory=list)  # (stack name, reason)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (variant, why): not failures
    interpreters: list[Interpreter] = field(default_factory=list)
    #: The user's app (``--app``), one framework per project; its interface "" until detected.
    apps: list[UserFramework] = field(default_factory=list)

    @property
    def services(self) -> set[str]:
        """Services (redis, postgres) needed by the selected workloads."""
        return {s for c in self.cells for s in c.workload.services}

    @classmethod
    def combine(cls, *matrices: Matrix) -> Matrix:
        """One matrix running the cells of several, in order (e.g. built-in stacks and a
        user's app). Cell keys stay unique: they name their variant, which names its stack."""
        out = cls()
        for m in matrices:
            for i in m.interpreters:
                if i not in out.interpreters:
                    out.interpreters.append(i)
            out.variants += [v for v in m.variants if v.key not in {x.key for x in out.variants}]
            out.unavailable += m.unavailable
            out.skipped += m.skipped
            out.apps += [fw for fw in m.apps if fw not in out.apps]
            for c in m.cells:
                out.cells.append(dataclasses.replace(c, ordinal=len(out.cells)))
        keys = [c.key for c in out.cells]
        if len(keys) != len(set(keys)):
            raise ValueError("combined matrices repeat a cell")
        return out

    def cells_of(self, variant: Variant) -> list[CellPlan]:
        return [c for c in self.cells if c.variant is variant]

    def servable(self) -> Matrix:
        """This matrix without the stacks whose server cannot serve their app's interface: a
        user's app planned before its interface was known runs on WSGI and ASGI servers
        (:func:`expand`); once it is known (at bring-up) the others are skipped, each with
        its reason (``waitress cannot serve an ASGI app``), and their unavailable entries
        dropped. The cells keep their order, numbered again."""
        from pywebbench.catalogue.servers import ADAPTERS

        known = {fw.name: fw.interface for fw in self.apps if fw.interface}

        def why_not(server: str, framework: str) -> str | None:
            interface = known.get(framework)
            adapter = ADAPTERS.get(server)
            if interface is None or adapter is None or adapter.interface == interface:
                return None
            article = "an" if interface.upper().startswith("A") else "a"  # an ASGI, a WSGI
            return f"{server} cannot serve {article} {interface.upper()} app"

        out = Matrix(interpreters=list(self.interpreters), apps=list(self.apps))
        out.skipped = list(self.skipped)
        for v in self.variants:
            why = why_not(v.stack.server.name, v.stack.framework.name)
            if why is None:
                out.variants.append(v)
            elif (v.stack.name, why) not in out.skipped:
                out.skipped.append((v.stack.name, why))
        kept = [c for c in self.cells if any(c.variant is v for v in out.variants)]
        out.cells = [dataclasses.replace(c, ordinal=i) for i, c in enumerate(kept)]
        out.unavailable = [
            (name, reason)
            for name, reason in self.unavailable
            if why_not(*name.rsplit("/", 2)[1:]) is None
        ]
        return out


def _user_frameworks(config: StudyConfig) -> list[UserFramework]:
    """The user's app as frameworks: one per project directory (``app.project``), one with
    none; read from the flags and files only (an interface not given stays "", detected at
    bring-up: :func:`pywebbench.bringup.with_interfaces_detected`)."""
    app = config.app
    assert app is not None
    try:
        return list(
            parse_user_apps(
                app.app,
                app.interface,
                Path(app.requirements) if app.requirements else None,
                [Path(p) for p in app.projects],
                list(app.paths),
                app.expect_status,
                app.expect_body,
                mix=Path(app.mix) if app.mix else None,
                mix_entries=kept_mix(config),
            )
        )
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(f"app: {exc}") from None


def kept_mix(config: StudyConfig) -> list[MixEntry] | None:
    """The requests of the study's mix kept in its configuration (``app.mix_entries``, by
    :func:`keep_mix` when the run started); None when none are kept (no mix, a study not
    started by ``run``, or a run stored before they were kept): then the file is read."""
    if config.app is None or config.app.mix_entries is None:
        return None
    return [MixEntry.model_validate(e) for e in config.app.mix_entries]


def keep_mix(config: StudyConfig) -> None:
    """Read the study's mix file (``app.mix``) now, as the run starts, into
    ``app.mix_entries``: stored with the run's configuration, they are the mix of every cell,
    those ``--resume`` measures included, whatever becomes of the file. ConfigError naming
    ``--mix`` for a file that cannot be used."""
    from pywebbench.catalogue.mix import MixFileError, load_mix

    app = config.app
    if app is None or app.mix is None or app.mix_entries is not None:
        return
    try:
        entries = load_mix(Path(app.mix))
    except MixFileError as exc:
        raise ConfigError(f"app: --mix: {exc}") from None
    app.mix_entries = [e.model_dump(mode="json") for e in entries]


def resumed_mix_note(config: StudyConfig) -> str | None:
    """What ``--resume`` says of the mix (one line, not an error), or None: nothing to say
    (no mix, or the file still holds the requests the run started with). A file changed or
    gone since is named, the run keeping its own requests; a run stored before they were
    kept reads the file again, and that is said too."""
    from pywebbench.catalogue.mix import MixFileError, load_mix

    app = config.app
    if app is None or app.mix is None:
        return None
    kept = kept_mix(config)
    if kept is None:
        return (
            f"{app.mix}: this run kept no copy of its mix (stored by an earlier pywebbench); "
            "the cells still to measure use the file as it is now"
        )
    try:
        now: list[MixEntry] | None = load_mix(Path(app.mix))
    except MixFileError:
        now = None
    if now is not None and [e.model_dump(mode="json") for e in now] == app.mix_entries:
        return None
    endpoints = len({e.name for e in kept})
    what = "cannot be read now" if now is None else "changed since the run started"
    return (
        f"{app.mix} {what}: the cells still to measure keep the mix the run started "
        f"with ({len(kept)} requests over {endpoints} endpoints)"
    )


def _check_faults_of_mix(config: StudyConfig, workloads: Iterable[Workload]) -> None:
    """``--faults`` with a traffic mix: the fault phase aims its fault clients at, and checks
    the server's recovery with, a GET of the mix answering 2xx
    (:func:`~pywebbench.load.mix.fault_entry`); ConfigError naming both flags when the mix
    has none."""
    from pywebbench.load.mix import fault_entry

    if not config.load.faults or config.app is None:
        return
    for w in workloads:
        if isinstance(w, UserWorkload) and w.mix and fault_entry(w.mix) is None:
            raise ConfigError(
                f"--faults with --mix (load.faults, app.mix): {config.app.mix} has no GET "
                "request expecting a 2xx, which the fault phase aims its fault clients at "
                "and checks the server's recovery with; add one, or measure the mix in a run "
                "without --faults"
            )


def _check_server_options(config: StudyConfig, candidates: list[Any]) -> None:
    """Every ``matrix.server_options`` entry names a server in the study and a setting it
    takes (its adapter's ``settable``); ConfigError naming the entry otherwise."""
    adapters = {c.server.name: c.server for c in candidates}
    for name, options in config.matrix.server_options.items():
        where = f"matrix.server_options.{name}"
        if name not in adapters:
            raise ConfigError(f"{where}: {name!r} is not a server of this study")
        settable = getattr(adapters[name], "settable", {})
        for key, value in options.items():
            if key not in settable:
                known = ", ".join(settable) or "none"
                raise ConfigError(f"{where}.{key}: unknown setting; {name} takes: {known}")
            if value < 1:
                raise ConfigError(f"{where}.{key}: must be >= 1")


def expand(config: StudyConfig, interpreters: Sequence[Interpreter]) -> Matrix:
    """Pair servers and frameworks on the study's ``interpreters`` and list the cells in run
    order.

    Order: variant by variant (so each server is provisioned and started close to its
    cells), within a variant workload by workload, then load point.

    Reads files only (a user's requirements and mix), never runs, installs or builds
    anything. The interpreters come resolved (what ``matrix.interpreters`` names, probed and a
    requested CPython installed before planning:
    :func:`pywebbench.catalogue.interpreters.select`); a
    user's app whose interface is not given is planned on WSGI and ASGI servers, and its
    interface is detected at bring-up, which then drops the other servers' cells
    (:func:`pywebbench.bringup.with_interfaces_detected`, :meth:`Matrix.servable`).
    """
    from pywebbench.catalogue import stacks as stacks_mod
    from pywebbench.catalogue.workloads import WORKLOADS

    m = config.matrix
    servers = m.servers or None
    workload_names = m.workloads or None
    byo: dict[str, Workload] = {}
    user_fws: list[UserFramework] = []
    if config.app is not None:
        user_fws = _user_frameworks(config)
        frameworks: list[Any] | None = list(user_fws)
        for user_fw in user_fws:  # the projects of one app share its paths (or mix)
            byo.update(getattr(user_fw, "user_workloads", {}))
        workload_names = None
        _check_faults_of_mix(config, byo.values())
    else:
        frameworks = m.frameworks or None
    try:
        candidates = stacks_mod.plan(
            interpreters,
            servers=servers,
            frameworks=frameworks,
            workloads=workload_names,
        )
    except (ValueError, KeyError) as exc:
        raise ConfigError(str(exc)) from None

    for name, params in m.workload_params.items():
        if name not in WORKLOADS:
            raise ConfigError(f"matrix.workload_params.{name}: unknown workload")
        try:
            WORKLOADS[name].resolve(**params)
        except ValueError as exc:
            raise ConfigError(f"matrix.workload_params.{name}: {exc}") from None

    _check_server_options(config, candidates)
    out = Matrix(interpreters=list(interpreters), apps=user_fws)
    modes = [str(m) for m in config.load.connection_mode]
    if config.load.model == "open":
        points: list[tuple[int, float | None, str]] = [
            (c, r, mode)
            for r in config.load.rates
            for c in config.load.connections
            for mode in modes
        ]
    else:
        points = [(c, None, mode) for c in config.load.connections for mode in modes]
    if "close" in modes and "h2c" in config.load.protocol:
        out.skipped.append(("h2c close", "h2c cells keep their connections (no close cells)"))
    ordinal = 0
    for cand in candidates:
        if cand.stack is None:
            out.unavailable.append((cand.name, cand.unavailable or "unavailable"))
            continue
        binds = _binds(config, cand.stack, out)
        all_workloads = [byo[w] if byo else WORKLOADS[w] for w in cand.workloads]
        http_points: list[tuple[int, float | None, str, Bind, Protocol]] = []
        if any(not wl.websocket for wl in all_workloads):
            protocols = _protocols(config, cand.stack, out)
            http_points = [
                (c, r, mode, b, proto)
                for c, r, mode in points
                for b in binds
                for proto in protocols
                if not (proto == "h2c" and mode == "close")  # h2c keeps its connections
            ]
        ws_points: list[tuple[int, float | None, str, Bind, Protocol]] = []
        if any(wl.websocket for wl in all_workloads):
            ws_points = [(c, r, mode, "tcp", "ws") for c, r, mode in points]
            if not speaks_websocket(cand.server):
                out.skipped.append((f"{cand.stack.name} ws", cannot_speak_websocket(cand.server)))
                ws_points = []
            elif "tcp" not in binds:
                out.skipped.append((f"{cand.stack.name} ws", "WebSocket cells listen on TCP"))
                ws_points = []
        workloads = [wl for wl in all_workloads if (ws_points if wl.websocket else http_points)]
        if not workloads:
            continue
        settings = config.workers_threads(cand.server.name)
        for workers, threads, max_requests in _server_settings(config, cand.stack, out):
            parts = []
            if len(settings) > 1 or (workers, threads) != (1, 1):
                parts.append(f"w{workers}t{threads}")
            if max_requests:
                parts.append(f"mr{max_requests}")
            key = cand.stack.name + ("@" + ",".join(parts) if parts else "")
            variant = Variant(cand.stack, workers, threads, key, max_requests)
            out.variants.append(variant)
            for wl in workloads:
                params = wl.resolve(**m.workload_params.get(wl.name, {}))
                for conc, rate, mode, bind, proto in ws_points if wl.websocket else http_points:
                    streams = config.load.streams if proto == "h2c" else 1
                    cell = CellPlan(
                        "",
                        ordinal,
                        variant,
                        wl,
                        params,
                        config.load.model,
                        conc,
                        rate,
                        mode,
                        bind,
                        proto,
                        streams,
                    )
                    params_tag = "".join(f",{k}={v}" for k, v in sorted(params.items()))
                    key_cell = f"{variant.key}|{wl.name}{params_tag}|{cell.load_point}"
                    out.cells.append(dataclasses.replace(cell, key=key_cell))
                    ordinal += 1
    return out


def _binds(config: StudyConfig, stack: Stack, out: Matrix) -> list[Bind]:
    """Where a stack's server listens, cell by cell: the ``bind`` values it can do. A unix
    socket a server cannot bind is skipped with a note in ``out.skipped`` (not a failure)."""
    usable = [b for b in config.load.bind if b == "tcp" or can_bind_unix(stack.server)]
    if len(usable) < len(config.load.bind):
        out.skipped.append((f"{stack.name} bind unix", cannot_bind_unix(stack.server)))
    return usable


def _protocols(config: StudyConfig, stack: Stack, out: Matrix) -> list[Protocol]:
    """What a stack's cells speak: the ``protocol`` values its server serves. h2c on a server
    that cannot is skipped with a note in ``out.skipped`` (not a failure)."""
    usable: list[Protocol] = [
        p for p in config.load.protocol if p == "http1" or speaks_h2c(stack.server)
    ]
    if len(usable) < len(config.load.protocol):
        out.skipped.append((f"{stack.name} h2c", cannot_speak_h2c(stack.server)))
    return usable


def _server_settings(config: StudyConfig, stack: Stack, out: Matrix) -> list[tuple[int, int, int]]:
    """(workers, threads, max requests) of a stack's variants. Recycling values a server
    cannot apply are skipped with a note in ``out.skipped`` (not a failure)."""
    settings = config.workers_threads(stack.server.name)
    recycling = config.matrix.worker_max_requests
    usable = [n for n in recycling if n == 0 or stack.server.max_requests_flag is not None]
    for n in recycling:
        if n not in usable:
            out.skipped.append(
                (f"{stack.name} max-requests {n}", f"{stack.server.name} cannot recycle workers")
            )
    return [(w, t, n) for w, t in settings for n in usable]
