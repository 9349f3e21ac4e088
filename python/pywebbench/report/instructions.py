"""Instructions per request in a report (``--instructions``, docs/instructions.md): the
counts of each stack x workload x load point, beside the timed CPU per request. Shared by
the HTML and Markdown reports."""

from __future__ import annotations

from collections import defaultdict

from pywebbench import formatting as fmt
from pywebbench.report.tables import Column, Row, Table, TCell
from pywebbench.report.view import InstructionsPoint, ReportView
from pywebbench.store.model import Study

#: The statement every instruction figure goes with.
COUNTED_NOTE = (
    "User-space instructions of the server's whole process tree per request, counted by "
    "valgrind (callgrind) on a separate server of the cell over a fixed batch on one "
    "connection, after a warm-up batch: reproducible to ~0.03% (a prefork server) or ~0.4% "
    "(an event loop's timers, between runs at different machine loads), blind to the kernel, "
    "waiting, cache misses and parallelism (docs/instructions.md). Not a throughput figure."
)


def instructions_points(view: ReportView, study: Study) -> list[InstructionsPoint]:
    """Every counted point of ``study``, with the timed CPU per request of its point."""
    key_of = {s.id: s.key for s in study.stacks if s.id is not None}
    cells = {c.id: c for c in study.cells}
    points: dict[tuple[str, str, str], InstructionsPoint] = {}
    for rep in study.replicates:
        cell = cells.get(rep.cell_id)
        if cell is None or not rep.instructions_json:
            continue
        where = (key_of[cell.stack_id], cell.workload, cell.load_point)
        point = points.setdefault(where, InstructionsPoint(*where))
        doc = rep.instructions
        if "error" in doc:
            point.errors.append(str(doc["error"]))
            continue
        point.counts.append(float(doc["per_request"]))
        point.requests += int(doc["requests"])
        point.processes = max(point.processes, int(doc["processes"]))
        point.threads = max(point.threads, int(doc["threads"]))
    per_cpu = {
        (p.stack_key, w.name, p.load_point): p.rps_per_cpu_s
        for w in view.workloads
        for p in w.points
    }
    for where, point in points.items():
        rps_per_cpu_s = per_cpu.get(where)
        if rps_per_cpu_s:
            point.cpu_us_per_request = 1e6 / rps_per_cpu_s
    return list(points.values())


def instructions_table(view: ReportView) -> Table | None:
    """Instructions per request per counted point (None without ``--instructions``)."""
    if not view.axes.instructions:
        return None
    columns = [
        Column("stack", "Stack"),
        Column("workload", "Workload"),
        Column("load", "Load"),
        Column("per_request", "Instructions/request", True, "median over the counts"),
        Column("spread", "Max/min", True, "largest count over the smallest"),
        Column("counts", "Counts", True, "counts (replicates) behind the figure"),
        Column("tree", "Processes/threads", True, "counted in the server's tree"),
        Column("cpu", "CPU µs/request (timed)", True, "server CPU per request, measured"),
        Column("per_us", "Instructions per CPU µs", True),
    ]
    by_workload: dict[str, list[InstructionsPoint]] = defaultdict(list)
    for ip in view.axes.instructions:
        by_workload[ip.workload].append(ip)
    rows = []
    for points in by_workload.values():
        for ip in sorted(points, key=lambda p: (p.per_request is None, p.per_request or 0)):
            stack = view.stacks.get(ip.stack_key)
            per = ip.per_request
            per_us = per / ip.cpu_us_per_request if per and ip.cpu_us_per_request else None
            cells = {
                "stack": TCell(stack.label if stack else ip.stack_key, ip.stack_key),
                "workload": TCell(ip.workload, ip.workload),
                "load": TCell(ip.load_point, ip.load_point),
                "per_request": TCell(
                    fmt.count(per) if per is not None else "; ".join(ip.errors) or fmt.MISSING, per
                ),
                "spread": TCell(
                    f"{ip.spread:.5f}" if ip.spread is not None else fmt.MISSING, ip.spread
                ),
                "counts": TCell(str(len(ip.counts)), len(ip.counts)),
                "tree": TCell(f"{ip.processes}/{ip.threads}" if ip.counts else fmt.MISSING),
                "cpu": TCell(
                    f"{ip.cpu_us_per_request:,.1f}" if ip.cpu_us_per_request else fmt.MISSING,
                    ip.cpu_us_per_request,
                ),
                "per_us": TCell(fmt.count(per_us), per_us),
            }
            rows.append(Row(cells, stack))
    return Table(columns, rows)
