"""One cell's figures across every stored run: ``pywebbench history STACK --workload W``.

Each row is one run (and load point) where the stack ran the workload: the median
requests/s with its 95% CI, p50/p99 latency, peak RSS, and what the run was made of
(interpreter version, package versions, host, the git revision of your own app).
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Any

from pywebbench.analysis import stats
from pywebbench.compare.cells import CellFigures, cell_figures
from pywebbench.store import Store, Study


@dataclass
class HistoryRow:
    """One run's figures for the cell."""

    run_id: str
    created_at: str
    run_status: str
    cell_status: str
    stack_key: str
    load_point: str
    rps: stats.Summary
    p50_ms: float | None
    p99_ms: float | None
    peak_rss_bytes: int | None
    errors: int
    interpreter: str
    interpreter_version: str
    packages: dict[str, str] = field(default_factory=dict)
    hostname: str = ""
    cpu_model: str = ""
    app_revision: str | None = None  # "<sha>" (+ "-dirty"), BYO apps in a git checkout

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        rps = self.rps

        def num(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "run": self.run_id,
            "created_at": self.created_at,
            "run_status": self.run_status,
            "cell_status": self.cell_status,
            "stack": self.stack_key,
            "load_point": self.load_point,
            "rps": {
                "median": num(rps.median),
                "ci_low": num(rps.ci_low),
                "ci_high": num(rps.ci_high),
                "n": rps.n,
            },
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "peak_rss_bytes": self.peak_rss_bytes,
            "errors": self.errors,
            "interpreter": self.interpreter,
            "interpreter_version": self.interpreter_version,
            "packages": self.packages,
            "hostname": self.hostname,
            "cpu_model": self.cpu_model,
            "app_revision": self.app_revision,
        }


def _light_study(store: Store, run_id: str) -> Study:
    """A run's rows without its resource samples (history needs none)."""
    cells = store.cells(run_id)
    return Study(
        runs=[store.run(run_id)],
        stacks=store.stacks(run_id),
        cells=cells,
        replicates=[r for c in cells if c.id is not None for r in store.replicates(c.id)],
        iterations=[i for c in cells if c.id is not None for i in store.iterations(c.id)],
    )


def stack_matches(pattern: str, fig: CellFigures) -> bool:
    """``pattern`` is a stack key or name, exactly or as a glob (``*/granian-*/flask``)."""
    stack = fig.stack
    return any(
        pattern == name or fnmatch.fnmatchcase(name, pattern) for name in (stack.key, stack.name)
    )


def _median_ms(values: list[list[float]]) -> float | None:
    flat = [v for rep in values for v in rep]
    return stats.median(flat) / 1000.0 if flat else None


def cell_history(
    store: Store, stack: str, workload: str, load_point: str | None = None
) -> list[HistoryRow]:
    """Rows for every stored run (oldest first) where ``stack`` ran ``workload``."""
    out = []
    for run in store.runs():
        for fig in cell_figures(_light_study(store, run.id)):
            if fig.cell.workload != workload or not stack_matches(stack, fig):
                continue
            if load_point is not None and fig.cell.load_point != load_point:
                continue
            git = run.host.get("app_git")
            revision = None
            if isinstance(git, dict) and git.get("revision"):
                revision = str(git["revision"])[:12] + ("-dirty" if git.get("dirty") else "")
            out.append(
                HistoryRow(
                    run_id=run.id,
                    created_at=run.created_at,
                    run_status=run.status,
                    cell_status=fig.cell.status,
                    stack_key=fig.stack.key,
                    load_point=fig.cell.load_point,
                    rps=stats.summarize_replicates(fig.rps),
                    p50_ms=_median_ms(fig.p50_us),
                    p99_ms=_median_ms(fig.p99_us),
                    peak_rss_bytes=fig.peak_rss_bytes,
                    errors=fig.errors,
                    interpreter=fig.stack.interpreter,
                    interpreter_version=fig.stack.interpreter_version,
                    packages=fig.stack.packages,
                    hostname=run.hostname,
                    cpu_model=run.cpu_model,
                    app_revision=revision,
                )
            )
    return out


def changes(previous: HistoryRow | None, row: HistoryRow) -> list[str]:
    """What differs from the previous row of the same stack: versions, host, app revision."""
    if previous is None:
        return []
    notes = []
    if previous.interpreter_version != row.interpreter_version:
        notes.append(
            f"{row.interpreter} {previous.interpreter_version} -> {row.interpreter_version}"
        )
    for name in sorted(set(previous.packages) | set(row.packages)):
        a, b = previous.packages.get(name), row.packages.get(name)
        if a != b:
            notes.append(f"{name} {a or '-'} -> {b or '-'}")
    if previous.hostname != row.hostname:
        notes.append(f"host {previous.hostname} -> {row.hostname}")
    if previous.app_revision != row.app_revision:
        notes.append(f"app {previous.app_revision or '-'} -> {row.app_revision or '-'}")
    return notes
