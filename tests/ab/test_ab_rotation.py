"""``ab`` as a group of two sides (docs/ab.md#the-method): its servers brought up by a
fake bring-up and measured on synthetic slices (tests/fake_bench.py), so the session's
own logic is tested deterministically and without a server: the sides alternate in the
engine's targets, each process's warm-up is judged against the round and its warm-up
slices are left out of the pairs and stored as such, the run stops once every process is
warm and the interval is narrow, and a memory budget stops a process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_bench import FakeAgent, SlicedModel, Timeline, fake_bench
from pwbtest import planned
from pywebbench.ab.render import to_doc, to_table
from pywebbench.ab.session import STOPPED_BUDGET, STOPPED_CI, AbOptions, AbOutcome, run_ab
from pywebbench.ab.sides import Side, SideStudy
from pywebbench.ab.storing import store_outcome
from pywebbench.store import Store
from pywebbench.study.config import resolve

#: BASE's four processes 1% apart, CHANGE 5% faster: the engine's targets alternate
#: (BASE 1, CHANGE 1, BASE 2, ...).
LEVELS = [1000.0, 1050.0, 1010.0, 1060.5, 990.0, 1039.5, 1005.0, 1055.25]


def _sides() -> tuple[SideStudy, SideStudy]:
    config = resolve(
        None,
        {"matrix": {"interpreters": ["cpython3.11"], "servers": ["gunicorn-gthread"],
                    "frameworks": ["raw-wsgi"], "workloads": ["hello"]},
         "load": {"connections": [64], "model": "closed"}},
        profile="quick",
    )  # fmt: skip
    (cell,) = planned(config).cells
    return (
        SideStudy(Side("--base", "a", {}), config, cell),
        SideStudy(Side("--change", "b", {}), config, cell),
    )


def _ab(tmp_path: Path, model: SlicedModel, **options: Any) -> tuple[AbOutcome, Timeline]:
    fake = fake_bench()
    base, change = _sides()
    defaults: dict[str, Any] = {
        "core_speed": False, "budget_s": 600.0, "log_dir": tmp_path, "ci_width": 0.03,
    }  # fmt: skip
    outcome = run_ab(
        base,
        change,
        AbOptions(**(defaults | options)),
        agent=FakeAgent(fake.timeline, sliced=model),
        steps=fake.seams.bringup,
        cpu_accounting=lambda cores, pids: None,
    )
    return outcome, fake.timeline


def test_ab_reads_a_5_percent_change_through_a_host_that_moves_30_percent_a_round(
    tmp_path: Path,
) -> None:
    """The rounds take the host's speed out: the interval holds 1.05 and not 1, and the run
    stops once it is within +-3%, every process warm from the first round judged."""
    outcome, timeline = _ab(tmp_path, SlicedModel(LEVELS, seed=11))
    est = outcome.rps
    assert est is not None and est.low < 1.05 < est.high and est.low > 1.0
    assert outcome.stopped == STOPPED_CI and outcome.result.stopped_early
    (sliced,) = [e for e in timeline.entries if e["entry"] == "sliced"]
    assert len(sliced["targets"]) == 8
    starts = [e for e in timeline.entries if e["entry"] == "start"]
    assert len(starts) == 8 and [e["stack"] for e in starts] == [starts[0]["stack"]] * 8
    assert outcome.base.starts == [1, 1, 1, 1] == outcome.change.starts  # round 0 skipped
    assert all(p.round >= 1 for p in outcome.pairs)
    assert not any(outcome.base.unsettled + outcome.change.unsettled)


def test_a_process_still_warming_is_left_out_until_its_share_settles(tmp_path: Path) -> None:
    """CHANGE's second process climbs from 60% of its level over 15 rounds: its slices count
    from the round it settled (12 or later), none of its climbing rounds is paired, the run
    waits for it, and its warm-up slices are stored as warm-up."""
    outcome, _ = _ab(tmp_path, SlicedModel(LEVELS, warming={3: 15}, seed=7))
    start = outcome.change.starts[1]
    assert start is not None and start >= 12
    assert not [p for p in outcome.pairs if p.process == 1 and p.round < start]
    assert max(p.round for p in outcome.pairs) >= start + 7  # 8 measured rounds of it
    est = outcome.rps
    assert est is not None and est.low < 1.05 < est.high
    assert "CHANGE process 2" not in "\n".join(to_table(outcome, "faster", []).splitlines())
    doc = to_doc(outcome, "faster", [])
    assert doc["warmup"]["change"]["warm_from"][1] == start
    run_id = store_outcome(outcome, "faster", [], tmp_path)
    with Store(tmp_path / "pywebbench.sqlite", create=False) as store:
        study = store.load_study([run_id])
        change = next(c for c in study.cells if "[change]" in c.key)
        warmup = [it.idx for it in study.iterations_of(change.id, "warmup") if it.replicate == 1]
    assert warmup == list(range(start))


def test_a_process_that_never_settles_is_named_and_measured_on_its_last_half(
    tmp_path: Path,
) -> None:
    """BASE's first process climbs 1.3% a round for longer than the budget's rounds: the
    run ends on the budget, and the output names it."""
    outcome, _ = _ab(tmp_path, SlicedModel(LEVELS, warming={0: 30}, seed=3), budget_s=150.0)
    assert outcome.stopped == STOPPED_BUDGET
    assert outcome.base.unsettled[0] and not any(outcome.change.unsettled)
    table = to_table(outcome, "no change", [])
    assert "BASE process 1: never settled" in table
