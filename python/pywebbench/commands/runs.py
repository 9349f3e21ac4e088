"""``pywebbench runs``: list the runs in the results store."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from pywebbench.commands._common import store_options, store_path_of
from pywebbench.help_screen import OneScreen


@click.command(
    "runs",
    cls=OneScreen,
    examples="""
    pywebbench runs
    pywebbench runs --results-dir res     # the runs stored in ./res
    """,
)
@store_options
def command(results_dir: str, store_path: str | None) -> None:
    """List stored runs: id, status, profile, cells ok/failed, iterations, host."""
    from pywebbench.store import Store, StoreError

    path = store_path_of(results_dir, store_path)
    try:
        store = Store(path, create=False)
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    with store:
        runs = store.runs()
        table = Table(title=f"runs in {path}", title_justify="left")
        for col in (
            "run id",
            "started (UTC)",
            "status",
            "profile",
            "cells ok/failed/all",
            "iterations",
            "host",
        ):
            table.add_column(col, no_wrap=True)
        for run in runs:
            cells = store.cells(run.id)
            ok = sum(1 for c in cells if c.status == "ok")
            failed = sum(1 for c in cells if c.status == "failed")
            iterations = sum(len(store.iterations(c.id)) for c in cells if c.id is not None)
            table.add_row(
                run.id,
                run.created_at[:19].replace("T", " "),
                run.status,
                run.profile or "-",
                f"{ok}/{failed}/{len(cells)}",
                str(iterations),
                f"{run.hostname} ({run.cpu_count} cpu)",
            )
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    console.print(table if runs else f"no runs in {path}")
