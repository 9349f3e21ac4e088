"""``pywebbench run --runs N`` (issue 65, docs/pooling.md): the study N times, each its own
run with its own rotation seed, and a report that pools them. The world is the fake bench's
(no server; each group's slices are a seeded :class:`~fake_bench.SlicedModel`'s), so the
whole command runs in seconds."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_bench import FakeAgent, SlicedModel, fake_bench
from pywebbench.commands.run import command, run_seeds
from pywebbench.store import Store

STUDY = """
report = true
[matrix]
interpreters = ["cpython3.11"]
servers = ["gunicorn-gthread", "waitress"]
frameworks = ["raw-wsgi"]
workloads = ["hello"]
[load]
design = "interleaved"
replicates = 2
connections = [16]
[cpus]
server = [0]
generator = [1]
"""


@pytest.fixture
def faked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``run`` on the fake bench: each run's agent serves slices of waitress 1.5x
    gunicorn-gthread's, with noise seeded by the run's number; returns the runs' numbers."""
    bench = fake_bench()
    agents: list[int] = []

    @contextlib.contextmanager
    def agent(load_agents: int, ray_address: str | None) -> Iterator[Any]:
        agents.append(len(agents))
        # the processes of the 2 stacks, in turn; a stack's processes alike (processes that
        # disagree would make the group add processes, which this model has no level for)
        levels = [1000.0, 1500.0, 1000.0, 1500.0]
        yield FakeAgent(bench.timeline, sliced=SlicedModel(levels, seed=len(agents)))

    monkeypatch.setattr("pywebbench.run.executor.open_executor", lambda load: bench.executor())
    monkeypatch.setattr("pywebbench.run.ray_load.study_agent", agent)
    monkeypatch.setattr("pywebbench.run.preflight.study_preflight", lambda *a, **k: [])
    return agents


def test_runs_stores_each_run_with_its_own_seed_and_the_report_pools_them(
    tmp_path: Path, faked: list[int]
) -> None:
    (tmp_path / "study.toml").write_text(STUDY)
    results = tmp_path / "res"
    args = ["--config", str(tmp_path / "study.toml"), "--results-dir", str(results)]
    res = CliRunner().invoke(command, [*args, "--runs", "3", "--seed", "7"])
    assert res.exit_code == 0, res.output
    assert faked == [0, 1, 2]  # a load agent (and fresh servers) per run
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study([r.id for r in store.runs()])
    runs = sorted(study.runs, key=lambda r: r.created_at)
    assert len(runs) == 3
    assert [r.config["load"]["seed"] for r in runs] == [7, 8, 9]
    rotation = {c.flags["group"]["seed"] for c in study.cells}
    assert len(rotation) == 3  # each run's groups rotate in their own order
    assert "run 3 of 3 (rotation seed 9)" in res.output
    last = sorted((results / "reports").glob("report-*+2.md"))
    assert len(last) == 1  # the third run's report covers all three
    md = last[0].read_text()
    assert "## Across runs" in md and "3 runs from 1 host(s)" in md
    row = "| hello | c16 | cpython3.11 · waitress · raw-wsgi |"
    waitress = next(line for line in md.splitlines() if line.startswith(row))
    cells = [c.strip() for c in waitress.strip("|").split("|")]
    assert cells[3] == "geometric mean of 2" and cells[7] == "3"  # pooled over 3 runs
    assert cells[4].startswith("1.22")  # sqrt(1500 / 1000) = 1.2247 over the geomean
    first = sorted((results / "reports").glob("report-*.md"))
    assert len(first) == 3
    one = next(p for p in first if "+" not in p.name).read_text()
    assert "within-run only" in one  # the first run's report: one run


def test_a_run_ends_by_comparing_with_the_published_table(
    tmp_path: Path, faked: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No records: one line saying there is no table yet. Three runs exported as reference
    records (with the pywebbench commit that ran them): the next run's 2 ratios are held
    against the table pooled from them (docs/reference-table.md)."""
    from pywebbench.cli import cli

    records = tmp_path / "reference" / "runs"
    monkeypatch.setattr("pywebbench.reference.check.RECORDS", records)
    (tmp_path / "study.toml").write_text(STUDY)
    results = tmp_path / "res"
    args = ["--config", str(tmp_path / "study.toml"), "--results-dir", str(results)]
    res = CliRunner().invoke(command, [*args, "--runs", "3", "--seed", "7"])
    assert res.exit_code == 0, res.output
    none = "No published table yet to compare with: reference/runs holds 0 comparable run(s)"
    assert res.output.count(none) == 3
    store = ["--results-dir", str(results)]
    with Store(results / "pywebbench.sqlite", create=False) as db:
        ids = [r.id for r in db.runs()]
    out = CliRunner().invoke(cli, ["export", *ids, *store, "--format", "reference", "-o",
                                   str(records)])  # fmt: skip
    assert out.exit_code == 0, out.output
    doc = json.loads((records / f"{ids[0]}.json").read_text())
    assert doc["run"]["seed"] in (7, 8, 9) and len(doc["run"]["commit"]["revision"]) == 40
    res = CliRunner().invoke(command, [*args, "--seed", "11"])
    assert res.exit_code == 0, res.output
    head = "Against the published table (docs/reference-table.md: 3 runs, 1 machine(s), "
    said = next(line for line in res.output.splitlines() if line.startswith(head))
    assert said.startswith(head + "provisional): ")
    assert " of 2 ratios fall inside its 95% prediction intervals." in said


def test_runs_and_resume_do_not_go_together(tmp_path: Path) -> None:
    res = CliRunner().invoke(command, ["--resume", "--runs", "2", "--results-dir", str(tmp_path)])
    assert res.exit_code == 2
    assert "--resume continues one run; --runs starts new ones" in res.output


def test_each_run_gets_its_own_seed() -> None:
    assert run_seeds(7, 3) == [7, 8, 9]
    assert run_seeds(2**32 - 1, 2) == [2**32 - 1, 0]
    drawn = run_seeds(None, 6)
    assert len(set(drawn)) == 6 and all(0 <= s < 2**32 for s in drawn)
    json.dumps(drawn)  # stored with the run's config
