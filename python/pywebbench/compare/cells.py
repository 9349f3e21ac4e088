"""The figures of one stored cell that a comparison needs, read once from a study.

A cell's values are grouped by replicate (a fresh server process), because the comparison's
bootstrap resamples replicates as units: iterations of one server process are not
independent of each other (same heap, same JIT state, same CPU placement).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pywebbench.compare.endpoints import EndpointValues, endpoint_values
from pywebbench.meter.core_speed import SpeedScaling
from pywebbench.meter.flame import FlameWindow
from pywebbench.store.model import Cell, Iteration, Replicate, StackRow, Study

# Cell statuses of a cell whose measurement was cut short or never happened.
INCOMPLETE_STATUSES = ("pending", "running", "interrupted")


@dataclass
class CellFigures:
    """One cell of one run: its rows and its per-replicate measured values."""

    run_id: str
    stack: StackRow
    cell: Cell
    # Per replicate, per measured non-interrupted iteration, in order:
    rps: list[list[float]] = field(default_factory=list)
    p50_us: list[list[float]] = field(default_factory=list)
    p99_us: list[list[float]] = field(default_factory=list)
    #: The server tree's CPU seconds per request in the same iterations as ``rps``, at the
    #: core speed ``rps`` are put at (what the change costs, with or without a profile).
    cpu_per_request: list[list[float]] = field(default_factory=list)
    requests: int = 0
    errors: int = 0  # transport errors + non-2xx responses of the measured iterations
    peak_rss_bytes: int | None = None  # highest RSS of the server tree, warm-up included
    idle_rss_bytes: int | None = None  # median idle RSS before load, over replicates
    latency_hists: list[str] = field(default_factory=list)  # measured iterations' histograms
    #: The replicates' sampled windows (``run --flamegraph``; docs/flamegraphs.md).
    flames: list[FlameWindow] = field(default_factory=list)
    #: The core rate req/s were put at (None: raw), and this cell's group's elasticity:
    #: what the sampled windows' CPU times are put at one speed with.
    speed_reference: float | None = None
    elasticity: float = 1.0
    # Some measured iteration stayed interfered after its re-measures (docs/interference.md).
    interfered: bool = False
    instructions: list[float] = field(default_factory=list)  # per request, one per count
    #: A mix: each endpoint's p50 and p99 per replicate, per measured iteration.
    endpoints: EndpointValues = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``interpreter/server/framework[@wNtM] | workload @ load point``."""
        return f"{self.stack.key} | {self.cell.workload} @ {self.cell.load_point}"

    @property
    def complete(self) -> bool:
        """Measured to the end (status ok), not cut short or still running."""
        return self.cell.status == "ok"

    @property
    def failed(self) -> bool:
        return self.cell.status == "failed"

    @property
    def values(self) -> int:
        """Number of measured iteration values."""
        return sum(len(r) for r in self.rps)

    @property
    def error_rate(self) -> float:
        attempts = self.requests + self.errors
        return self.errors / attempts if attempts else 0.0


def _by_replicate(its: list[Iteration], attr: str) -> list[list[float]]:
    return _grouped(its, [getattr(it, attr) for it in its])


def _grouped(its: list[Iteration], values: list[Any]) -> list[list[float]]:
    """``values`` (one per iteration of ``its``; None: unknown) grouped by replicate."""
    groups: dict[int, list[float]] = defaultdict(list)
    for it, value in zip(its, values, strict=True):
        if value is not None:
            groups[it.replicate].append(float(value))
    return [groups[r] for r in sorted(groups) if groups[r]]


def _idle_rss(reps: list[Replicate]) -> int | None:
    values = sorted(r.idle_rss_bytes for r in reps if r.idle_rss_bytes)
    return values[len(values) // 2] if values else None


def _flames(reps: list[Replicate]) -> list[FlameWindow]:
    docs = [r.flame for r in sorted(reps, key=lambda r: r.replicate) if r.flame_json]
    return [FlameWindow.from_dict(d) for d in docs if "error" not in d and d.get("requests")]


def cell_figures(study: Study, speed: SpeedScaling | None = None) -> list[CellFigures]:
    """Every cell of ``study`` with its figures, in run then matrix order.

    ``speed`` puts req/s at one core speed (give both sides of a comparison the same one:
    :func:`pywebbench.meter.core_speed.study_scaling`; docs/interference.md#core-speed);
    None: raw."""
    iterations: dict[int, list[Iteration]] = defaultdict(list)
    for it in study.iterations:
        iterations[it.cell_id].append(it)
    replicates: dict[int, list[Replicate]] = defaultdict(list)
    for rep in study.replicates:
        replicates[rep.cell_id].append(rep)
    stacks = {s.id: s for s in study.stacks}
    out = []
    for cell in sorted(study.cells, key=lambda c: (c.run_id, c.ordinal)):
        assert cell.id is not None
        its = sorted(iterations[cell.id], key=lambda i: (i.replicate, i.kind, i.idx))
        usable = [i for i in its if not i.interrupted]
        measured = [i for i in usable if i.kind == "measured"]
        peaks = [i.rss_peak_bytes for i in usable if i.rss_peak_bytes]
        costed = [i for i in measured if i.cpu_s is not None and i.requests > 0]
        figures = CellFigures(
            run_id=cell.run_id,
            stack=stacks[cell.stack_id],
            cell=cell,
            rps=_grouped(measured, speed.rps(measured) if speed else [i.rps for i in measured]),
            p50_us=_by_replicate(measured, "latency_p50_us"),
            p99_us=_by_replicate(measured, "latency_p99_us"),
            cpu_per_request=_grouped(costed, (speed or SpeedScaling(None)).cpu_per_request(costed)),
            requests=sum(i.requests for i in measured),
            errors=sum(i.errors + i.non_2xx for i in measured),
            peak_rss_bytes=max(peaks) if peaks else None,
            idle_rss_bytes=_idle_rss(replicates[cell.id]),
            latency_hists=[h for h in (i.latency_histogram() for i in measured) if h],
            flames=_flames(replicates[cell.id]),
            speed_reference=speed.reference if speed else None,
            elasticity=speed.elasticity_of(cell.id) if speed else 1.0,
            interfered=any(i.interfered for i in measured),
            instructions=[
                float(r.instructions["per_request"])
                for r in replicates[cell.id]
                if "per_request" in r.instructions
            ],
            endpoints=endpoint_values(measured),
        )
        out.append(figures)
    return out
