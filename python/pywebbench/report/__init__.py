"""Reports from the results store: one self-contained HTML file and a Markdown summary.

>>> from pywebbench.report import generate
>>> paths = generate("pywebbench-results/pywebbench.sqlite")   # latest run
>>> paths.html, paths.markdown

Pipeline: :func:`pywebbench.report.build.build_view` turns a stored study into a view model
(:mod:`pywebbench.report.view`); :mod:`~pywebbench.report.html` and
:mod:`~pywebbench.report.markdown` lay it out. Rounding rules: docs/report.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pywebbench.report.build import build_view
from pywebbench.report.capacity import CapacityTarget, server_cores
from pywebbench.report.html import ReportRenderError, render_html, write_html
from pywebbench.report.markdown import render_markdown, write_markdown
from pywebbench.report.sizing import capacity_view
from pywebbench.report.view import ReportView

__all__ = [
    "ReportPaths",
    "ReportRenderError",
    "ReportView",
    "build_view",
    "generate",
    "render_html",
    "render_markdown",
    "report_basename",
]


@dataclass(frozen=True)
class ReportPaths:
    """Where :func:`generate` wrote the report."""

    html: Path
    markdown: Path


def report_basename(run_ids: Sequence[str]) -> str:
    """File name stem of a report: ``report-<run id>`` (``+N`` when several runs)."""
    if not run_ids:
        return "report"
    extra = f"+{len(run_ids) - 1}" if len(run_ids) > 1 else ""
    return f"report-{run_ids[-1]}{extra}"


def generate(
    store_path: str | os.PathLike[str],
    run_ids: Sequence[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    title: str | None = None,
    capacity: CapacityTarget | None = None,
) -> ReportPaths:
    """Write the HTML report and the Markdown summary of ``run_ids`` (default: latest run).

    ``run_ids`` may be id prefixes. ``capacity`` adds the section sizing each stack for that
    target (docs/capacity.md). ``out_dir`` defaults to the store's directory. Files are
    named ``report-<last run id>.html`` / ``.md``. Raises
    :class:`pywebbench.store.StoreError` when the store or a run does not exist.
    """
    from pywebbench.store import Store

    with Store(store_path, create=False) as store:
        ids = store.resolve_run_ids(list(run_ids or []))
        study = store.load_study(ids)
    view = build_view(study, title=title)
    if capacity is not None:
        view.capacity = capacity_view(view, capacity, server_cores(study))
    out = Path(out_dir) if out_dir is not None else Path(store_path).resolve().parent
    stem = report_basename(sorted(ids))
    return ReportPaths(
        html=write_html(view, out / f"{stem}.html"),
        markdown=write_markdown(view, out / f"{stem}.md"),
    )
