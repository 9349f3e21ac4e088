"""``pywebbench compare``: compare two stored runs cell by cell; gate CI jobs on it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pywebbench.commands._common import fail, store_options, store_path_of
from pywebbench.help_screen import OneScreen

if TYPE_CHECKING:
    from pywebbench.compare import Comparison

FORMATS = ("table", "markdown", "json", "html")


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@click.command(
    "compare",
    cls=OneScreen,
    examples="""
    pywebbench compare --latest 2
    pywebbench compare 20261120 20261127 --fail-if 'slower>5%,p99>10%,errors>0'
    pywebbench compare RUN_CPY RUN_PYPY --vary interpreter --format html -o cmp.html
    """,
)
@click.argument("runs", nargs=-1, metavar="[BASE NEW]")
@click.option("--latest", type=int, help="Compare the newest runs: --latest 2 (older is BASE).")
@click.option(
    "--vary",
    multiple=True,
    metavar="AXIS",
    help="An axis expected to differ, left out of cell matching: interpreter, packages, "
    "server, framework (repeatable or comma list).",
)
@click.option(
    "--fail-if",
    "fail_if",
    multiple=True,
    metavar="RULE",
    help="Exit 1 when a cell is significantly worse: slower>5%, p50>10%, p99>10%, "
    "memory>20%, instructions>1% (--instructions counts), errors>0, errors>1% (repeatable "
    "or comma list).",
)
@click.option(
    "--accept-interfered",
    is_flag=True,
    help="With --fail-if: judge cells that other processes interfered with on their figures "
    "instead of failing them (docs/interference.md).",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", help="Write to this file (default: standard output).")
@click.option(
    "--level",
    type=float,
    default=0.99,
    show_default=True,
    help="Confidence level of the intervals the verdicts and the gate use.",
)
@click.option(
    "--min-change",
    type=float,
    default=0.02,
    show_default=True,
    help="Smallest relative change a verdict calls faster or slower.",
)
@store_options
def command(
    runs: tuple[str, ...],
    latest: int | None,
    vary: tuple[str, ...],
    fail_if: tuple[str, ...],
    accept_interfered: bool,
    fmt: str,
    output: str | None,
    level: float,
    min_change: float,
    results_dir: str,
    store_path: str | None,
) -> None:
    """Compare run NEW with run BASE (ids or unique prefixes), cell by cell.

    \b
    Cells pair by stack, workload and load point. Per pair: NEW/BASE ratios of the median
    requests/s, p50 and p99 latency and the server's CPU per request, with confidence
    intervals over replicates (Welch's t below 10 replicates a side, a two-level bootstrap
    from 10), the peak-memory change, and a verdict: faster, slower, no significant
    change, or interfered (other processes took CPU from the cell's cores in either run:
    its figures are not trusted, and --fail-if fails it unless --accept-interfered).
    Method: docs/compare.md.

    \b
    Exit status: 0 = compared (gate passed), 1 = a --fail-if rule tripped, 2 = bad input.
    """
    from pywebbench.compare import AXES, compare_runs
    from pywebbench.compare.gate import GateSyntaxError, parse_rules
    from pywebbench.store import Store, StoreError

    try:
        rules = parse_rules(fail_if)
    except GateSyntaxError as exc:
        fail(f"--fail-if: {exc}")
    if not 0.5 <= level < 1.0:
        fail(f"--level: {level} is not a confidence level between 0.5 and 1 (e.g. 0.99)")
    if not 0.0 <= min_change < 1.0:
        fail(f"--min-change: {min_change} is not a fraction between 0 and 1 (e.g. 0.02)")
    axes = _split(vary)
    for axis in axes:
        if axis not in AXES:
            fail(f"--vary: unknown axis {axis!r}; choose from {', '.join(AXES)}")
    if latest is not None and runs:
        fail("RUNS: give BASE and NEW, or --latest 2, not both")
    if latest is not None and latest != 2:
        fail(f"--latest: compares two runs, got {latest}")
    if latest is None and len(runs) != 2:
        fail(f"RUNS: expected BASE and NEW (or --latest 2), got {len(runs)} run id(s)")
    if fmt == "table" and output:
        fail("--output: the table is for the terminal; use --format markdown, json or html")
    try:
        store = Store(store_path_of(results_dir, store_path), create=False)
    except StoreError as exc:
        fail(f"--store: {exc}")
    with store:
        if latest is not None:
            ids = [r.id for r in store.runs()]
            if len(ids) < 2:
                fail(f"--latest: the store holds {len(ids)} run(s), 2 are needed")
            runs = (ids[-2], ids[-1])
        try:
            result = compare_runs(
                store,
                runs[0],
                runs[1],
                vary=axes,
                rules=rules,
                level=level,
                min_change=min_change,
                accept_interfered=accept_interfered,
            )
        except StoreError as exc:
            fail(f"RUNS: {exc}")
    for fig in result.incomplete:
        side = "BASE" if fig.run_id == result.base.id else "NEW"
        click.echo(
            f"warning: {side} run {fig.run_id} cell {fig.label} is {fig.cell.status}: "
            "left out, only complete cells are compared",
            err=True,
        )
    if not result.comparisons:
        fail(
            f"RUNS: {result.base.id} and {result.new.id} have no complete cells in common"
            + ("" if axes else " (does an axis differ? see --vary)")
        )
    _emit(result, fmt, output)
    sys.exit(1 if result.gate_failed else 0)


def _emit(result: Comparison, fmt: str, output: str | None) -> None:
    """Print or write ``result`` in ``fmt``."""
    from pywebbench.compare.render import print_table, to_json, to_markdown

    if fmt == "table":
        print_table(result)
        return
    if fmt == "html":
        from pywebbench.compare.html import render_html

        text = render_html(result)
    elif fmt == "json":
        text = to_json(result)
    else:
        text = to_markdown(result)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
