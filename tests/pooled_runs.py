"""Synthetic runs of an interleaved study, as a run stores them (no servers): each cell's
group figures in ``flags["group"]`` with a 95% interval over 4 degrees of freedom, the host
facts in the run row. Two workloads, three CPython stacks 1.3x and 1.1x apart; each run's
granian ratio moved by a fixed pattern of a few percent."""

from __future__ import annotations

import json
import math

from pywebbench.analysis.stats import t_quantile
from pywebbench.store import Cell, Run, StackRow, Study

T = t_quantile(0.975, 4)
STACKS = ["gunicorn-sync", "granian-wsgi", "waitress"]
WORKLOADS = ["hello", "cpu"]
XEON, EPYC = "Intel Xeon E5", "AMD EPYC 7B13"
BASE = {"gunicorn-sync": 0.0, "granian-wsgi": math.log(1.3), "waitress": math.log(1.1)}
WOBBLE = [0.00, 0.02, -0.015, 0.01, -0.02, 0.005, 0.015, -0.01]
HOST_EXTRA = {
    "cpu_cache_bytes": [1048576, 33554432],
    "pypy_gc": {"pypy3.9": {"nursery_bytes": 1048576, "floor_bytes": 2097152}},
    "pywebbench_git": {"revision": "0123456789abcdef", "dirty": False},
}


def key(server: str) -> str:
    """The stack key of ``server`` with raw WSGI on CPython 3.11."""
    return f"cpython3.11/{server}/raw-wsgi"


def run_row(i: int, *, hours: float = 3.0, status: str = "completed", machines: int = 2) -> Run:
    """Run ``run{i}``, on one of ``machines`` machines in turn, ``hours * i`` after the
    first."""
    start = 60 * int(hours * 60 * i)  # seconds
    day, rest = divmod(start, 86400)
    stamp = f"2026-12-{5 + day:02d}T{rest // 3600:02d}:{rest % 3600 // 60:02d}:00.000+00:00"
    cpu = XEON if i % machines == 0 else EPYC
    return Run(
        f"run{i}", stamp, stamp, status, "quick", f"host{i % machines}", cpu, 2, "6.1", None,
        None,
        "Linux", "0.1.0", "3.11", "[0]", "[1]", json.dumps({"load": {"seed": 100 + i}}),
        json.dumps(HOST_EXTRA),
    )  # fmt: skip


def group_flags(logs: dict[str, float], me: str, se: float = 0.01) -> dict[str, object]:
    """A cell's ``flags["group"]``: its ratio to the geometric mean of the group's stacks
    with a 95% interval, its req/s, and its ratio to every other stack."""
    mean = sum(logs.values()) / len(logs)
    y = logs[me] - mean
    vs = {
        key(o): [math.exp(logs[me] - v), math.exp(logs[me] - v - T * se),
                 math.exp(logs[me] - v + T * se)]
        for o, v in logs.items() if o != me
    }  # fmt: skip
    rps = 1000.0 * math.exp(logs[me])
    return {
        "group": "cpython3.11 | hello @ c64", "reference": "geometric mean", "stacks": len(logs),
        "processes": 3, "df": 4, "rps": rps, "rps_low": rps * 0.99, "rps_high": rps * 1.01,
        "ratio": math.exp(y), "low": math.exp(y - T * se), "high": math.exp(y + T * se),
        "rounds": 12, "seed": 1, "vs": vs,
    }  # fmt: skip


def study(
    runs: int,
    *,
    lacking: int | None = None,
    hours: float = 3.0,
    shift: dict[int, float] | None = None,
    machines: int = 2,
) -> Study:
    """``runs`` runs (``run0``...) on ``machines`` machines in turn; run ``lacking`` has no
    waitress; ``shift`` moves a run's granian level by a further log amount (a run that
    lands elsewhere)."""
    out = Study()
    for r in range(runs):
        out.runs.append(run_row(r, hours=hours, machines=machines))
        names = [s for s in STACKS if not (r == lacking and s == "waitress")]
        moved = WOBBLE[r % len(WOBBLE)] + (shift or {}).get(r, 0.0)
        logs = {s: BASE[s] + (moved if s == "granian-wsgi" else 0.0) for s in names}
        ids = {}
        for s in names:
            ids[s] = len(out.stacks) + 1
            row = StackRow(ids[s], f"run{r}", key(s), key(s), "cpython3.11", "cpython",
                           "3.11.7", "", "/usr/bin/python3", s, "wsgi", "raw-wsgi", 1,
                           1)  # fmt: skip
            out.stacks.append(row)
        for w in WORKLOADS:
            for s in names:
                cid = len(out.cells) + 1
                cell = Cell(cid, f"run{r}", ids[s], f"{s}|{w}|c64", cid, w, "{}", "closed", 64,
                            None, "c64", "ok")  # fmt: skip
                cell.flags_json = json.dumps({"group": group_flags(logs, s)})
                out.cells.append(cell)
    return out
