"""The study axes of a report beyond the rankings: syscalls per request (``--syscalls``),
keep-alive against a connection per request (``--connection-mode``) and worker recycling
(``--worker-max-requests``). :func:`build_axes` reads them from the stored study; the
tables here are shared by the HTML and Markdown reports. Methods: docs/syscalls.md,
docs/config.md.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict

from pywebbench.report.instructions import instructions_points
from pywebbench.report.tables import (
    MISSING,
    Column,
    Row,
    Table,
    TCell,
    fmt_ci,
    fmt_ms,
    fmt_ratio,
    fmt_rps,
    ratio,
)
from pywebbench.report.view import (
    AxesView,
    ConnectionPair,
    PointView,
    RecyclingPoint,
    ReportView,
    StackView,
    SyscallsPoint,
)
from pywebbench.store.model import Study

CLOSE_SUFFIX = " close"  # a connection-per-request cell's load point: "c16 close"
#: Syscalls named per point in the tables (the most frequent first).
TOP_SYSCALLS = 6
#: The statement every syscall figure goes with.
TRACED_NOTE = (
    "Counted by strace -f -c over the server's whole process tree in a separate, traced "
    "window after the measured iterations: tracing slows the server, so these are counts per "
    "request, not throughput figures."
)


def _base_key(key: str) -> str:
    """A stack key without its recycling setting: ``x@w2t4,mr100`` -> ``x@w2t4``."""
    return re.sub(r"[@,]mr\d+$", "", key)


def _syscalls(study: Study, key_of: dict[int, str]) -> list[SyscallsPoint]:
    cells = {c.id: c for c in study.cells}
    windows: dict[tuple[str, str, str], list[dict[str, object]]] = defaultdict(list)
    for rep in study.replicates:
        cell = cells.get(rep.cell_id)
        if cell is None or not rep.syscalls_json:
            continue
        windows[(key_of[cell.stack_id], cell.workload, cell.load_point)].append(rep.syscalls)
    out = []
    for (stack_key, workload, load_point), docs in windows.items():
        point = SyscallsPoint(stack_key, workload, load_point)
        per_name: dict[str, list[float]] = defaultdict(list)
        totals: list[float] = []
        times: dict[str, float] = defaultdict(float)
        for doc in docs:
            if "error" in doc:
                point.errors.append(str(doc["error"]))
                continue
            if not doc.get("requests"):
                point.errors.append("no request completed in the traced window")
                continue
            point.replicates += 1
            point.requests += int(str(doc["requests"]))
            totals.append(float(str(doc["per_request"])))
            rows = doc.get("syscalls")
            for row in rows if isinstance(rows, list) else []:
                per_name[row["name"]].append(float(row["per_request"]))
                times[row["name"]] += float(row["seconds"])
        n = point.replicates
        if n:
            point.per_request = statistics.median(totals)
            # A syscall missing from a window counts 0 there.
            medians = {k: statistics.median(v + [0.0] * (n - len(v))) for k, v in per_name.items()}
            point.by_name = sorted(medians.items(), key=lambda kv: (-kv[1], kv[0]))
            point.top_by_time = [k for k, _ in sorted(times.items(), key=lambda kv: -kv[1])][:5]
        out.append(point)
    return out


def _connection(view: ReportView) -> list[ConnectionPair]:
    out = []
    for w in view.workloads:
        by_point = {(p.stack_key, p.load_point): p for p in w.points}
        for (stack_key, load_point), close in by_point.items():
            if not load_point.endswith(CLOSE_SUFFIX):
                continue
            keep = by_point.get((stack_key, load_point[: -len(CLOSE_SUFFIX)]))
            if keep is not None:
                out.append(ConnectionPair(stack_key, w.name, keep.load_point, keep, close))
    return out


def _recycling(view: ReportView, study: Study, key_of: dict[int, str]) -> list[RecyclingPoint]:
    swept = {_base_key(k) for k, s in view.stacks.items() if s.worker_max_requests}
    if not swept:
        return []
    replaced: dict[tuple[str, str, str], int] = {}
    cells = {c.id: c for c in study.cells}
    for it in study.iterations:
        cell = cells.get(it.cell_id)
        if cell is None or it.kind != "measured" or it.processes_seen is None:
            continue
        key = (key_of[cell.stack_id], cell.workload, cell.load_point)
        extra = max(0, it.processes_seen - (it.processes_peak or 0))
        replaced[key] = max(replaced.get(key, 0), extra)
    out = []
    for w in view.workloads:
        for p in w.points:
            stack = view.stacks[p.stack_key]
            base = _base_key(p.stack_key)
            if base in swept:
                out.append(
                    RecyclingPoint(
                        p.stack_key,
                        base,
                        w.name,
                        p.load_point,
                        stack.worker_max_requests,
                        p,
                        replaced.get((p.stack_key, w.name, p.load_point)),
                    )
                )
    # Per sweep: "never" first, then from the most requests per worker to the fewest.
    out.sort(key=lambda r: (r.base_key, r.workload, r.load_point, -(r.max_requests or 1e18)))
    return out


def build_axes(view: ReportView, study: Study) -> AxesView:
    """The axes' figures of ``study`` (``view`` holds its points and stacks)."""
    key_of = {s.id: s.key for s in study.stacks if s.id is not None}
    return AxesView(
        syscalls=_syscalls(study, key_of),
        instructions=instructions_points(view, study),
        connection=_connection(view),
        recycling=_recycling(view, study, key_of),
    )


def max_requests_label(n: int) -> str:
    """``never`` for 0, else the number of requests."""
    return "never" if n == 0 else f"{n:,}"


def _stack_cells(
    stack: StackView | None, fallback: str, workload: str, load: str
) -> dict[str, TCell]:
    return {
        "stack": TCell(stack.label if stack else fallback, fallback),
        "workload": TCell(workload, workload),
        "load": TCell(load, load),
    }


_WHERE = [Column("stack", "Stack"), Column("workload", "Workload"), Column("load", "Load")]


def syscalls_table(view: ReportView) -> Table | None:
    """Syscalls per request per traced point (None without ``--syscalls`` windows)."""
    if not view.axes.syscalls:
        return None
    columns = [
        *_WHERE,
        Column("requests", "Requests traced", True, "completed in the traced windows"),
        Column("per_request", "Syscalls/request", True, "all syscalls, median over windows"),
        Column("top", "Most frequent (per request)"),
        Column("by_time", "Most system time"),
    ]
    rows = []
    for sp in view.axes.syscalls:
        stack = view.stacks.get(sp.stack_key)
        top = ", ".join(f"{name} {n:.2f}" for name, n in sp.by_name[:TOP_SYSCALLS])
        per = f"{sp.per_request:.1f}" if sp.per_request is not None else MISSING
        cells = _stack_cells(stack, sp.stack_key, sp.workload, sp.load_point)
        cells |= {
            "requests": TCell(f"{sp.requests:,}", sp.requests),
            "per_request": TCell(per, sp.per_request),
            "top": TCell(top or "; ".join(sp.errors) or MISSING, top),
            "by_time": TCell(", ".join(sp.top_by_time) or MISSING),
        }
        rows.append(Row(cells, stack))
    return Table(columns, rows)


def _rps(p: PointView) -> float | None:
    return p.rps.median if p.rps is not None else None


def connection_table(view: ReportView) -> Table | None:
    """Keep-alive against a connection per request, per stack and load point."""
    if not view.axes.connection:
        return None
    columns = [
        *_WHERE,
        Column("rps_keep", "Keep-alive req/s", True),
        Column("rps_close", "Close req/s", True, "a new connection per request"),
        Column("ratio", "Close / keep-alive", True, "requests/s with a connection per request"),
        Column("p50", "p50 ms keep / close", True, "close: the connect is in the latency"),
        Column("p99", "p99 ms keep / close", True, "close: the connect is in the latency"),
        Column("per_cpu", "Req/CPU-s keep / close", True, "requests per server CPU-second"),
    ]
    rows = []
    for pair in view.axes.connection:
        stack = view.stacks.get(pair.stack_key)
        keep, close = pair.keepalive, pair.close
        share = ratio(_rps(close), _rps(keep))
        cells = _stack_cells(stack, pair.stack_key, pair.workload, pair.load_point)
        cells |= {
            "rps_keep": TCell(fmt_rps(_rps(keep)), _rps(keep)),
            "rps_close": TCell(fmt_rps(_rps(close)), _rps(close)),
            "ratio": TCell(fmt_ratio(share), share),
            "p50": TCell(f"{fmt_ms(keep.p50_ms)} / {fmt_ms(close.p50_ms)}", close.p50_ms),
            "p99": TCell(f"{fmt_ms(keep.p99_ms)} / {fmt_ms(close.p99_ms)}", close.p99_ms),
            "per_cpu": TCell(
                f"{fmt_rps(keep.rps_per_cpu_s)} / {fmt_rps(close.rps_per_cpu_s)}",
                close.rps_per_cpu_s,
            ),
        }
        rows.append(Row(cells, stack))
    return Table(columns, rows)


def recycling_table(view: ReportView) -> Table | None:
    """Throughput and tail latency against the worker recycling setting."""
    if not view.axes.recycling:
        return None
    columns = [
        *_WHERE,
        Column("max_requests", "Recycle after", True, "requests per worker (never: 0)"),
        Column("rps", "Req/s", True),
        Column("ci", "95% CI", True),
        Column("vs_never", "vs never", True, "req/s / req/s of the same stack never recycled"),
        Column("p50", "p50 ms", True),
        Column("p99", "p99 ms", True),
        Column("replaced", "Workers replaced", True, "in one measured iteration, at least"),
    ]
    never = {
        (r.base_key, r.workload, r.load_point): _rps(r.point)
        for r in view.axes.recycling
        if r.max_requests == 0
    }
    rows = []
    for r in view.axes.recycling:
        stack = view.stacks.get(r.base_key) or view.stacks.get(r.stack_key)
        vs = ratio(_rps(r.point), never.get((r.base_key, r.workload, r.load_point)))
        cells = _stack_cells(stack, r.base_key, r.workload, r.load_point)
        replaced = f"≥ {r.replaced:,}" if r.replaced else ("0" if r.replaced == 0 else MISSING)
        cells |= {
            "max_requests": TCell(max_requests_label(r.max_requests), r.max_requests),
            "rps": TCell(fmt_rps(_rps(r.point)), _rps(r.point)),
            "ci": TCell(fmt_ci(r.point.rps)),
            "vs_never": TCell(fmt_ratio(vs), vs),
            "p50": TCell(fmt_ms(r.point.p50_ms), r.point.p50_ms),
            "p99": TCell(fmt_ms(r.point.p99_ms), r.point.p99_ms),
            "replaced": TCell(replaced, r.replaced),
        }
        rows.append(Row(cells, stack))
    return Table(columns, rows)
