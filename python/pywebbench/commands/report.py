"""``pywebbench report``: write the HTML report and Markdown summary of stored runs."""

from __future__ import annotations

import sys
import webbrowser
from pathlib import Path

import click

from pywebbench.commands._common import store_options, store_path_of
from pywebbench.help_screen import OneScreen


@click.command(
    "report",
    cls=OneScreen,
    examples="""
    pywebbench report                         # the latest run in ./pywebbench-results
    pywebbench report 20261121-1530 --open    # one run, then open it in a browser
    pywebbench report RUN1 RUN2 -o out/       # two runs (e.g. CPython and PyPy) in one report
    pywebbench report --results-dir res       # the latest run in ./res (as run --results-dir)
    """,
)
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@store_options
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for report-<run>.html and .md [default: the store's directory].",
)
@click.option("--title", default=None, help="Title of the report [default: profile and date].")
@click.option("--open", "open_browser", is_flag=True, help="Open the HTML report in a browser.")
@click.option(
    "--capacity",
    "capacity_text",
    default=None,
    metavar="TARGET",
    help="Add a capacity section sizing every stack for TARGET: "
    "rps=10000[,slo=p99=50ms][,core_hour=0.0416][,gib_hour=0.0056] (docs/capacity.md).",
)
def command(
    runs: tuple[str, ...],
    results_dir: str,
    store_path: str | None,
    out_dir: Path | None,
    title: str | None,
    open_browser: bool,
    capacity_text: str | None,
) -> None:
    """Write the report of RUN... (ids or unique prefixes; default: the latest run).

    \b
    Two files, both offline-ready:
      report-<run>.html  one self-contained page (charts embedded, no network needed):
                         per workload the fastest stack and by how much, the ranking with
                         95% CIs, latency spectra, warm-up, requests/s against connections,
                         per-cell time series, failures and the fairness manifest
      report-<run>.md    ranking tables ready to paste into a README or a post

    `pywebbench runs` lists the stored runs.
    """
    from pywebbench.report import ReportRenderError, generate
    from pywebbench.report.capacity import parse_target
    from pywebbench.store import StoreError

    try:
        capacity = parse_target(capacity_text) if capacity_text is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--capacity") from None

    path = store_path_of(results_dir, store_path)
    if not path.exists():
        raise click.BadParameter(
            f"no results store at {path} (run `pywebbench run` first, or point --results-dir "
            "at its directory or --store at a pywebbench.sqlite file)",
            param_hint="--store" if store_path else "--results-dir",
        )
    try:
        paths = generate(path, list(runs), out_dir, title=title, capacity=capacity)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    except ReportRenderError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"HTML report:      {paths.html}")
    click.echo(f"Markdown summary: {paths.markdown}")
    if open_browser:
        if not webbrowser.open(paths.html.resolve().as_uri()):
            click.echo("could not open a browser; open the HTML file by hand", err=True)
    sys.stdout.flush()
