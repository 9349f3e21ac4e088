"""``pywebbench stacks``: the catalogue, with availability per interpreter and the reasons."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from pywebbench.catalogue import interpreters as interp_mod
from pywebbench.catalogue.base import Framework, Interpreter
from pywebbench.catalogue.stacks import Candidate, plan
from pywebbench.help_screen import OneScreen
from pywebbench.provision.venv import cached, last_failure

CommandFunction = TypeVar("CommandFunction", bound=Callable[..., Any])


def select_interpreters(values: Sequence[str]) -> list[Interpreter]:
    """``--python`` values to interpreters; a bad one is a click usage error naming the flag."""
    try:
        from pywebbench.provision.pythons import install_request

        return interp_mod.select(values, install=install_request)
    except interp_mod.InterpreterError as exc:
        msg = str(exc)
        msg = msg[len("--python ") :] if msg.startswith("--python ") else msg
        raise click.BadParameter(msg, param_hint="--python") from None


def plan_or_usage_error(
    interpreters: Sequence[Interpreter],
    servers: Sequence[str] | None,
    frameworks: Sequence[str | Framework] | None,
    workloads: Sequence[str] | None,
) -> list[Candidate]:
    """:func:`plan` with a bad filter value turned into a click usage error naming the flag."""
    try:
        return plan(interpreters, servers or None, frameworks or None, workloads or None)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def candidate_record(c: Candidate) -> dict[str, object]:
    """A JSON-ready description of one candidate."""

    rec: dict[str, object] = {
        "name": c.name,
        "interpreter": c.interpreter.name,
        "interpreter_version": c.interpreter.version,
        "implementation": c.interpreter.implementation,
        "free_threaded": c.interpreter.free_threaded,
        "server": c.server.name,
        "framework": c.framework.name,
        "interface": c.server.interface,
        "available": c.available,
        "reason": c.unavailable,
        "workloads": list(c.workloads),
        # the server's worker recycling flag (--worker-max-requests), None: it has none
        "worker_recycling": c.server.max_requests_flag,
        # how the server binds a unix socket (--bind unix), None: it cannot
        "unix_bind": c.server.unix_bind,
        # how the server serves h2c (--protocol h2c), None: it cannot
        "h2c": c.server.h2c,
        # what serves WebSocket in the server (the ws-echo workload), None: it cannot
        "websocket": c.server.websocket,
    }
    if c.stack is not None:
        rec["requirements"] = list(c.stack.requirements)
        rec["env_key"] = c.stack.env_key()
        env = cached(c.stack)
        rec["provisioned"] = env is not None
        if env is not None:
            rec["packages"] = env.packages
        else:
            failure = last_failure(c.stack)
            if failure:
                rec["last_provision_failure"] = failure
    return rec


_EXAMPLES = """
pywebbench stacks                               # default interpreters (this CPython + pypy3)
pywebbench stacks --python all                  # one interpreter per version found (>= 3.9)
pywebbench stacks --server 'gunicorn-*' --framework flask,django
pywebbench stacks --python /opt/py/bin/python3 --json
"""

_HELP_EPILOG = """
Servers and frameworks outside pywebbench: PYWEBBENCH_PLUGINS=pkg.mod,pkg2 imports those
modules, whose ADAPTER / FRAMEWORK join the catalogue (see docs/contributing.md).
"""


def filter_options(f: CommandFunction) -> CommandFunction:
    """The --python/--server/--framework/--workload options shared by stacks and verify."""
    options = [
        click.option(
            "--python",
            "pythons",
            multiple=True,
            metavar="NAME|PATH",
            help="Interpreter(s): name (cpython3.11, pypy3.9), glob, version (3.13; 3.13t: "
            "free-threaded; installed when missing, docs/interpreters.md), 'all', or a path to "
            "an executable; @gil0/@gil1 sets PYTHON_GIL of a free-threaded build. Each value but "
            "a path gives one interpreter per version and build. Repeatable or comma-separated. "
            "Default: this CPython and pypy3.",
        ),
        click.option("--server", "servers", multiple=True, help="Server adapter name(s)/globs."),
        click.option("--framework", "frameworks", multiple=True, help="Framework name(s)/globs."),
        click.option("--workload", "workloads", multiple=True, help="Workload name(s)/globs."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.command(name="stacks", epilog=_HELP_EPILOG, cls=OneScreen, examples=_EXAMPLES)
@filter_options
@click.option("--available", "only_available", is_flag=True, help="Hide unavailable stacks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def command(
    pythons: tuple[str, ...],
    servers: tuple[str, ...],
    frameworks: tuple[str, ...],
    workloads: tuple[str, ...],
    only_available: bool,
    as_json: bool,
) -> None:
    """What can run on this machine: interpreter x server x framework, and why not.

    No stack is installed: availability is what the catalogue declares (known
    incompatibilities such as uvloop on PyPy 3.9). A missing interpreter
    asked for by version (--python 3.14, 3.13t) is installed first (docs/interpreters.md;
    PWB_PYTHON_INSTALL=none forbids it). A stack that is already
    provisioned shows its exact package versions in --json.
    """
    interpreters = select_interpreters(pythons)
    candidates = plan_or_usage_error(interpreters, servers, frameworks, workloads)
    if only_available:
        candidates = [c for c in candidates if c.available]
    if as_json:
        doc = {
            "interpreters": [
                {
                    "name": i.name,
                    "implementation": i.implementation,
                    "version": i.version,
                    "build": i.build,
                    "path": i.path,
                    "free_threaded": i.free_threaded,
                    "jit": i.jit,
                    "optimizations": i.optimizations,
                    "gil": i.gil,
                }
                for i in interpreters
            ],
            "stacks": [candidate_record(c) for c in candidates],
        }
        click.echo(json.dumps(doc, indent=2))
        return
    console = Console(soft_wrap=False, width=max(Console().width, 100))
    _print_interpreters(console, interpreters, show_skipped=True)
    _print_table(console, interpreters, candidates)


def _print_interpreters(
    console: Console, interpreters: list[Interpreter], show_skipped: bool
) -> None:
    table = Table(title="Interpreters", title_justify="left", show_edge=False)
    for col in ("name", "version", "kind", "build", "path"):
        table.add_column(col, overflow="fold")
    for i in interpreters:
        table.add_row(i.name, i.version, i.kind, i.build, i.path)
    console.print(table)
    if show_skipped:
        skipped = [f for f in interp_mod.discover_all() if f.skipped]
        if skipped:
            names = ", ".join(f.interpreter.name for f in skipped)
            console.print(f"[dim]skipped: {names}: {skipped[0].skipped}[/dim]")
    console.print()


def _print_table(
    console: Console, interpreters: list[Interpreter], candidates: list[Candidate]
) -> None:
    if not candidates:
        console.print("No stack matches the filters.")
        return
    pairs: dict[tuple[str, str], dict[str, Candidate]] = {}
    for c in candidates:
        pairs.setdefault((c.server.name, c.framework.name), {})[c.interpreter.name] = c
    reasons: dict[str, int] = {}
    table = Table(title="Stacks", title_justify="left", show_edge=False)
    table.add_column("server")
    table.add_column("framework")
    table.add_column("interface")
    for i in interpreters:
        table.add_column(i.name, justify="center")
    for (server, framework), by_interp in pairs.items():
        any_c = next(iter(by_interp.values()))
        cells = []
        for i in interpreters:
            cell = by_interp.get(i.name)
            if cell is None:
                cells.append("")
            elif cell.available and cell.stack is not None:
                failure = None if cached(cell.stack) else last_failure(cell.stack)
                if failure:
                    why = f"provisioning failed ({failure['time']}): {failure['reason']}"
                    n = reasons.setdefault(why, len(reasons) + 1)
                    cells.append(f"[yellow]failed[/yellow] [{n}]")
                else:
                    cells.append(
                        "[green]ready[/green]" if cached(cell.stack) else "[green]yes[/green]"
                    )
            else:
                n = reasons.setdefault(cell.unavailable or "", len(reasons) + 1)
                cells.append(f"[red]no[/red] [{n}]")
        table.add_row(server, framework, any_c.server.interface, *cells)
    console.print(table)
    n_ok = sum(c.available for c in candidates)
    console.print(
        f"\n{n_ok} of {len(candidates)} stacks available "
        "(ready: virtualenv already built; yes: built on first use)."
    )
    if reasons:
        console.print("\nWhy not:")
        for reason, n in reasons.items():
            console.print(f"  [{n}] {reason}", highlight=False, markup=False)
    if not sys.stdout.isatty():
        console.file.flush()
