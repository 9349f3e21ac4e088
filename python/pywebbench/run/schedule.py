"""The scheduler of a study: which cells run together, in which rounds, and for how long.

Pure rules over a cell's :class:`CellProgress`; nothing here starts a server or writes a row.

- **Groups** (:func:`groups_of`): cells that share server processes, one cell each
  (``server_scope = "cell"``) or all cells of a stack variant with one bind and protocol
  (``"stack"``).
- **Rounds** (:func:`run_rounds`): round r runs replicate r of every group before any group
  gets replicate r+1, so a cell's replicates are spread over the study's whole time and its
  confidence interval takes in the machine's drift over that time (run one group to the end,
  then the next, and drift between groups shows up as a difference between stacks that no
  interval covers). Odd rounds visit the groups in reverse order, so no group is always
  measured first or last; within a group the cells' order rotates from round to round, so no
  workload is always the first one a fresh server serves (:func:`round_groups`).
- **Replicate budget** (:func:`wants_another_replicate`): the planned replicates, then more
  while the CI of the cell's median is wider than ``ci_target``, up to ``max_replicates``.
- **Resume** (:func:`done_keys`, :meth:`CellProgress.resumed`): cells stored ``ok`` or
  ``failed`` are done; the others go on from the replicates they have.
- **Failures** (:func:`assign_failure`, :func:`lost_outcome`): a failed replicate ends its
  cell; a server that fails to start ends every cell of its group.

An executor (:mod:`pywebbench.run.executor`) runs one round's groups and hands back one
:class:`CellOutcome` per cell; :func:`run_rounds` applies them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pywebbench.analysis.modes import levels_disagree, replicate_figures
from pywebbench.analysis.stats import summarize_replicates
from pywebbench.bringup import StackFailure
from pywebbench.faults.outcome import CellRobustness
from pywebbench.run.measure import Interrupted
from pywebbench.store import Cell, CellStatus, Phase, Replicate
from pywebbench.study.config import LoadConfig
from pywebbench.study.matrix import CellPlan

#: The replicate budget (``ci_target``) judges a cell's CI only from this many replicates on.
BUDGET_MIN_REPLICATES = 3


@dataclass
class CellProgress:
    """Where one cell of a study stands while the study runs."""

    cell: CellPlan
    cell_id: int
    ok: int  # replicates completed (this run and before a --resume)
    next_rep: int  # number of the next replicate
    failure: StackFailure | None = None  # what ended the cell (it then gets no more)
    robustness: CellRobustness | None = None  # its last fault phase (docs/faults.md)
    #: An interleaved group's figures for the cell (run/interleaved.py), None: none.
    group: dict[str, Any] | None = None

    @classmethod
    def resumed(cls, cell: CellPlan, cell_id: int, stored: Sequence[Replicate]) -> CellProgress:
        """The progress of a cell whose replicates ``stored`` are in the store (none: new)."""
        ok, next_rep = replicate_count(stored)
        return cls(cell=cell, cell_id=cell_id, ok=ok, next_rep=next_rep)

    def outcome(self) -> CellOutcome:
        """Its progress, as an executor hands it back."""
        return CellOutcome(self.ok, self.next_rep, self.failure, self.robustness, self.group)

    def apply(self, outcome: CellOutcome) -> None:
        """Take in what a round did to this cell."""
        self.ok, self.next_rep = outcome.ok, outcome.next_rep
        if outcome.failure is not None:
            self.failure = outcome.failure
        if outcome.robustness is not None:
            self.robustness = outcome.robustness
        if outcome.group is not None:
            self.group = outcome.group


@dataclass(frozen=True)
class CellOutcome:
    """A cell after a round: replicates completed, the next one's number, what ended it
    (None: nothing), the robustness of its fault phase (None: none this round), and its
    interleaved group's figures (None: not measured in one)."""

    ok: int
    next_rep: int
    failure: StackFailure | None = None
    robustness: CellRobustness | None = None
    group: dict[str, Any] | None = None


def replicate_count(stored: Sequence[Replicate]) -> tuple[int, int]:
    """(replicates completed ``ok``, number of the next replicate) of a cell's stored ones."""
    ok = sum(1 for r in stored if r.status == CellStatus.OK)
    return ok, max((r.replicate for r in stored), default=-1) + 1


def done_keys(cells: Iterable[Cell]) -> set[str]:
    """The keys of the cells a resumed run does not run again (stored ``ok`` or ``failed``)."""
    return {c.key for c in cells if c.status in (CellStatus.OK, CellStatus.FAILED)}


def groups_of(cells: Sequence[CellPlan], server_scope: str) -> list[list[CellPlan]]:
    """Cells that share server processes: one cell each (``server_scope = "cell"``), or all
    cells of a stack variant with one bind and one protocol (``"stack"``: one server per
    replicate serves them), in the matrix's order."""
    if server_scope == "cell":
        return [[c] for c in cells]
    groups: dict[tuple[str, str, str], list[CellPlan]] = {}
    for c in cells:
        groups.setdefault((c.variant.key, c.bind, c.protocol), []).append(c)
    return list(groups.values())


def most_rounds(load: LoadConfig) -> int:
    """The most rounds a study can take: its replicates, or the budget's most (the budget
    may add replicates to a cell whose replicates settle at different levels, so it is
    open even without ``ci_target``)."""
    return max(load.replicates_for(False), load.replicates_for(True), load.max_replicates)


def wants_another_replicate(
    ok: int,
    load: LoadConfig,
    replicate_rps: Callable[[], Sequence[Sequence[float]]],
    *,
    jit: bool = False,
) -> bool:
    """Another replicate for a cell with ``ok`` completed ones? The planned ones, then more,
    up to ``max_replicates``, while its replicates settle at different levels
    (:func:`pywebbench.analysis.modes.levels_disagree`: modes, not noise, issue 21) or (replicate
    budget) while the 95% CI of its median req/s is wider than ``ci_target``.
    ``replicate_rps()`` gives the measured req/s of each completed replicate
    (:func:`~pywebbench.run.rows.replicate_rps`); it is asked only when the budget needs it.

    The budget judges a CI only from :data:`BUDGET_MIN_REPLICATES` on: 2 values that happen
    to agree give a narrow interval by luck, and stopping on it would leave the cells that
    stopped early with intervals that cover less than they claim."""
    if ok < load.replicates_for(jit):  # the planned ones (``jit``: on a JIT interpreter)
        return True
    if ok >= load.max_replicates:
        return False
    if load.ci_target is not None and ok < BUDGET_MIN_REPLICATES:
        return True  # the budget judges no interval from fewer (docstring)
    rps = replicate_rps()
    if levels_disagree(replicate_figures(rps)):
        return True
    if load.ci_target is None:
        return False
    width = summarize_replicates(rps).ci_halfwidth_rel
    return math.isnan(width) or width > load.ci_target  # NaN: too few values for a CI


def round_groups(
    opened: Sequence[Sequence[CellProgress]],
    round_no: int,
    wants_more: Callable[[CellProgress], bool],
) -> list[list[CellProgress]]:
    """The groups of round ``round_no`` in the order they run (odd rounds reversed), each
    with its cells that still want a replicate, rotated by the round's number."""
    order = opened if round_no % 2 == 0 else opened[::-1]
    batch = []
    for group in order:
        active = [p for p in group if p.failure is None and wants_more(p)]
        if not active:
            continue
        shift = round_no % len(active)
        batch.append(active[shift:] + active[:shift])
    return batch


def assign_failure(group: Sequence[CellProgress], failed: CellProgress, exc: StackFailure) -> None:
    """``failed``'s replicate failed with ``exc``: that ends the cell; a server that failed
    to start (the same stack would fail again) also ends every other cell of the group."""
    failed.failure = exc
    if exc.phase == Phase.START:
        for other in group:
            if other.failure is None:
                other.failure = exc


def lost_outcome(
    progress: CellProgress, stored: Sequence[Replicate], reason: str, detail: str
) -> CellOutcome:
    """A cell of a group whose round ended without an outcome (its worker or node died), from
    its replicates ``stored`` as they were when that was found out: the replicate it was
    measuring (``running``) is failed, and so is the cell unless its replicate of the round
    had completed ``ok`` (what was stored before stays)."""
    running = any(r.status == CellStatus.RUNNING for r in stored)
    ok = sum(1 for r in stored if r.status == CellStatus.OK)
    next_rep = max((r.replicate for r in stored), default=progress.next_rep - 1) + 1
    this_round = [r for r in stored if r.replicate >= progress.next_rep]
    if any(r.status == CellStatus.OK for r in this_round):
        return CellOutcome(ok, next_rep)
    phase = Phase.MEASURE if running else Phase.START
    return CellOutcome(ok, next_rep, StackFailure(phase, reason, detail))


def run_rounds(
    opened: Sequence[Sequence[CellProgress]],
    *,
    rounds: int,
    run_round: Callable[[list[list[CellProgress]]], Sequence[Sequence[CellOutcome]]],
    wants_more: Callable[[CellProgress], bool],
    finish: Callable[[CellProgress], None],
    interrupted: Callable[[Sequence[CellProgress]], None],
) -> None:
    """Run the groups ``opened`` round by round (see the module doc) through ``run_round``;
    each cell is ``finish``ed as soon as it needs no more replicates (or failed). On
    Ctrl-C (:class:`KeyboardInterrupt`, or :class:`~pywebbench.run.measure.Interrupted` from
    ``run_round``), the cells not finished are handed to ``interrupted`` and it goes on."""
    pending = [p for group in opened for p in group]
    try:
        for round_no in range(rounds):
            batch = round_groups(opened, round_no, wants_more)
            if not batch:  # no cell wants another replicate: the study is done
                break
            outcomes = run_round(batch)
            for group, results in zip(batch, outcomes, strict=True):
                for progress, outcome in zip(group, results, strict=True):
                    progress.apply(outcome)
            for p in [p for p in pending if p.failure or not wants_more(p)]:
                finish(p)
                pending.remove(p)
    except (KeyboardInterrupt, Interrupted):
        interrupted(pending)
        raise
    for p in pending:
        finish(p)
