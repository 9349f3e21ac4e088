"""``pywebbench export``: write stored runs as JSON (every table), CSV, pyperf JSON or
HdrHistogram interval logs (the formats: :mod:`pywebbench.export`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pywebbench.commands._common import fail, store_options, store_path_of
from pywebbench.export import EXPORTERS
from pywebbench.export.csv import CSV_TABLES
from pywebbench.export.pyperf import PYPERF_METRICS
from pywebbench.help_screen import OneScreen


@click.command(
    "export",
    cls=OneScreen,
    examples="""
    pywebbench export RUN --format pyperf -o run.json
    pywebbench export --format csv -o latest.csv      # the latest run, a row per iteration
    pywebbench export RUN1 RUN2 --format hdr -o hlog/ # HdrHistogram logs, one per cell
    pywebbench export RUN --format reference -o reference/runs  # for the published table
    """,
)
@click.argument("runs", nargs=-1, metavar="[RUN_ID...]")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(EXPORTERS)),
    default="json",
    show_default=True,
)
@click.option(
    "--table",
    type=click.Choice(CSV_TABLES),
    default="flat",
    show_default=True,
    help="CSV only: 'flat' = one row per iteration with its stack and cell; 'breakdown' = "
    "where the CPU time went per sampled window (run --flamegraph); 'endpoints' = one row "
    "per endpoint of a mix per measured iteration (docs/mix.md); or one table.",
)
@click.option(
    "--metric",
    type=click.Choice(PYPERF_METRICS),
    default="rps",
    show_default=True,
    help="pyperf only: rps (written as seconds per request, so pyperf's 'faster' means more "
    "requests/s), or the p50, p99 or mean latency in seconds.",
)
@click.option(
    "-o",
    "--output",
    help="Output file (default: standard output); for --format hdr and reference a "
    "directory (required).",
)
@store_options
def command(
    runs: tuple[str, ...],
    fmt: str,
    table: str,
    metric: str,
    output: str | None,
    results_dir: str,
    store_path: str | None,
) -> None:
    """Export RUN_IDs (id prefixes work; default: the latest run).

    \b
    json    every table of the runs (schema: docs/store-schema.md); imports into a store;
            with a mix, one row per endpoint per measured iteration under "endpoints"
    csv     one table, by default one row per iteration
    pyperf  pyperf's JSON, one run: one benchmark per cell, one pyperf run per replicate;
            read by `python -m pyperf compare_to a.json b.json` and `pyperf stats`
    hdr     HdrHistogram interval logs (.hlog) into the -o directory, one per cell (and
            one per endpoint of a mix), one interval per measured iteration (microseconds)
    reference  a record per completed run, <run id>.json into the -o directory (a few KB:
            each group's ratios and their intervals, the host facts), which the published
            table pools (docs/reference-table.md)
    """
    from pywebbench.export.base import ExportError, ExportOptions, write_files
    from pywebbench.files import write_atomic
    from pywebbench.store import Store, StoreError

    exporter = EXPORTERS[fmt]
    if exporter.directory and not output:
        fail(f"--output: --format {fmt} writes {exporter.files}, give a directory with -o")
    path = store_path_of(results_dir, store_path)
    try:
        with Store(path, create=False) as store:
            out = exporter.write(store, ExportOptions(runs, table, metric))
    except (StoreError, ExportError) as exc:
        fail(str(exc))
    if isinstance(out, dict):
        assert output is not None
        if not out:
            fail("RUN_ID: no stored latency histogram in these runs")
        if Path(output).exists() and not Path(output).is_dir():
            fail(f"--output: {output} is a file; --format {fmt} writes into a directory")
        try:
            written = write_files(Path(output), out)
        except OSError as exc:
            fail(f"--output: {output}: {exc.strerror or exc}")
        for path in written if fmt == "reference" else []:
            click.echo(f"wrote {path}", err=True)
        if fmt != "reference":
            click.echo(f"wrote {len(written)} .hlog file(s) into {output}", err=True)
        return
    if output:
        try:
            write_atomic(Path(output), out)
        except OSError as exc:
            fail(f"--output: {output}: {exc.strerror or exc}")
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(out)
