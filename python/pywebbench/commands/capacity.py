"""``pywebbench capacity``: what each stack of a stored study would take to serve a target."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys

import click

from pywebbench.commands._common import fail, store_options, store_path_of
from pywebbench.help_screen import OneScreen
from pywebbench.report.capacity import COLUMNS, CapacityRow, CapacityTarget, row_cells


@click.command(
    "capacity",
    cls=OneScreen,
    examples="""
    pywebbench capacity --rps 10000 --slo p99=50ms
    pywebbench capacity --rps 10000 --core-hour 0.0416 --gib-hour 0.0056 --format csv
    """,
)
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("--rps", type=float, required=True, help="The target load, requests/s.")
@click.option(
    "--slo",
    default=None,
    help="The latency target, e.g. p99=50ms: size on knees searched under an SLO at least "
    "this strict (run --slo); other stacks on closed-loop figures, marked.",
)
@click.option("--core-hour", type=float, default=None, help="Price of one core for an hour.")
@click.option("--gib-hour", type=float, default=None, help="Price of one GiB of RAM for an hour.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "json", "csv"]),
    default="table",
    show_default=True,
)
@store_options
def command(
    runs: tuple[str, ...],
    rps: float,
    slo: str | None,
    core_hour: float | None,
    gib_hour: float | None,
    fmt: str,
    results_dir: str,
    store_path: str | None,
) -> None:
    """Size every stack of RUN... (default: the latest run) for a target load.

    Per stack and workload: copies of the measured setup (its server cores and workers)
    needed for --rps, their cores, workers and memory (peak RSS of the server's process
    tree), and with prices the cost per hour and per million requests. Linear scaling
    across copies is assumed, and said beside the figures (docs/capacity.md).
    """
    from pywebbench.report import build_view
    from pywebbench.report.capacity import (
        assumptions,
        markdown_lines,
        parse_target,
        server_cores,
    )
    from pywebbench.report.sizing import capacity_rows
    from pywebbench.store import Store, StoreError

    try:
        target: CapacityTarget = parse_target(f"rps={rps}" + (f",slo={slo}" if slo else ""))
        target = dataclasses.replace(target, core_hour=core_hour, gib_hour=gib_hour)
    except ValueError as exc:
        key, _, why = str(exc).partition(": ")
        fail(f"--{key.replace('_', '-')}: {why}")
    try:
        with Store(store_path_of(results_dir, store_path), create=False) as store:
            study = store.load_study(store.resolve_run_ids(list(runs)))
    except StoreError as exc:
        fail(str(exc))
    rows = capacity_rows(build_view(study), target, server_cores(study))
    if fmt == "json":
        doc = {
            "target": {"rps": rps, "slo": slo, "core_hour": core_hour, "gib_hour": gib_hour},
            "rows": [dataclasses.asdict(r) for r in rows],
            "assumptions": assumptions(target, rows),
        }
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    elif fmt == "csv":
        buf = io.StringIO()
        fields = [f.name for f in dataclasses.fields(rows[0])] if rows else ["stack_key"]
        writer = csv.DictWriter(buf, fieldnames=fields)
        writer.writeheader()
        writer.writerows(dataclasses.asdict(r) for r in rows)
        sys.stdout.write(buf.getvalue())
    elif fmt == "markdown":
        click.echo("\n".join(markdown_lines(target, rows)))
    else:
        _print_table(target, rows, assumptions(target, rows))


def _print_table(target: CapacityTarget, rows: list[CapacityRow], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    console.print(f"Capacity for {target.label}", style="bold", markup=False)
    if not rows:
        console.print("No stack has a figure to size on.")
    priced = any(r.cost_per_hour is not None for r in rows)
    for workload in dict.fromkeys(r.workload for r in rows):
        table = Table(title=workload, title_justify="left")
        for i, name in enumerate(COLUMNS if priced else COLUMNS[:-2]):
            table.add_column(name, justify="left" if i < 2 else "right")
        for r in (r for r in rows if r.workload == workload):
            table.add_row(*row_cells(r, priced=priced))
        console.print(table)
    for note in notes:
        console.print(f"- {note}", markup=False)
