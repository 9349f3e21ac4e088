"""``pywebbench export``: write stored runs as JSON (every table) or CSV."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pywebbench.run.config import DEFAULT_RESULTS_DIR
from pywebbench.store.export import CSV_TABLES


@click.command("export")
@click.argument("runs", nargs=-1, metavar="[RUN_ID...]")
@click.option(
    "--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True
)
@click.option(
    "--table",
    type=click.Choice(CSV_TABLES),
    default="flat",
    show_default=True,
    help="CSV only: 'flat' = one row per iteration with its stack and cell; or one table.",
)
@click.option("-o", "--output", help="Output file (default: standard output).")
@click.option(
    "--results-dir",
    default=DEFAULT_RESULTS_DIR,
    show_default=True,
    help="Directory holding pywebbench.sqlite.",
)
@click.option("--store", "store_path", help="Path of the store file itself (overrides).")
def command(
    runs: tuple[str, ...],
    fmt: str,
    table: str,
    output: str | None,
    results_dir: str,
    store_path: str | None,
) -> None:
    """Export RUN_IDs (id prefixes work; default: the latest run).

    JSON holds every table of the runs (schema: docs/store-schema.md) and can be imported
    into another store; CSV is one table, by default one row per iteration.
    """
    from pywebbench.store import DEFAULT_FILENAME, Store, StoreError
    from pywebbench.store.export import export_csv, export_json

    path = Path(store_path) if store_path else Path(results_dir) / DEFAULT_FILENAME
    try:
        with Store(path, create=False) as store:
            text = export_json(store, runs) if fmt == "json" else export_csv(store, runs, table)
    except StoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if output:
        Path(output).write_text(text)
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)
