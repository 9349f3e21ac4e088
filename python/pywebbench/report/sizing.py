"""The capacity rows of a report: each stack's needs for a target load, computed from the
report's view (the formulas are in :mod:`pywebbench.report.capacity`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pywebbench.report.capacity import (
    MIB_PER_GIB,
    CapacityRow,
    CapacityTarget,
    CapacityView,
    cost_per_hour,
)
from pywebbench.report.knee import KneeView
from pywebbench.report.view import PointView, ReportView
from pywebbench.study.slo import Slo


def capacity_view(view: ReportView, target: CapacityTarget, server_cores: int) -> CapacityView:
    """The report's capacity section for ``target``, with ``server_cores`` per copy."""
    return CapacityView(target, capacity_rows(view, target, server_cores))


def _knee_meets(knee: KneeView, slo: Slo | None) -> bool:
    """The knee's SLO is at least as strict as the target's (same percentile or a higher
    one, a target no larger), so a rate that met it meets the target's too."""
    if slo is None or not knee.knees:
        return False
    percentile = float(knee.percentile_label.lstrip("p"))
    return percentile >= slo.percentile and knee.target_ms <= slo.target_us / 1000.0


def _best_closed(points: Sequence[PointView]) -> PointView | None:
    closed = [p for p in points if p.load_model == "closed" and p.rps is not None]
    return max(closed, key=lambda p: p.rps.median if p.rps else 0.0, default=None)


def capacity_rows(view: ReportView, target: CapacityTarget, server_cores: int) -> list[CapacityRow]:
    """Each stack's row per workload, cheapest first (fewest cores, then least memory)."""
    rows: list[CapacityRow] = []
    for workload in view.workloads:
        by_stack: dict[str, list[PointView]] = {}
        for p in workload.points:
            by_stack.setdefault(p.stack_key, []).append(p)
        for key, points in by_stack.items():
            stack = view.stacks.get(key)
            if stack is None:
                continue
            knees = [
                k
                for k in view.knees
                if k.stack_key == key and k.workload == workload.name and _knee_meets(k, target.slo)
            ]
            best = _best_closed(points)
            if knees:
                knee = max(knees, key=lambda k: k.estimate.median)
                per_copy, basis, checked = knee.estimate.median, f"knee {knee.slo}", True
                point = next((p for p in points if p.load_point == knee.load_point), best)
            elif best is not None and best.rps is not None:
                per_copy, basis, checked = best.rps.median, f"closed loop {best.load_point}", False
                point = best
            else:
                continue
            if per_copy <= 0:
                continue
            copies = math.ceil(target.rps / per_copy)
            cores, workers = copies * server_cores, copies * stack.workers
            peak = point.peak_rss_mib if point is not None else None
            memory = copies * peak / MIB_PER_GIB if peak is not None else None
            per_hour = cost_per_hour(target, cores, memory)
            rows.append(
                CapacityRow(
                    stack_key=key,
                    label=stack.label,
                    workload=workload.name,
                    basis=basis,
                    slo_checked=checked,
                    per_copy_rps=per_copy,
                    copy_cores=server_cores,
                    copy_workers=stack.workers,
                    copies=copies,
                    cores=cores,
                    workers=workers,
                    memory_gib=memory,
                    cost_per_hour=per_hour,
                    cost_per_million=(
                        per_hour / (target.rps * 3600.0) * 1e6 if per_hour is not None else None
                    ),
                )
            )
    rows.sort(key=lambda r: (r.workload, r.cores, r.memory_gib or 0.0, r.label))
    return rows
