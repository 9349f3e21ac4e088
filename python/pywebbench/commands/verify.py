"""``pywebbench verify``: provision, start and check every selected stack on every workload."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console
from rich.markup import escape

from pywebbench.bind import BINDS, Bind, can_bind_unix, cannot_bind_unix
from pywebbench.catalogue.base import Framework
from pywebbench.catalogue.stacks import Candidate
from pywebbench.catalogue.workloads import Workload
from pywebbench.commands.stacks import filter_options, plan_or_usage_error, select_interpreters
from pywebbench.help_screen import OneScreen
from pywebbench.protocol import (
    HTTP_PROTOCOLS,
    Protocol,
    cannot_speak_h2c,
    cannot_speak_websocket,
    speaks_h2c,
    speaks_websocket,
)

if TYPE_CHECKING:
    from pywebbench.bringup import BringUp, Services, StackFailure
    from pywebbench.catalogue.mix import MixEntry


@dataclass
class Outcome:
    """One line of the verdict: a workload of a stack passed/failed, or the stack could not run."""

    stack: str
    workload: str | None  # None: the whole stack (provision/launch failure, unavailable)
    status: str  # "pass" | "fail" | "unavailable"
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    phase: str = ""  # a bringup.Phase value: plan, services, provision, start, verify
    log: str = ""
    #: ``--mix``: the endpoint this line is about (its name in the mix) and the request sent
    #: for it (its first entry's method and path); None for any other line.
    endpoint: str | None = None
    request: str | None = None


_EXAMPLES = """
pywebbench verify --server gunicorn-sync --framework flask
pywebbench verify --python pypy3.9 --server 'uvicorn-*' --workload hello,json
pywebbench verify --app httpbin:app --requirements req.txt --path /get --path /status/418 \\
                  --expect-status 418 --server waitress
pywebbench verify --app myapp:app --mix mix.toml --server gunicorn-sync,granian-wsgi
"""

_EPILOG = """
\b
Bring your own app: --app module:callable (WSGI or ASGI, detected by importing it unless
--interface is given), installed from --requirements FILE and/or --project DIR (installed if it
has a pyproject.toml/setup.py, and put first on PYTHONPATH; repeat it for several versions of
the app, each its own stack named app-MODULE.CALLABLE@DIRNAME). Each --path is requested with GET
and must answer --expect-status (default: any 2xx) with a body containing --expect-body.
With --mix (a traffic mix, docs/mix.md) instead of --path, each endpoint of the mix is
requested once (its first entry) and must answer a status its entry expects: a line each,
as `pywebbench run --mix` verifies before any load.
Exit status: 0 all passed, 1 a verification/provision/launch failed or nothing could run,
2 bad command-line values.
"""


@click.command(
    name="verify",
    epilog=_EPILOG,
    cls=OneScreen,
    examples=_EXAMPLES,
    common=(
        "--python",
        "--server",
        "--framework",
        "--workload",
        "--app",
        "--requirements",
        "--project",
        "--path",
        "--mix",
        "--expect-status",
        "--json",
    ),
)
@filter_options
@click.option("--app", metavar="MODULE:CALLABLE", help="Verify your own WSGI/ASGI app instead.")
@click.option(
    "--interface",
    type=click.Choice(["wsgi", "asgi"], case_sensitive=False),
    help="Interface of --app (default: detected by importing it).",
)
@click.option(
    "--requirements",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="pip requirements file of --app, installed into each stack's venv.",
)
@click.option(
    "--project",
    "projects",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory of --app's code (installed if packaged; first on PYTHONPATH). Repeatable: "
    "each directory is its own stack, named app-MODULE.CALLABLE@DIRNAME.",
)
@click.option(
    "--path", "paths", multiple=True, help="Path of --app to GET (repeatable; default /)."
)
@click.option(
    "--mix",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A traffic mix of --app instead of --path (TOML or JSON, docs/mix.md): each endpoint "
    "requested once and its status checked against its entries' expect_status.",
)
@click.option("--expect-status", type=int, help="Status each --path must answer (default: 2xx).")
@click.option("--expect-body", help="Text each --path's body must contain.")
@click.option("--workers", default=1, show_default=True, help="Server worker processes.")
@click.option("--threads", default=1, show_default=True, help="Threads per worker.")
@click.option(
    "--bind",
    type=click.Choice(BINDS),
    default="tcp",
    show_default=True,
    help="Where each server listens: tcp (a loopback port) or unix (a unix-domain socket, "
    "verified over it; servers that cannot are skipped).",
)
@click.option(
    "--protocol",
    type=click.Choice(HTTP_PROTOCOLS),
    default="http1",
    show_default=True,
    help="What each server is asked to speak and verified over: http1 (HTTP/1.1) or h2c "
    "(HTTP/2 over cleartext with prior knowledge; servers that cannot are skipped).",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where server/service logs go (default: $PWB_CACHE_DIR/verify/<time>).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON on stdout.")
def command(
    pythons: tuple[str, ...],
    servers: tuple[str, ...],
    frameworks: tuple[str, ...],
    workloads: tuple[str, ...],
    app: str | None,
    interface: str | None,
    requirements: Path | None,
    projects: tuple[Path, ...],
    paths: tuple[str, ...],
    mix: Path | None,
    expect_status: int | None,
    expect_body: str | None,
    workers: int,
    threads: int,
    bind: Bind,
    protocol: Protocol,
    log_dir: Path | None,
    as_json: bool,
) -> None:
    """Start each selected stack, check every workload, print pass/fail with the reason.

    Stacks are provisioned first (uv virtualenvs, cached), services the workloads need
    (redis-server, PostgreSQL) are started on loopback ports, each server is started pinned
    to CPU 0 and stopped after its checks.
    """
    console = Console(stderr=as_json, highlight=False)
    byo_flags = {
        "--interface": interface,
        "--requirements": requirements,
        "--project": projects or None,
        "--path": paths or None,
        "--mix": mix,
        "--expect-status": expect_status,
        "--expect-body": expect_body,
    }
    if app is None:
        given = [k for k, v in byo_flags.items() if v is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)} only apply with --app module:callable")
    elif frameworks or workloads:
        raise click.UsageError("--app replaces --framework/--workload; use --path for its routes")
    if workers < 1 or threads < 1:
        raise click.BadParameter("must be >= 1", param_hint="--workers/--threads")
    mix_entries = _mix_entries(mix, paths, expect_status, expect_body) if mix else None

    interpreters = select_interpreters(pythons)
    fw_filter: Sequence[str | Framework] = frameworks
    if app is not None:
        from pywebbench.provision.user_app import user_frameworks

        try:
            with console.status(f"importing {app} to detect its interface") as status:
                fws = user_frameworks(
                    app,
                    interface,
                    requirements,
                    projects,
                    list(paths),
                    expect_status,
                    expect_body,
                    mix=mix,
                    mix_entries=mix_entries,
                    interpreter=interpreters[0],
                    progress=lambda m: status.update(escape(m[:100])),
                )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        for fw in fws:
            shown = fw.name if fw.tag else app
            if mix is not None:  # "the mix mix.toml (5 requests, 4 endpoints)"
                what = "; ".join(w.description for w in fw.user_workloads.values())
            else:
                what = "paths " + ", ".join(fw.workloads)
            console.print(f"app {escape(shown)}: {fw.interface.upper()}, {escape(what)}")
        fw_filter = list(fws)
    candidates = plan_or_usage_error(interpreters, servers, fw_filter, workloads)
    if not candidates:
        raise click.UsageError("no interpreter x server x framework combination matches")

    log_root = log_dir or _default_log_dir()
    log_root.mkdir(parents=True, exist_ok=True)
    outcomes = run_verification(
        candidates,
        console,
        log_root,
        workers=workers,
        threads=threads,
        bind=bind,
        protocol=protocol,
    )

    failed = [o for o in outcomes if o.status == "fail"]
    passed = [o for o in outcomes if o.status == "pass"]
    skipped = [o for o in outcomes if o.status == "unavailable" and o.workload is None]
    not_served = [o for o in outcomes if o.status == "unavailable" and o.workload is not None]
    extra = f", {len(not_served)} workload(s) not served" if not_served else ""
    console.print(
        f"\n{len(passed)} passed, {len(failed)} failed, {len(skipped)} stack(s) unavailable"
        f"{extra}. Logs: {log_root}"
    )
    if as_json:
        click.echo(json.dumps([asdict(o) for o in outcomes], indent=2))
    if failed:
        raise SystemExit(1)
    if not passed:
        console.print("[red]Nothing was verified: every selected stack is unavailable.[/red]")
        raise SystemExit(1)


def _refuse(message: str) -> NoReturn:
    """A bad command-line value as one line on stderr, exit status 2 (as ``run`` and
    ``load`` say theirs)."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(2)


def _mix_entries(
    mix: Path, paths: Sequence[str], expect_status: int | None, expect_body: str | None
) -> list[MixEntry]:
    """The requests of ``--mix``, read before anything starts; a bad file or a flag the mix
    replaces is one line and exit status 2."""
    from pywebbench.catalogue.mix import MixFileError, load_mix

    if paths:
        _refuse("--mix and --path: the mix gives every path; give one")
    if expect_status is not None:
        _refuse(
            "--mix and --expect-status: each request of the mix gives the statuses it "
            "expects (expect_status in the mix file); give one"
        )
    if expect_body is not None:
        _refuse("--mix and --expect-body: a mix's endpoints are checked by status only; give one")
    try:
        return load_mix(mix)
    except MixFileError as exc:
        _refuse(f"--mix: {exc}")


def _default_log_dir() -> Path:
    from pywebbench.provision.venv import cache_dir

    return cache_dir() / "verify" / time.strftime("%Y%m%d-%H%M%S")


def _print(console: Console, o: Outcome) -> None:
    tag = {"pass": "[green]PASS[/green]", "fail": "[red]FAIL[/red]"}.get(
        o.status, "[yellow]SKIP[/yellow]"
    )
    what = o.workload or o.phase or "stack"
    if o.endpoint is not None:  # mix:mix.toml endpoint "GET /items/{id}" (GET /items/1)
        what += f" endpoint {json.dumps(o.endpoint, ensure_ascii=False)} ({o.request})"
    console.print(f"  {tag}  {escape(what)}" + (f": {escape(o.reason)}" if o.reason else ""))
    for w in o.warnings:
        console.print(f"        [dim]warning: {escape(w)}[/dim]")


def run_verification(
    candidates: list[Candidate],
    console: Console,
    log_root: Path,
    *,
    workers: int = 1,
    threads: int = 1,
    bind: Bind = "tcp",
    protocol: Protocol = "http1",
    steps: BringUp | None = None,
) -> list[Outcome]:
    """Verify every candidate (unavailable ones, with ``bind`` "unix" those whose server
    cannot bind a unix socket, and with ``protocol`` "h2c" those that cannot serve it, are
    reported as such); return the outcomes. ``steps`` provision, start services and servers,
    and check them (default: :mod:`pywebbench.bringup`'s; a test hands in fakes)."""
    from pywebbench import bringup

    steps = steps or bringup.BringUp()

    def why_not(c: Candidate) -> str | None:
        if not c.available:
            return c.unavailable or "unavailable"
        if bind == "unix" and not can_bind_unix(c.server):
            return cannot_bind_unix(c.server)
        if protocol == "h2c" and not speaks_h2c(c.server):
            return cannot_speak_h2c(c.server)
        return None

    outcomes: list[Outcome] = []
    runnable = [c for c in candidates if why_not(c) is None]
    console.print(
        f"{len(runnable)} stack(s) to verify, {len(candidates) - len(runnable)} unavailable"
    )
    for c in candidates:
        if c not in runnable:
            o = Outcome(c.name, None, "unavailable", why_not(c) or "", phase="plan")
            outcomes.append(o)
            console.print(f"[bold]{escape(c.name)}[/bold]")
            _print(console, o)
    needed = bringup.services_needed(w for c in runnable for w in _workloads(c))
    if needed:
        console.print(f"starting services: {', '.join(needed)}")
    with steps.services(needed, log_root / "services") as services:
        if services.failure is not None:
            console.print(f"[red]{escape(services.failure.reason)}[/red]")
        elif needed:
            console.print(f"services {', '.join(needed)} started")
        for c in runnable:
            console.print(f"[bold]{escape(c.name)}[/bold]")
            for o in _verify_one(
                c, console, log_root, services, steps, workers, threads, bind, protocol
            ):
                outcomes.append(o)
                _print(console, o)
    return outcomes


def _workloads(c: Candidate) -> list[Workload]:
    """The workload objects of a candidate (a user's paths, or catalogue workloads)."""
    from pywebbench.catalogue.byo import UserFramework
    from pywebbench.catalogue.workloads import WORKLOADS

    fw = c.framework
    if isinstance(fw, UserFramework):
        return [fw.user_workloads[w] for w in c.workloads]
    return [WORKLOADS[w] for w in c.workloads if w in WORKLOADS]


def _failed(name: str, workload: str | None, failure: StackFailure) -> Outcome:
    return Outcome(
        name,
        workload,
        "fail",
        failure.reason,
        phase=failure.phase.value,
        log=str(failure.log_path or ""),
    )


def _verify_one(
    c: Candidate,
    console: Console,
    log_root: Path,
    services: Services,
    steps: BringUp,
    workers: int,
    threads: int,
    bind: Bind,
    protocol: Protocol,
) -> Iterator[Outcome]:
    from pywebbench import bringup
    from pywebbench.study.matrix import Variant

    assert c.stack is not None
    try:
        with console.status(f"provisioning {c.name}") as status:
            env = steps.provision(c.stack, progress=lambda m: status.update(escape(m[:100])))
    except bringup.StackFailure as exc:
        yield _failed(c.name, None, exc)
        return
    console.print(
        f"  [dim]venv {'cached' if env.cached else f'built in {env.seconds:.1f} s'}: "
        f"{env.venv}[/dim]"
    )
    runnable: list[Workload] = []
    websocket = protocol == "http1" and bind == "tcp" and speaks_websocket(c.server)
    for workload in _workloads(c):
        failure = services.failure_for(workload)
        if failure is not None:
            yield _failed(c.name, workload.name, failure)
        elif workload.websocket and not websocket:
            why = cannot_speak_websocket(c.server) if protocol == "http1" else None
            why = why or "WebSocket is verified over HTTP/1.1 and TCP (no --protocol/--bind)"
            yield Outcome(c.name, workload.name, "unavailable", why, phase="plan")
        else:
            runnable.append(workload)
    if not runnable:
        return
    options = bringup.launch_options(
        Variant(c.stack, workers, threads, key=c.name),
        log_dir=log_root,
        services=services,
        bind=bind,
        # a server with WebSocket on serves HTTP/1.1 too (granian: --ws)
        protocol="ws" if any(w.websocket for w in runnable) else protocol,
    )
    try:
        with console.status(f"starting {c.server.name}"):
            server = steps.start(c.stack, env, options, bringup.ready_path(c.stack, runnable))
    except bringup.StackFailure as exc:
        yield _failed(c.name, None, exc)
        return
    with server:
        console.print(
            f"  [dim]{c.server.name} up in {server.cold_start_s:.2f} s at {server.base_url}[/dim]"
        )
        for workload in runnable:
            verdict = steps.check(server, c.stack, workload)
            for e in verdict.endpoints:  # a mix: a line per endpoint
                yield Outcome(
                    c.name,
                    workload.name,
                    "pass" if e.ok else "fail",
                    e.problem or "",
                    phase="verify",
                    endpoint=e.name,
                    request=f"{e.method} {e.path}",
                )
            if verdict.endpoints:
                continue
            yield Outcome(
                c.name,
                workload.name,
                "pass" if verdict.ok else "fail",
                "; ".join(verdict.problems),
                verdict.warnings,
                phase="verify",
            )
        if not server.alive():
            yield Outcome(
                c.name,
                None,
                "fail",
                "the server exited during verification",
                phase="start",
                log=str(server.log_path),
            )
