"""A study's traffic mix is kept with its run (docs/mix.md): ``run`` reads the mix file once,
when it starts, into the stored configuration (``app.mix_entries``), and ``--resume``
measures the cells still to do with those requests, saying in one line when the file changed
since. Nothing here starts a server or builds a venv (``--interface wsgi`` skips the
detection; the study that runs has a fake bring-up and load, tests/fake_bench.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_bench import FakeAgent, fake_bench
from pwbmix import CPYTHON, project
from pwbtest import planned
from pywebbench.catalogue.mix import load_mix
from pywebbench.commands.run import command
from pywebbench.run.rows import run_row
from pywebbench.run.runner import run_study
from pywebbench.store import RunStatus, Store, new_run_id
from pywebbench.study.config import ConfigError, StudyConfig, resolve
from pywebbench.study.matrix import keep_mix, resumed_mix_note

#: The mix file edited after the run started: another path, another weight, one request more.
EDITED = """
[[request]]
name = "GET /other"
weight = 1
path = "/other"

[[request]]
name = "GET /"
weight = 3
path = "/"
"""


def _study(folder: Path, mix_file: Path) -> dict[str, Any]:
    return {
        "matrix": {"interpreters": [CPYTHON], "servers": ["gunicorn-sync"]},
        "load": {"connections": [4], "replicates": 1, "warmup": "fixed",
                 "warmup_iterations": 0, "duration_s": 0.5},
        "cpus": {"server": [0], "generator": [1]},
        "app": {"app": "mixapp:app", "interface": "wsgi", "project": str(folder),
                "mix": str(mix_file)},
        "report": False,
    }  # fmt: skip


def _stored(config: StudyConfig) -> StudyConfig:
    """The configuration as ``--resume`` reads it back from the store."""
    return StudyConfig.model_validate(json.loads(json.dumps(config.model_dump(mode="json"))))


def test_the_requests_read_when_the_run_starts_are_the_mix_of_a_resumed_run(
    tmp_path: Path,
) -> None:
    folder, mix_file = project(tmp_path)
    started = load_mix(mix_file)
    config = resolve(_study(folder, mix_file))
    assert config.app is not None and config.app.mix_entries is None
    keep_mix(config)
    assert config.app.mix_entries == [e.model_dump(mode="json") for e in started]
    again = _stored(config)
    assert resumed_mix_note(again) is None  # the file as the run started
    mix_file.write_text(EDITED)
    (cell,) = planned(again).cells
    assert list(getattr(cell.workload, "mix", ())) == started
    spec = cell.load_spec("http://127.0.0.1:9", again.load, [1], duration_s=1.0)
    assert spec.mix == started and spec.mix[3].body == b"q=x"
    assert resumed_mix_note(again) == (
        f"{mix_file} changed since the run started: the cells still to measure keep "
        "the mix the run started with (5 requests over 4 endpoints)"
    )
    mix_file.unlink()
    assert resumed_mix_note(again) == (
        f"{mix_file} cannot be read now: the cells still to measure keep the mix the "
        "run started with (5 requests over 4 endpoints)"
    )
    (cell,) = planned(again).cells  # the file gone: the kept requests still plan the cells
    assert list(getattr(cell.workload, "mix", ())) == started


def test_a_run_stored_before_the_mix_was_kept_reads_the_file_again(tmp_path: Path) -> None:
    folder, mix_file = project(tmp_path)
    old = resolve(_study(folder, mix_file))  # no keep_mix: as an earlier pywebbench stored it
    mix_file.write_text(EDITED)
    (cell,) = planned(_stored(old)).cells
    assert [e.name for e in getattr(cell.workload, "mix", ())] == ["GET /other", "GET /"]
    assert resumed_mix_note(_stored(old)) == (
        f"{mix_file}: this run kept no copy of its mix (stored by an earlier pywebbench); "
        "the cells still to measure use the file as it is now"
    )


def test_the_kept_requests_are_not_a_key_of_a_study_file(tmp_path: Path) -> None:
    folder, mix_file = project(tmp_path)
    study = _study(folder, mix_file)
    study["app"]["mix_entries"] = [{"name": "GET /", "path": "/"}]
    with pytest.raises(ConfigError) as caught:
        resolve(study, source="pywebbench.toml")
    assert str(caught.value) == (
        "pywebbench.toml: app.mix_entries: written by `run` when a study starts (the requests "
        "of app.mix, kept for --resume); give app.mix"
    )
    with pytest.raises(ValueError, match=r"request 1: weight: Input should be a valid number"):
        StudyConfig.model_validate(
            {"app": {"app": "a:b", "mix": "m.toml", "mix_entries": [{"name": "x", "weight": "?"}]}}
        )
    with pytest.raises(ValueError, match="mix_entries are the requests of app.mix"):
        StudyConfig.model_validate({"app": {"app": "a:b", "mix_entries": [{"name": "x"}]}})


def _interrupted_run(store: Store, config: StudyConfig) -> str:
    """A run of ``config`` that started and measured nothing (as Ctrl-C leaves one)."""
    run_id = new_run_id()
    store.create_run(
        run_row(
            run_id,
            profile=config.profile,
            config_json=json.dumps(config.model_dump(mode="json")),
            server_cpus=[0],
            generator_cpus=[1],
        )
    )
    store.update_run(run_id, status=RunStatus.INTERRUPTED)
    return run_id


def test_a_resumed_study_loads_the_mix_it_started_with(tmp_path: Path) -> None:
    """The loads of the cells a resumed run measures draw from the kept requests, though the
    file was edited in between (a fake bench: no server, no load)."""
    folder, mix_file = project(tmp_path)
    config = resolve(_study(folder, mix_file))
    keep_mix(config)
    assert config.app is not None
    kept = config.app.mix_entries
    bench = fake_bench()
    timeline = bench.timeline
    with Store(tmp_path / "s.sqlite") as store:
        run_id = _interrupted_run(store, config)
        mix_file.write_text(EDITED)
        run = store.run(run_id)
        assert run is not None
        resumed = StudyConfig.model_validate(run.config)
        outcome = run_study(
            resumed, planned(resumed), store, results_dir=tmp_path, agent=FakeAgent(timeline),
            run_id=run_id, executor=bench.executor(),
        )  # fmt: skip
    assert outcome.status == RunStatus.COMPLETED and outcome.cells_ok == 1
    loads = [e["spec"] for e in timeline.entries if e["entry"] == "load"]
    assert loads and all(spec["mix"] == kept for spec in loads)


def test_resume_says_in_one_line_that_the_file_changed(tmp_path: Path) -> None:
    """``run --resume`` of a run whose mix file was edited since: one line saying so, and the
    run goes on (``--dry-run``: the matrix only)."""
    folder, mix_file = project(tmp_path)
    config = resolve(_study(folder, mix_file))
    keep_mix(config)
    results = tmp_path / "res"
    results.mkdir()
    with Store(results / "pywebbench.sqlite") as store:
        run_id = _interrupted_run(store, config)
    mix_file.write_text(EDITED)
    res = CliRunner().invoke(command, ["--resume", run_id, "--results-dir", str(results),
                                       "--dry-run"])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())  # the console's lines, unwrapped
    assert f"resuming run {run_id} (interrupted)" in said
    assert (
        f"mix {mix_file} changed since the run started: the cells still to measure keep "
        "the mix the run started with (5 requests over 4 endpoints)"
    ) in said
    assert "mix:mix.toml c4" in said


def test_a_bad_mix_file_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    """The file is read once, up front: a bad entry is one line and exit status 2, nothing
    written."""
    folder, mix_file = project(tmp_path)
    mix_file.write_text('[[request]]\nname = "a"\nweight = 0\npath = "/"\n')
    results = tmp_path / "res"
    args = ["--app", "mixapp:app", "--interface", "wsgi", "--project", str(folder),
            "--mix", str(mix_file), "--python", CPYTHON, "--results-dir", str(results),
            "--dry-run"]  # fmt: skip
    res = CliRunner().invoke(command, args)
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines() == [
        f'error: app: --mix: {mix_file}: request 1 ("a"): weight: must be > 0, got 0'
    ]
    assert not results.exists()
