"""The per-run estimates that pooling reads (:mod:`pywebbench.analysis.pooling`), out of a
store's runs: every interleaved cell's ratio to its group's reference and to every other
stack of its group. A reference record (:mod:`pywebbench.reference.record`) gives the same
ratios to the reference for the run it was written from."""

from __future__ import annotations

from dataclasses import dataclass, field

from pywebbench.analysis.pooling import RunEstimate, pair_estimates, reference_estimate
from pywebbench.store.model import Run, Study


def host_label(cpu_model: str, fallback: str) -> str:
    """What tells a run's machine apart in the pooled figures: its CPU model, else
    ``fallback`` (a hostname, or a record's machine id)."""
    return cpu_model or fallback or "unknown host"


def run_host(run: Run) -> str:
    """A stored run's host label (:func:`host_label`)."""
    return host_label(run.cpu_model, run.hostname)


@dataclass
class StudyEstimates:
    """A study's estimates: ratios to each group's reference, ratios between stacks, and
    how many measured cells have no group figures (sequential cells)."""

    reference: list[RunEstimate] = field(default_factory=list)
    pairs: list[RunEstimate] = field(default_factory=list)
    plain: int = 0


def study_estimates(study: Study) -> StudyEstimates:
    """The ratios to the reference and between stacks of every interleaved cell of
    ``study``, and how many cells measured have no group figures."""
    hosts = {r.id: run_host(r) for r in study.runs}
    keys = {s.id: s.key for s in study.stacks}
    out = StudyEstimates()
    for cell in study.cells:
        group = cell.flags.get("group")
        if not isinstance(group, dict):
            out.plain += cell.status == "ok"
            continue
        where = (hosts.get(cell.run_id, "?"), keys.get(cell.stack_id, "?"))
        args = (cell.run_id, *where, cell.workload, cell.load_point, group)
        est = reference_estimate(*args)
        if est is not None:
            out.reference.append(est)
        out.pairs += pair_estimates(*args)
    return out
