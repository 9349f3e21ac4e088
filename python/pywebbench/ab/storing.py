"""Store an A/B: one run holding both sides (a stack and a cell each, every slice an
iteration whose ``idx`` is its round) and the paired ratio (an ``ab_comparisons`` row)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pywebbench.ab.render import to_doc
from pywebbench.ab.session import AbOutcome, AbSideRun
from pywebbench.analysis.estimate import kept_rounds, side_process
from pywebbench.analysis.warmup import WarmupEnd
from pywebbench.analysis.warmup_class import WarmupClass
from pywebbench.compare.gate import Violation
from pywebbench.run.rows import cell_row, run_row, slice_iteration, stack_row
from pywebbench.store import DEFAULT_FILENAME, CellStatus, IterationKind, Phase, Replicate, Store
from pywebbench.store.ab_rows import AbComparison
from pywebbench.store.db import new_run_id, utcnow
from pywebbench.store.model import RunStatus

#: The ``runs.profile`` of an A/B run.
AB_PROFILE = "ab"


def _side(store: Store, run_id: str, side: AbSideRun, o: AbOutcome, ordinal: int) -> int:
    cell = side.study.cell
    role = side.study.side.role
    row = stack_row(run_id, cell.variant)
    stack_id = store.add_stack(dataclasses.replace(row, key=f"{row.key} [{role}]"))
    status = CellStatus.OK if o.stopped != "interrupted" else CellStatus.INTERRUPTED
    key = f"{row.key} [{role}]|{cell.workload.name}|{cell.load_point}"
    cell_id = store.add_cell(
        cell_row(run_id, stack_id, cell, o.server_cpus, o.generator_cpus, key=key, status=status)
    )
    # --instructions: the k-th count on the k-th replicate (a count is of a fresh server
    # process under valgrind, not of the timed one, but one per process a side all the same)
    counted = [json.dumps(doc) for doc in side.instructions]
    for k, pid in enumerate(side.pids):  # one replicate per server process
        stopped = side.stopped[k] if k < len(side.stopped) else None
        unsettled = k < len(side.unsettled) and side.unsettled[k]
        store.add_replicate(
            Replicate(
                None,
                cell_id,
                k,
                CellStatus.FAILED if stopped else CellStatus.OK,
                utcnow(),
                pid=pid,
                finished_at=utcnow(),
                instructions_json=counted[k] if k < len(counted) else None,
                warmup_end=str(WarmupEnd.CAP if unsettled else WarmupEnd.STEADY),
                warmup_class=str(WarmupClass.NO_STEADY_STATE.value) if unsettled else None,
                failure_phase=Phase.MEASURE if stopped else None,
                failure_reason=stopped,
            )
        )
    dropped = {(p.round, p.process): p.dropped for p in o.pairs}
    for s in side.slices:
        rate = o.speed.rates.get(s.index)
        process = side_process(s.target)[1]
        why = dropped.get((s.round, process))
        start = side.starts[process] if process < len(side.starts) else None
        warm = start is not None and s.round >= start
        kind = IterationKind.MEASURED if warm else IterationKind.WARMUP
        store.add_iteration(slice_iteration(s, cell_id, why, rate, process, kind=kind))
    return cell_id


def store_outcome(
    o: AbOutcome,
    verdict: str,
    violations: list[Violation],
    results_dir: Path,
    store_file: Path | None = None,
) -> str:
    """Write the A/B into the store (``store_file``, else the one in ``results_dir``);
    returns the run id."""
    run_id = new_run_id()
    doc = to_doc(o, verdict, violations)
    with Store(store_file or results_dir / DEFAULT_FILENAME) as store:
        store.create_run(
            run_row(
                run_id,
                profile=AB_PROFILE,
                config_json=json.dumps(
                    {
                        "ab": dataclasses.asdict(o.options) | {"log_dir": str(o.options.log_dir)},
                        "base": o.base.study.config.model_dump(mode="json"),
                        "change": o.change.study.config.model_dump(mode="json"),
                    }
                ),
                server_cpus=o.server_cpus,
                generator_cpus=o.generator_cpus,
            )
        )
        base_id = _side(store, run_id, o.base, o, 0)
        change_id = _side(store, run_id, o.change, o, 1)
        est = o.judged
        store.add_ab_comparison(
            AbComparison(
                id=None,
                run_id=run_id,
                base_cell_id=base_id,
                change_cell_id=change_id,
                ratio=est.ratio if est else None,
                ci_low=est.low if est else None,
                ci_high=est.high if est else None,
                level=o.options.level,
                ci_width_asked=o.options.ci_width,
                verdict=verdict,
                stopped=o.stopped,
                rounds=o.rounds,
                rounds_kept=kept_rounds(o.pairs),
                elapsed_s=o.elapsed_s,
                summary_json=json.dumps(doc, default=str),
            )
        )
        status = RunStatus.INTERRUPTED if o.stopped == "interrupted" else RunStatus.COMPLETED
        store.update_run(run_id, status=status, finished_at=utcnow())
    return run_id
