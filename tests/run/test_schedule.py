"""The scheduler's rules (run/schedule.py), with a fake executor: no server, no load, no Ray.

Groups, rounds (odd rounds reversed, cells rotated), the replicate budget, resume and failure
assignment, each on its own; then the runner driving a fake executor through a Ctrl-C and a
``--resume``. The whole file runs in well under a second.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pwbtest import planned
from pywebbench.bringup import StackFailure
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.run.bench import StudyContext
from pywebbench.run.runner import run_study
from pywebbench.run.schedule import (
    BUDGET_MIN_REPLICATES,
    CellOutcome,
    CellProgress,
    assign_failure,
    done_keys,
    groups_of,
    lost_outcome,
    most_rounds,
    round_groups,
    run_rounds,
    wants_another_replicate,
)
from pywebbench.store import Cell, CellStatus, Phase, Replicate, RunStatus, Store, utcnow
from pywebbench.study.config import LoadConfig, StudyConfig, resolve
from pywebbench.study.matrix import CellPlan

CPYTHON = default_interpreters()[0].name


def _config(**load: Any) -> StudyConfig:
    """Two stacks x two workloads x two binds: 8 cells, measured one after another unless
    ``design="interleaved"`` is given."""
    return resolve(
        {
            "matrix": {
                "interpreters": [CPYTHON],
                "servers": ["gunicorn-gthread", "waitress"],
                "frameworks": ["raw-wsgi"],
                "workloads": ["hello", "cpu"],
            },
            "load": {"bind": ["tcp", "unix"], "design": "sequential", **load},
            "cpus": {"server": [0], "generator": [1]},
            "report": False,
        }
    )


@pytest.fixture(scope="module")
def cells() -> list[CellPlan]:
    return planned(_config()).cells


def _progress(cells: Sequence[CellPlan]) -> list[CellProgress]:
    return [CellProgress(cell=c, cell_id=i + 1, ok=0, next_rep=0) for i, c in enumerate(cells)]


def _rep(number: int, status: str) -> Replicate:
    return Replicate(None, 1, number, status, utcnow())


# -- groups -------------------------------------------------------------------------------


def test_a_cell_is_its_own_group_under_cell_scope(cells: list[CellPlan]) -> None:
    assert groups_of(cells, "cell") == [[c] for c in cells]


def test_a_stack_variant_with_one_bind_is_one_group_under_stack_scope(
    cells: list[CellPlan],
) -> None:
    groups = groups_of(cells, "stack")
    assert len(groups) == 4  # 2 stacks x 2 binds
    assert sorted(c.key for g in groups for c in g) == sorted(c.key for c in cells)
    for group in groups:
        assert len({(c.variant.key, c.bind) for c in group}) == 1
        assert sorted(c.workload.name for c in group) == ["cpu", "hello"]


# -- rounds ---------------------------------------------------------------------------------


def test_odd_rounds_visit_the_groups_in_reverse_and_rotate_their_cells(
    cells: list[CellPlan],
) -> None:
    opened = [_progress(g) for g in groups_of(cells, "stack")]
    firsts = [g[0].cell.key for g in opened]
    for round_no in range(4):
        batch = round_groups(opened, round_no, lambda p: True)
        order = [g[0].cell.variant.key + g[0].cell.bind for g in batch]
        expected = opened if round_no % 2 == 0 else opened[::-1]
        assert order == [g[0].cell.variant.key + g[0].cell.bind for g in expected]
        heads = {g[0].cell.key for g in batch}
        assert (heads == set(firsts)) == (round_no % 2 == 0)  # two cells a group: rotated


def test_a_round_leaves_out_failed_cells_and_cells_that_want_no_more(
    cells: list[CellPlan],
) -> None:
    opened = [_progress(g) for g in groups_of(cells, "stack")]
    opened[0][0].failure = StackFailure(Phase.VERIFY, "bad answer")
    done = opened[1][1].cell.key
    batch = round_groups(opened, 0, lambda p: p.cell.key != done)
    keys = {p.cell.key for g in batch for p in g}
    assert opened[0][0].cell.key not in keys and done not in keys
    assert len(keys) == len(cells) - 2


@dataclass
class FakeExecutor:
    """Runs a round by counting a replicate for each cell; ``fail`` maps a cell key to the
    failure of its replicate in round ``at``; ``stop_at``: Ctrl-C in that round. With a
    store (``prepared``), each replicate is stored as the bench would store it."""

    fail: dict[str, tuple[int, StackFailure]] = field(default_factory=dict)
    stop_at: int | None = None
    rounds: list[list[list[str]]] = field(default_factory=list)
    groups: list[list[list[str]]] = field(default_factory=list)
    study: StudyContext | None = None
    name: str = "fake"
    parallel: bool = True
    loaded_s: float = 0.0

    @contextmanager
    def prepared(self, study: StudyContext) -> Iterator[None]:
        self.study = study
        yield

    def run_round(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        round_no = len(self.rounds)
        if round_no == self.stop_at:
            raise KeyboardInterrupt
        self.rounds.append([[p.cell.key for p in g] for g in groups])
        out = []
        for group in groups:
            outcomes = []
            for p in group:
                at, failure = self.fail.get(p.cell.key, (-1, None))
                failed = failure if at == round_no else None
                if self.study is not None:
                    status = CellStatus.FAILED if failed else CellStatus.OK
                    self.study.store.add_replicate(
                        Replicate(None, p.cell_id, p.next_rep, status, utcnow())
                    )
                ok = p.ok + (0 if failed else 1)
                outcomes.append(CellOutcome(ok, p.next_rep + 1, failed))
            out.append(outcomes)
        self.loaded_s += 1.0
        return out

    def run_groups(self, groups: Sequence[Sequence[CellProgress]]) -> list[list[CellOutcome]]:
        """Each interleaved group whole: ``processes`` replicates a cell, its figures."""
        if self.stop_at == 0:
            raise KeyboardInterrupt
        self.groups.append([[p.cell.key for p in g] for g in groups])
        out = []
        for group in groups:
            outcomes = []
            for p in group:
                assert self.study is not None
                for k in range(3):
                    self.study.store.add_replicate(
                        Replicate(None, p.cell_id, k, CellStatus.OK, utcnow())
                    )
                outcomes.append(CellOutcome(3, 3, None, None, {"rps": 1000.0, "processes": 3}))
            out.append(outcomes)
        self.loaded_s += 1.0
        return out

    def __enter__(self) -> FakeExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _run(
    opened: list[list[CellProgress]], executor: FakeExecutor, load: LoadConfig
) -> tuple[list[CellProgress], list[CellProgress]]:
    finished: list[CellProgress] = []
    stopped: list[CellProgress] = []
    run_rounds(
        opened,
        rounds=most_rounds(load),
        run_round=executor.run_round,
        wants_more=lambda p: wants_another_replicate(p.ok, load, lambda: [[1000.0]] * p.ok),
        finish=finished.append,
        interrupted=stopped.extend,
    )
    return finished, stopped


def test_every_group_gets_replicate_r_before_any_gets_r_plus_1(cells: list[CellPlan]) -> None:
    load = LoadConfig(replicates=3)
    opened = [_progress(g) for g in groups_of(cells, "cell")]
    executor = FakeExecutor()
    finished, stopped = _run(opened, executor, load)
    assert len(executor.rounds) == 3
    for round_no, groups in enumerate(executor.rounds):
        assert len(groups) == len(cells)  # each round: every cell once
        keys = [g[0] for g in groups]
        expected = [c.key for c in cells]
        assert keys == (expected if round_no % 2 == 0 else expected[::-1])
    assert [p.ok for p in finished] == [3] * len(cells) and not stopped


def test_a_failed_replicate_ends_its_cell_and_the_others_go_on(cells: list[CellPlan]) -> None:
    load = LoadConfig(replicates=3)
    opened = [_progress(g) for g in groups_of(cells, "cell")]
    broken = cells[2].key
    executor = FakeExecutor(fail={broken: (1, StackFailure(Phase.MEASURE, "died"))})
    finished, _ = _run(opened, executor, load)
    assert [k for g in executor.rounds[2] for k in g].count(broken) == 0
    by_key = {p.cell.key: p for p in finished}
    assert by_key[broken].failure is not None and by_key[broken].ok == 1
    assert by_key[broken] is finished[0]  # finished right after its round, before the others
    assert all(p.ok == 3 and p.failure is None for k, p in by_key.items() if k != broken)


def test_a_server_that_fails_to_start_fails_every_cell_of_its_group(
    cells: list[CellPlan],
) -> None:
    group = _progress(groups_of(cells, "stack")[0])
    start = StackFailure(Phase.START, "no answer on the port")
    assign_failure(group, group[0], start)
    assert all(p.failure is start for p in group)
    other = _progress(groups_of(cells, "stack")[1])
    verify = StackFailure(Phase.VERIFY, "bad body")
    assign_failure(other, other[1], verify)
    assert other[1].failure is verify and other[0].failure is None


def test_ctrl_c_hands_the_unfinished_cells_over_and_goes_on(cells: list[CellPlan]) -> None:
    finished: list[CellProgress] = []
    stopped: list[CellProgress] = []
    with pytest.raises(KeyboardInterrupt):
        run_rounds(
            [_progress(g) for g in groups_of(cells, "cell")],
            rounds=2,
            run_round=FakeExecutor(stop_at=1).run_round,
            wants_more=lambda p: p.ok < 2,
            finish=finished.append,
            interrupted=stopped.extend,
        )
    assert not finished and len(stopped) == len(cells)


# -- the replicate budget -----------------------------------------------------------------


def test_the_planned_replicates_always_run() -> None:
    load = LoadConfig(replicates=3)
    assert [wants_another_replicate(ok, load, lambda: []) for ok in range(5)] == [
        True,
        True,
        True,
        False,
        False,
    ]
    # the budget stays open up to max_replicates (5) for cells whose replicates settle at
    # different levels (issue 21), even without ci_target
    assert most_rounds(load) == 5


def test_a_jit_interpreters_cells_plan_their_own_replicates() -> None:
    """``jit_replicates`` is a PyPy cell's planned count, and the rounds reach the larger of
    the two; unset, a PyPy cell plans ``replicates``."""
    load = LoadConfig(replicates=2, jit_replicates=4, max_replicates=3)
    assert [wants_another_replicate(ok, load, lambda: [], jit=True) for ok in range(5)] == [
        True, True, True, True, False,
    ]  # fmt: skip
    assert not wants_another_replicate(2, load, lambda: [[1.0], [1.0]])
    assert most_rounds(load) == 4
    unset = LoadConfig(replicates=2, max_replicates=2)
    assert unset.replicates_for(True) == unset.replicates_for(False) == 2
    assert not wants_another_replicate(2, unset, lambda: [[1.0], [1.0]], jit=True)


def test_replicates_that_settle_at_different_levels_get_more_up_to_the_most() -> None:
    load = LoadConfig(replicates=3, max_replicates=5)
    modes = [[2940.0], [1162.0], [3044.0]]  # one process at ~1,160, two at ~3,000
    agree = [[2940.0], [3010.0], [3044.0]]
    assert wants_another_replicate(3, load, lambda: modes)
    assert not wants_another_replicate(3, load, lambda: agree)
    assert not wants_another_replicate(5, load, lambda: modes)  # the most


def test_the_budget_adds_replicates_while_the_interval_is_wide_up_to_its_most() -> None:
    load = LoadConfig(replicates=2, ci_target=0.02, max_replicates=6)
    wide = [[1000.0], [1300.0], [900.0], [1200.0], [1100.0]]
    narrow = [[1000.0], [1001.0], [1000.5]]
    asked: list[int] = []

    def figures(values: list[list[float]]) -> Any:
        def rps() -> list[list[float]]:
            asked.append(len(values))
            return values

        return rps

    assert most_rounds(load) == 6
    assert wants_another_replicate(2, load, figures(wide[:2]))  # below BUDGET_MIN_REPLICATES
    assert asked == []  # not judged from 2 values, not even read
    assert wants_another_replicate(BUDGET_MIN_REPLICATES, load, figures(wide[:3]))
    assert not wants_another_replicate(3, load, figures(narrow))
    assert not wants_another_replicate(6, load, figures(wide))  # max_replicates reached


def test_a_budget_that_cannot_compute_an_interval_asks_for_more() -> None:
    load = LoadConfig(replicates=1, ci_target=0.05, max_replicates=5)
    # three completed replicates but no measured figure yet: no interval (NaN)
    assert wants_another_replicate(3, load, lambda: [])


# -- resume ---------------------------------------------------------------------------------


def test_a_resumed_cell_goes_on_from_its_stored_replicates(cells: list[CellPlan]) -> None:
    stored = [
        _rep(0, CellStatus.OK),
        _rep(1, CellStatus.INTERRUPTED),
        _rep(2, CellStatus.OK),
    ]
    p = CellProgress.resumed(cells[0], 1, stored)
    assert (p.ok, p.next_rep, p.failure) == (2, 3, None)
    fresh = CellProgress.resumed(cells[0], 1, [])
    assert (fresh.ok, fresh.next_rep) == (0, 0)


def test_cells_stored_ok_or_failed_are_done() -> None:
    def row(key: str, status: str) -> Cell:
        return Cell(
            id=None,
            run_id="r",
            stack_id=1,
            key=key,
            ordinal=0,
            workload="hello",
            workload_params_json="{}",
            load_model="closed",
            connections=1,
            rate=None,
            load_point="c1",
            status=status,
        )

    rows = [row("a", "ok"), row("b", "failed"), row("c", "interrupted"), row("d", "running")]
    assert done_keys(rows) == {"a", "b"}


def test_a_lost_task_fails_the_replicate_it_was_measuring(cells: list[CellPlan]) -> None:
    p = CellProgress(cells[0], 1, ok=1, next_rep=1)
    measuring = lost_outcome(p, [_rep(0, "ok"), _rep(1, "running")], "lost on n1", "x")
    assert (measuring.ok, measuring.next_rep) == (1, 2)
    assert measuring.failure is not None and measuring.failure.phase == Phase.MEASURE
    unstarted = lost_outcome(p, [_rep(0, "ok")], "lost on n1", "x")
    assert unstarted.next_rep == 1
    assert unstarted.failure is not None and unstarted.failure.phase == Phase.START
    done = lost_outcome(p, [_rep(0, "ok"), _rep(1, "ok")], "lost on n1", "x")
    assert (done.ok, done.next_rep, done.failure) == (2, 2, None)


def test_the_runner_resumes_an_interrupted_study_without_measuring_twice(
    tmp_path: Path,
) -> None:
    """Ctrl-C in round 2 of 3; ``--resume`` runs only what is missing: each cell's third
    replicate (numbered 2: the interrupted round stored nothing)."""
    config = _config(replicates=3)
    matrix = planned(config)
    with Store(tmp_path / "s.sqlite") as store:
        first = FakeExecutor(stop_at=2)
        outcome = run_study(config, matrix, store, results_dir=tmp_path, executor=first)
        assert outcome.status == RunStatus.INTERRUPTED and outcome.measured_s == 2.0
        assert {c.status for c in store.cells(outcome.run_id)} == {CellStatus.INTERRUPTED}
        again = FakeExecutor()
        resumed = run_study(
            config, matrix, store, results_dir=tmp_path, run_id=outcome.run_id, executor=again
        )
        assert resumed.status == RunStatus.COMPLETED and resumed.cells_ok == len(matrix.cells)
        assert len([r for r in again.rounds if r]) == 1  # then an empty round ends it
        for row in store.cells(outcome.run_id):
            assert row.status == CellStatus.OK and row.id is not None
            assert [r.replicate for r in store.replicates(row.id)] == [0, 1, 2]
        finished = run_study(
            config,
            matrix,
            store,
            results_dir=tmp_path,
            run_id=outcome.run_id,
            executor=FakeExecutor(),
        )
        assert finished.cells_skipped == len(matrix.cells) and finished.cells_ok == 0


def _http1_and_h2c_config() -> StudyConfig:
    """Two stacks (h2c: granian only), two workloads, over HTTP/1.1 and h2c, interleaved."""
    return resolve(
        {
            "matrix": {
                "interpreters": [CPYTHON],
                "servers": ["gunicorn-gthread", "granian-wsgi"],  # h2c: granian only
                "frameworks": ["raw-wsgi"],
                "workloads": ["hello", "cpu"],
            },
            "load": {"protocol": ["http1", "h2c"], "design": "interleaved", "replicates": 2},
            "cpus": {"server": [0], "generator": [1]},
            "report": False,
        }
    )


def test_an_interleaved_study_measures_each_group_once_and_the_rest_cell_by_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HTTP/1.1 cells form interleaved groups (one per workload: both stacks in each);
    cells a group does not hold take the sequential rounds. What keeps a cell out of a group
    is study-wide today (--faults, --slo, ...), so the h2c cells are sent there by hand: the
    runner's mix of both is what is tested. Every cell ends ok, the grouped ones with their
    group's figures in their flags."""
    from pywebbench.run import runner

    real = runner.why_not_interleaved

    def h2c_alone(cell: CellPlan, load: LoadConfig) -> str | None:
        return "test: h2c alone" if cell.protocol == "h2c" else real(cell, load)

    monkeypatch.setattr(runner, "why_not_interleaved", h2c_alone)
    config = _http1_and_h2c_config()
    matrix = planned(config)
    with Store(tmp_path / "s.sqlite") as store:
        executor = FakeExecutor()
        outcome = run_study(config, matrix, store, results_dir=tmp_path, executor=executor)
        assert outcome.status == RunStatus.COMPLETED and outcome.cells_ok == 6
        assert len(executor.groups) == 1  # one call: every group of the study
        (groups,) = executor.groups
        assert sorted(len(g) for g in groups) == [2, 2]
        assert all("h2c" not in key for g in groups for key in g)
        sequential = {key for r in executor.rounds for g in r for key in g}
        assert len(sequential) == 2 and all("h2c" in key for key in sequential)
        rows = store.cells(outcome.run_id)
        grouped = [c for c in rows if "group" in c.flags]
        assert len(grouped) == 4 and all(c.flags["group"]["processes"] == 3 for c in grouped)


@pytest.mark.parametrize(
    ("kind", "sizes", "marked"),
    [
        ("unix", [2, 2, 2, 2], [0, 0, 2, 2]),
        # granian's h2c cells alone: the one stack of the two that serves h2c
        ("h2c", [1, 1, 2, 2], [0, 0, 1, 1]),
    ],
)
def test_unix_and_h2c_cells_are_groups_of_their_own(
    tmp_path: Path, kind: str, sizes: list[int], marked: list[int]
) -> None:
    """Issue 64 item 2: a unix bind and h2c are load points, so such cells make interleaved
    groups of their own beside the TCP / HTTP/1.1 cells' (one per workload and load point),
    none cell by cell."""
    if kind == "unix":
        config = _config(replicates=2, design="interleaved")
    else:
        config = _http1_and_h2c_config()
    matrix = planned(config)
    with Store(tmp_path / "s.sqlite") as store:
        executor = FakeExecutor()
        outcome = run_study(config, matrix, store, results_dir=tmp_path, executor=executor)
        assert outcome.status == RunStatus.COMPLETED and outcome.cells_ok == len(matrix.cells)
        (groups,) = executor.groups
        assert sorted(len(g) for g in groups) == sizes
        assert sorted(sum(kind in key for key in g) for g in groups) == marked
        assert not executor.rounds
        rows = store.cells(outcome.run_id)
        assert all("group" in c.flags for c in rows)


def test_ctrl_c_in_an_interleaved_group_leaves_its_cells_resumable(tmp_path: Path) -> None:
    config = _config(replicates=2, design="interleaved", bind=["tcp"])
    matrix = planned(config)
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(
            config, matrix, store, results_dir=tmp_path, executor=FakeExecutor(stop_at=0)
        )
        assert outcome.status == RunStatus.INTERRUPTED
        assert {c.status for c in store.cells(outcome.run_id)} == {CellStatus.INTERRUPTED}
        again = FakeExecutor()
        resumed = run_study(
            config, matrix, store, results_dir=tmp_path, run_id=outcome.run_id, executor=again
        )
        assert resumed.status == RunStatus.COMPLETED and resumed.cells_ok == 4
        assert len(again.groups) == 1
