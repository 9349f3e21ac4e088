"""``pywebbench verify``: provision, start and check every selected stack on every workload."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from pywebbench.catalogue.stacks import Candidate
from pywebbench.commands.stacks import filter_options, plan_or_usage_error, select_interpreters


@dataclass
class Outcome:
    """One line of the verdict: a workload of a stack passed/failed, or the stack could not run."""

    stack: str
    workload: str | None  # None: the whole stack (provision/launch failure, unavailable)
    status: str  # "pass" | "fail" | "unavailable"
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    phase: str = ""  # "provision" | "launch" | "services" | "verify"
    log: str = ""


_EPILOG = """
\b
Examples:
  pywebbench verify --server gunicorn-sync --framework flask
  pywebbench verify --python pypy3.9 --server 'uvicorn-*' --workload hello,json
  pywebbench verify --app httpbin:app --requirements req.txt --path /get --path /status/418 \\
                    --expect-status 418 --server waitress
\b
Bring your own app: --app module:callable (WSGI or ASGI, detected by importing it unless
--interface is given), installed from --requirements FILE and/or --project DIR (installed if it
has a pyproject.toml/setup.py, and put first on PYTHONPATH). Each --path is requested with GET
and must answer --expect-status (default: any 2xx) with a body containing --expect-body.
Exit status: 0 all passed, 1 a verification/provision/launch failed or nothing could run,
2 bad command-line values.
"""


@click.command(name="verify", epilog=_EPILOG)
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
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory of --app's code (installed if packaged; first on PYTHONPATH).",
)
@click.option(
    "--path", "paths", multiple=True, help="Path of --app to GET (repeatable; default /)."
)
@click.option("--expect-status", type=int, help="Status each --path must answer (default: 2xx).")
@click.option("--expect-body", help="Text each --path's body must contain.")
@click.option("--workers", default=1, show_default=True, help="Server worker processes.")
@click.option("--threads", default=1, show_default=True, help="Threads per worker.")
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
    project: Path | None,
    paths: tuple[str, ...],
    expect_status: int | None,
    expect_body: str | None,
    workers: int,
    threads: int,
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
        "--project": project,
        "--path": paths or None,
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

    interpreters = select_interpreters(pythons)
    fw_filter: list | tuple = frameworks
    if app is not None:
        from pywebbench.provision.user_app import user_framework

        try:
            with console.status(f"importing {app} to detect its interface") as status:
                fw = user_framework(
                    app,
                    interface,
                    requirements,
                    project,
                    list(paths),
                    expect_status,
                    expect_body,
                    interpreter=interpreters[0],
                    progress=lambda m: status.update(escape(m[:100])),
                )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        console.print(f"app {app}: {fw.interface.upper()}, paths {', '.join(fw.user_workloads)}")
        fw_filter = [fw]
    candidates = plan_or_usage_error(interpreters, servers, fw_filter, workloads)
    if not candidates:
        raise click.UsageError("no interpreter x server x framework combination matches")

    log_root = log_dir or _default_log_dir()
    log_root.mkdir(parents=True, exist_ok=True)
    outcomes = run_verification(candidates, console, log_root, workers=workers, threads=threads)

    failed = [o for o in outcomes if o.status == "fail"]
    passed = [o for o in outcomes if o.status == "pass"]
    skipped = [o for o in outcomes if o.status == "unavailable"]
    console.print(
        f"\n{len(passed)} passed, {len(failed)} failed, {len(skipped)} stack(s) unavailable. "
        f"Logs: {log_root}"
    )
    if as_json:
        click.echo(json.dumps([asdict(o) for o in outcomes], indent=2))
    if failed:
        raise SystemExit(1)
    if not passed:
        console.print("[red]Nothing was verified: every selected stack is unavailable.[/red]")
        raise SystemExit(1)


def _default_log_dir() -> Path:
    from pywebbench.provision.venv import cache_dir

    return cache_dir() / "verify" / time.strftime("%Y%m%d-%H%M%S")


def _print(console: Console, o: Outcome) -> None:
    tag = {"pass": "[green]PASS[/green]", "fail": "[red]FAIL[/red]"}.get(
        o.status, "[yellow]SKIP[/yellow]"
    )
    what = o.workload or o.phase or "stack"
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
) -> list[Outcome]:
    """Verify every candidate (unavailable ones are reported as such); return the outcomes."""
    from pywebbench.catalogue.workloads import WORKLOADS

    outcomes: list[Outcome] = []
    runnable = [c for c in candidates if c.available]
    console.print(
        f"{len(runnable)} stack(s) to verify, {len(candidates) - len(runnable)} unavailable"
    )
    for c in candidates:
        if not c.available:
            o = Outcome(c.name, None, "unavailable", c.unavailable or "", phase="plan")
            outcomes.append(o)
            console.print(f"[bold]{escape(c.name)}[/bold]")
            _print(console, o)
    needed = sorted(
        {s for c in runnable for w in c.workloads if w in WORKLOADS for s in WORKLOADS[w].services}
    )
    with contextlib.ExitStack() as stack:
        services_env: dict[str, str] = {}
        services_error = ""
        if needed:
            from pywebbench.provision.services import start_services

            try:
                with console.status(f"starting services: {', '.join(needed)}"):
                    services_env = dict(
                        stack.enter_context(start_services(needed, log_root / "services"))
                    )
                console.print(f"services {', '.join(needed)} started")
            except Exception as exc:  # noqa: BLE001 - any failure is reported per workload
                services_error = f"starting {', '.join(needed)} failed: {exc}"
                console.print(f"[red]{escape(services_error)}[/red]")
        for c in runnable:
            console.print(f"[bold]{escape(c.name)}[/bold]")
            for o in _verify_one(
                c, console, log_root, services_env, services_error, workers, threads
            ):
                outcomes.append(o)
                _print(console, o)
    return outcomes


def _verify_one(
    c: Candidate,
    console: Console,
    log_root: Path,
    services_env: dict[str, str],
    services_error: str,
    workers: int,
    threads: int,
):
    from pywebbench.catalogue.byo import UserFramework
    from pywebbench.catalogue.workloads import WORKLOADS
    from pywebbench.launch import LaunchError, start_server
    from pywebbench.provision.venv import ProvisionError, provision
    from pywebbench.verify.user_app import check_path

    assert c.stack is not None
    try:
        with console.status(f"provisioning {c.name}") as status:
            env = provision(c.stack, progress=lambda m: status.update(escape(m[:100])))
    except ProvisionError as exc:
        yield Outcome(
            c.name, None, "fail", exc.reason, phase="provision", log=str(exc.log_path or "")
        )
        return
    console.print(
        f"  [dim]venv {'cached' if env.cached else f'built in {env.seconds:.1f} s'}: "
        f"{env.venv}[/dim]"
    )
    fw = c.framework
    is_byo = isinstance(fw, UserFramework)
    runnable = []
    for w in c.workloads:
        workload = fw.user_workloads[w] if is_byo else WORKLOADS[w]
        if workload.services and services_error:
            yield Outcome(c.name, w, "fail", services_error, phase="services")
        else:
            runnable.append(workload)
    if not runnable:
        return
    ready = runnable[0].path if is_byo else "/hello"
    try:
        with console.status(f"starting {c.server.name}"):
            server = start_server(
                c.stack,
                env,
                workers=workers,
                threads=threads,
                app_env=services_env,
                app_dir=fw.app_dir if is_byo else None,
                app=fw.app if is_byo else None,
                log_dir=log_root,
                ready_path=ready,
            )
    except LaunchError as exc:
        tail = " | ".join(ln for ln in exc.log_tail.strip().splitlines()[-3:])
        reason = f"{exc.phase}: {exc.reason}" + (f" [log: {tail}]" if tail else "")
        yield Outcome(c.name, None, "fail", reason, phase="launch", log=str(exc.log_path or ""))
        return
    with server:
        console.print(
            f"  [dim]{c.server.name} up in {server.cold_start_s:.2f} s at {server.base_url}[/dim]"
        )
        for workload in runnable:
            yield _check(server, c.server, workload, is_byo, check_path)
        if not server.alive():
            yield Outcome(
                c.name,
                None,
                "fail",
                "the server exited during verification",
                phase="launch",
                log=str(server.log_path),
            )


def _check(server, adapter, workload, is_byo: bool, check_path) -> Outcome:
    name = server.name
    try:
        if is_byo:
            report = check_path(server.base_url, workload)
        else:
            from pywebbench.verify import verify

            report = verify(
                server.base_url,
                workload,
                expect_server_header=getattr(adapter, "sends_server_header", True),
                expect_date_header=getattr(adapter, "sends_date_header", True),
            )
    except Exception as exc:  # noqa: BLE001 - a checker crash is a failure with its reason
        return Outcome(name, workload.name, "fail", f"{type(exc).__name__}: {exc}", phase="verify")
    warnings = list(getattr(report, "warnings", []) or [])
    if report.ok:
        return Outcome(name, workload.name, "pass", "", warnings, phase="verify")
    return Outcome(
        name, workload.name, "fail", "; ".join(report.problems), warnings, phase="verify"
    )
