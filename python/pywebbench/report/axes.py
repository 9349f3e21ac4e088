"""The study axes of a report beyond the rankings: syscalls per request (``--syscalls``),
keep-alive against a connection per request (``--connection-mode``), HTTP/1.1 against h2c
(``--protocol``) and worker recycling (``--worker-max-requests``). :func:`build_axes` reads
them from the stored study; the tables here are shared by the HTML and Markdown reports.
Methods: docs/syscalls.md, docs/config.md, docs/http2.md.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Callable

from pywebbench import formatting as fmt
from pywebbench.analysis.ratio import ratio
from pywebbench.report.instructions import instructions_points
from pywebbench.report.tables import Column, Row, Table, TCell, rps_interval
from pywebbench.report.view import (
    AxesView,
    AxisPair,
    PointView,
    RecyclingPoint,
    ReportView,
    StackView,
    SyscallsPoint,
)
from pywebbench.store.model import Study

#: A reconnecting cell's part of its load point: "c16 close" (a connection per request),
#: "c16 100/conn" (one every 100 requests), before any " h2c" ending.
RECONNECT = re.compile(r" (close|(\d+)/conn)(?=( h2c(×\d+)?)?$)")
#: An h2c cell's load point: "c16 h2c", "c16 h2c×10" (10 streams per connection).
H2C = re.compile(r" h2c(×\d+)?$")
#: What the keep-alive against reconnecting table compares.
CONNECTION_NOTE = (
    "The same stack and connections, with connections reused for the whole run (keep-alive) "
    "and closed and opened again: after every request (close, as ab without -k) or after "
    "every N (N/conn, as httperf's --num-calls). The latency of a request that opens a "
    "connection includes the TCP connect: the engine does not report connect time apart."
)
#: What the HTTP/1.1 against h2c table compares.
PROTOCOL_NOTE = (
    "The same stack and connections over HTTP/1.1 and over HTTP/2 with prior knowledge (h2c, "
    "no TLS); h2c streams: requests in flight per h2c connection (--streams), against one "
    "per HTTP/1.1 connection. Servers that cannot serve h2c have no h2c cells (docs/http2.md)."
)
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


def _pairs(view: ReportView, other: re.Pattern[str]) -> list[AxisPair]:
    """The points whose label ends as ``other`` matches, each with the same stack, workload
    and load point without that ending (the axis' base: keep-alive, HTTP/1.1)."""
    out = []
    for w in view.workloads:
        by_point = {(p.stack_key, p.load_point): p for p in w.points}
        for (stack_key, load_point), point in by_point.items():
            base = by_point.get((stack_key, other.sub("", load_point)))
            if base is not None and base is not point:
                out.append(AxisPair(stack_key, w.name, base.load_point, base, point))
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
        connection=_pairs(view, RECONNECT),
        protocol=_pairs(view, H2C),
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
        per = f"{sp.per_request:.1f}" if sp.per_request is not None else fmt.MISSING
        cells = _stack_cells(stack, sp.stack_key, sp.workload, sp.load_point)
        cells |= {
            "requests": TCell(f"{sp.requests:,}", sp.requests),
            "per_request": TCell(per, sp.per_request),
            "top": TCell(top or "; ".join(sp.errors) or fmt.MISSING, top),
            "by_time": TCell(", ".join(sp.top_by_time) or fmt.MISSING),
        }
        rows.append(Row(cells, stack))
    return Table(columns, rows)


def _rps(p: PointView) -> float | None:
    return p.rps.median if p.rps is not None else None


def _pair_table(
    view: ReportView,
    pairs: list[AxisPair],
    names: tuple[str, str],
    notes: tuple[str, str],
    extra: Callable[[AxisPair], TCell] | None = None,
    extra_column: Column | None = None,
) -> Table | None:
    """A stack measured two ways along an axis, per workload and load point: both req/s,
    their ratio (other / base), p50, p99 and requests per server CPU-second. ``names``: the
    base's and the other's (``keep``, ``close``); ``notes``: the other's req/s and latency
    column notes; ``extra``: one more cell after the base's req/s."""
    if not pairs:
        return None
    base, other = names
    columns = [
        *_WHERE,
        Column("rps_base", f"{base} req/s", True),
        *([extra_column] if extra_column is not None else []),
        Column("rps_other", f"{other} req/s", True, notes[0]),
        Column("ratio", f"{other} / {base}", True, f"requests/s, {other} against {base}"),
        Column("p50", f"p50 ms {base} / {other}", True, notes[1]),
        Column("p99", f"p99 ms {base} / {other}", True, notes[1]),
        Column("per_cpu", f"Req/CPU-s {base} / {other}", True, "requests per server CPU-second"),
    ]
    rows = []
    for pair in pairs:
        stack = view.stacks.get(pair.stack_key)
        a, b = pair.base, pair.other
        share = ratio(_rps(b), _rps(a))
        cells = _stack_cells(stack, pair.stack_key, pair.workload, pair.load_point)
        cells |= {
            "rps_base": TCell(fmt.rate(_rps(a)), _rps(a)),
            "rps_other": TCell(fmt.rate(_rps(b)), _rps(b)),
            "ratio": TCell(fmt.ratio(share), share),
            "p50": TCell(f"{fmt.latency_ms(a.p50_ms)} / {fmt.latency_ms(b.p50_ms)}", b.p50_ms),
            "p99": TCell(f"{fmt.latency_ms(a.p99_ms)} / {fmt.latency_ms(b.p99_ms)}", b.p99_ms),
            "per_cpu": TCell(
                f"{fmt.rate(a.rps_per_cpu_s)} / {fmt.rate(b.rps_per_cpu_s)}", b.rps_per_cpu_s
            ),
        }
        if extra is not None and extra_column is not None:
            cells[extra_column.key] = extra(pair)
        rows.append(Row(cells, stack))
    return Table(columns, rows)


def _requests_per_connection(pair: AxisPair) -> TCell:
    """The reconnecting point's requests per connection (``close``: 1; ``100/conn``: 100)."""
    found = RECONNECT.search(pair.other.load_point)
    n = int(found.group(2)) if found and found.group(2) else 1
    return TCell(f"{n:,}", n)


def connection_table(view: ReportView) -> Table | None:
    """Keep-alive against reconnecting (a new connection per request, or every N), per stack
    and load point."""
    return _pair_table(
        view,
        view.axes.connection,
        ("Keep-alive", "Reconnecting"),
        ("a new connection after each N requests", "the connects are in the latency"),
        _requests_per_connection,
        Column("per_connection", "Requests per connection", True, "close: 1"),
    )


def _streams(pair: AxisPair) -> TCell:
    """The h2c point's streams per connection (``c16 h2c×4``: 4; ``c16 h2c``: 1)."""
    times = H2C.search(pair.other.load_point)
    streams = int(times.group(1)[1:]) if times and times.group(1) else 1
    return TCell(str(streams), streams)


def protocol_table(view: ReportView) -> Table | None:
    """HTTP/1.1 against h2c, per stack and load point."""
    return _pair_table(
        view,
        view.axes.protocol,
        ("HTTP/1.1", "h2c"),
        ("HTTP/2 over cleartext, prior knowledge", ""),
        _streams,
        Column("streams", "h2c streams", True, "requests in flight per h2c connection"),
    )


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
        replaced = f"≥ {r.replaced:,}" if r.replaced else ("0" if r.replaced == 0 else fmt.MISSING)
        cells |= {
            "max_requests": TCell(max_requests_label(r.max_requests), r.max_requests),
            "rps": TCell(fmt.rate(_rps(r.point)), _rps(r.point)),
            "ci": TCell(rps_interval(r.point.rps)),
            "vs_never": TCell(fmt.ratio(vs), vs),
            "p50": TCell(fmt.latency_ms(r.point.p50_ms), r.point.p50_ms),
            "p99": TCell(fmt.latency_ms(r.point.p99_ms), r.point.p99_ms),
            "replaced": TCell(replaced, r.replaced),
        }
        rows.append(Row(cells, stack))
    return Table(columns, rows)
