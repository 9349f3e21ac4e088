"""Several project directories of one app in one study (``--project`` repeated, or a list in
``[app] project``): one stack per project per server, named after the directory. Nothing here
starts a server or builds a venv (``--interface wsgi`` skips the detection; the study that runs
has a fake bring-up and load, tests/fake_bench.py); about a second in all."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_bench import FakeAgent, fake_bench
from pwbtest import planned
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.commands.run import command
from pywebbench.run.runner import run_study
from pywebbench.store import CellStatus, Store
from pywebbench.study.config import ConfigError, load_toml, resolve
from pywebbench.study.options import overrides

CPYTHON = default_interpreters()[0].name  # the running CPython only: no other is looked for
SERVERS = ["waitress", "gunicorn-sync"]  # WSGI servers of the catalogue


def _projects(root: Path, *names: str) -> list[Path]:
    """Project directories of one app (``web.py`` with ``app``), named ``names`` under root."""
    out = []
    for name in names:
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "web.py").write_text("def app(environ, start_response):\n    return []\n")
        out.append(folder)
    return out


def _study(project: Any) -> dict[str, Any]:
    return {
        "matrix": {"interpreters": [CPYTHON], "servers": SERVERS},
        "load": {"connections": [8]},
        "app": {"app": "web:app", "interface": "wsgi", "paths": ["/", "/x"], "project": project},
    }


def test_two_projects_are_one_stack_each_per_server(tmp_path: Path) -> None:
    v1, v2 = _projects(tmp_path, "v1", "v2")
    matrix = planned(resolve(_study([str(v1), str(v2)])))
    names = [v.name for v in matrix.variants]
    assert names == [
        f"{CPYTHON}/{server}/app-web.app@{tag}" for server in SERVERS for tag in ("v1", "v2")
    ]
    assert len({v.key for v in matrix.variants}) == 4
    by_stack = {v.name: v.stack.framework for v in matrix.variants}
    assert {str(getattr(fw, "project", "")) for fw in by_stack.values()} == {str(v1), str(v2)}
    # everything else is shared: both projects load the same paths
    for variant in matrix.variants:
        assert [c.workload.name for c in matrix.cells_of(variant)] == ["path:/", "path:/x"]
    keys = [c.key for c in matrix.cells]
    assert len(keys) == len(set(keys)) == 8


def test_one_project_keeps_the_name_stored_studies_have(tmp_path: Path) -> None:
    (v1,) = _projects(tmp_path, "v1")
    for project in (str(v1), [str(v1)]):
        matrix = planned(resolve(_study(project)))
        assert {v.stack.framework.name for v in matrix.variants} == {"app-web.app"}
    assert resolve(_study(str(v1))).app is not None
    assert resolve(_study(str(v1))).model_dump(mode="json")["app"]["project"] == str(v1)


def test_the_flag_repeated_is_a_list_and_once_a_string() -> None:
    def project(*args: str) -> Any:
        ctx = command.make_context("run", ["--app", "web:app", *args])
        return overrides(dict(ctx.params))["app"]["project"]

    assert project("--project", "a") == "a"
    assert project("--project", "a", "--project", "b") == ["a", "b"]
    assert project("--project", "a,b") == "a,b"  # a directory name may hold a comma


def test_the_config_file_takes_a_list(tmp_path: Path) -> None:
    _projects(tmp_path, "v1", "v2")
    toml = tmp_path / "pywebbench.toml"
    toml.write_text(
        f'[matrix]\ninterpreters = ["{CPYTHON}"]\nservers = ["waitress"]\n'
        '[app]\napp = "web:app"\ninterface = "wsgi"\n'
        f'project = ["{tmp_path / "v1"}", "{tmp_path / "v2"}"]\n'
    )
    config = resolve(load_toml(toml))
    assert config.app is not None and config.app.projects == [
        str(tmp_path / "v1"),
        str(tmp_path / "v2"),
    ]
    assert [v.stack.framework.name for v in planned(config).variants] == [
        "app-web.app@v1",
        "app-web.app@v2",
    ]
    with pytest.raises(ConfigError, match=r"app\.project: Value error, give at least one"):
        resolve({"app": {"app": "web:app", "project": []}})


def test_two_projects_with_one_directory_name_are_refused(tmp_path: Path) -> None:
    a, b = _projects(tmp_path, "a/app", "b/app")
    with pytest.raises(ConfigError) as err:
        planned(resolve(_study([str(a), str(b)])))
    assert str(err.value) == (
        f"app: --project: two projects named 'app' ({a}, {b}); give them different directory names"
    )
    with pytest.raises(ConfigError, match=r"--project .*/a/app: given twice; for twins"):
        planned(resolve(_study([str(a), str(tmp_path / "a" / ".." / "a" / "app")])))
    with pytest.raises(ConfigError, match=r"--project .*/nope: no such directory"):
        planned(resolve(_study([str(a), str(tmp_path / "nope")])))


def test_cli_duplicate_directory_names_are_one_line_and_exit_2(tmp_path: Path) -> None:
    a, b = _projects(tmp_path, "a/app", "b/app")
    results = tmp_path / "res"
    args = ["--app", "web:app", "--interface", "wsgi", "--project", str(a), "--project", str(b)]
    res = CliRunner().invoke(
        command,
        [*args, "--python", CPYTHON, "--server", "waitress", "--results-dir", str(results)],
    )
    assert res.exit_code == 2, res.output
    assert res.output.strip() == (
        f"error: app: --project: two projects named 'app' ({a}, {b}); give them different "
        "directory names"
    )
    assert not results.exists()  # nothing written


def test_a_study_of_two_projects_stores_each_stack_and_commit(tmp_path: Path) -> None:
    v1, v2 = _projects(tmp_path, "v1", "v2")
    git = ["git", "-C", str(v1), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for args in (["init", "-q"], ["add", "web.py"], ["commit", "-q", "-m", "v1"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=30)
    study = _study([str(v1), str(v2)])
    study["matrix"]["servers"] = ["waitress"]
    study["app"]["paths"] = ["/"]
    study["load"].update(replicates=1, warmup="fixed", warmup_iterations=0, duration_s=0.5)
    config = resolve({**study, "cpus": {"server": [0], "generator": [1]}, "report": False})
    bench = fake_bench()
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(
            config,
            planned(config),
            store,
            results_dir=tmp_path,
            agent=FakeAgent(bench.timeline),
            executor=bench.executor(),
        )
        stacks = {s.id: s.framework for s in store.stacks(outcome.run_id)}
        cells = store.cells(outcome.run_id)
        run = store.run(outcome.run_id)
    assert sorted(stacks.values()) == ["app-web.app@v1", "app-web.app@v2"]
    assert [c.status for c in cells] == [CellStatus.OK, CellStatus.OK]
    assert {stacks[c.stack_id] for c in cells} == set(stacks.values())
    assert run is not None and "app_git" not in run.host
    assert list(run.host["app_git_by_project"]) == [str(v1)]  # v2 is no git checkout
    assert run.host["app_git_by_project"][str(v1)]["dirty"] is False
