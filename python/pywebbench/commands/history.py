"""``pywebbench history``: one cell's figures across every stored run."""

from __future__ import annotations

import json
import sys

import click

from pywebbench.commands._common import fail, store_options, store_path_of
from pywebbench.help_screen import OneScreen


def _fmt(x: float | None, unit: str = "") -> str:
    return "–" if x is None else f"{x:,.2f}{unit}"


@click.command(
    "history",
    cls=OneScreen,
    examples="""
    pywebbench history cpython3.11/granian-wsgi/flask -w hello
    pywebbench history '*/granian-wsgi/*' -w cpu --load-point c16 --format markdown
    """,
)
@click.argument("stack")
@click.option("--workload", "-w", required=True, help="The workload of the cell: hello, cpu...")
@click.option("--load-point", help="Only this load point (c16, r1000); default: every one.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table")
@store_options
def command(
    stack: str,
    workload: str,
    load_point: str | None,
    fmt: str,
    results_dir: str,
    store_path: str | None,
) -> None:
    """List STACK's figures on one workload across all stored runs, oldest first.

    STACK is a stack key as `pywebbench runs`/reports show it
    (cpython3.11/granian-wsgi/flask), or a glob (*/granian-wsgi/*). Each row: the run,
    median requests/s with its 95% CI, p50/p99, peak RSS, the interpreter version, the host,
    the git revision of your app (--app in a git checkout), and what changed since the
    previous row (package versions, interpreter, host, app revision).
    """
    from pywebbench.compare.history import HistoryRow, cell_history, changes
    from pywebbench.store import Store, StoreError

    try:
        with Store(store_path_of(results_dir, store_path), create=False) as store:
            rows = cell_history(store, stack, workload, load_point)
    except StoreError as exc:
        fail(str(exc))
    if not rows:
        where = f" at {load_point}" if load_point else ""
        fail(f"STACK: no stored cell of {stack!r} with workload {workload!r}{where}")
    previous: dict[tuple[str, str], HistoryRow] = {}
    notes = []
    for row in rows:
        key = (row.stack_key, row.load_point)
        notes.append("; ".join(changes(previous.get(key), row)))
        previous[key] = row
    if fmt == "json":
        docs = [dict(r.as_dict(), changes=n) for r, n in zip(rows, notes, strict=True)]
        sys.stdout.write(json.dumps(docs, indent=1) + "\n")
        return
    header = ["run", "stack", "load", "req/s", "95% CI", "p50 ms", "p99 ms", "peak RSS MiB"]
    header += ["errors", "interpreter", "host", "app rev", "changes"]
    table = []
    for r, n in zip(rows, notes, strict=True):
        rss = r.peak_rss_bytes / 2**20 if r.peak_rss_bytes else None
        status = "" if r.cell_status == "ok" else f" ({r.cell_status})"
        table.append(
            [
                r.run_id + status,
                r.stack_key,
                r.load_point,
                _fmt(r.rps.median if r.rps.n else None),
                f"{r.rps.ci_low:,.0f}-{r.rps.ci_high:,.0f}" if r.rps.n else "–",
                _fmt(r.p50_ms),
                _fmt(r.p99_ms),
                _fmt(rss),
                str(r.errors),
                f"{r.interpreter} {r.interpreter_version}",
                r.hostname,
                r.app_revision or "–",
                n,
            ]
        )
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in table]
        sys.stdout.write("\n".join(lines) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    out = Table(title=f"{stack} · {workload}: {len(rows)} stored cell(s)", title_justify="left")
    for i, col in enumerate(header):
        out.add_column(col, justify="right" if 3 <= i <= 8 else "left")
    for cells in table:
        out.add_row(*cells)
    console.print(out)
