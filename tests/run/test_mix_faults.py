"""A traffic mix with the fault phase (``run --app ... --mix m.toml --faults ...``, docs/mix.md
and docs/faults.md): the good clients draw from the mix, the fault clients and the recovery
check aim at the mix's heaviest GET answering 2xx (its URL has no path of its own), the score
counts an expected status as an answer, and a mix without such a GET is refused up front.
Nothing here starts a server (a fake bench, tests/fake_bench.py) or loads one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_bench import FakeAgent, _robustness_run, fake_bench, synthetic_result
from pwbmix import CPYTHON, project
from pwbtest import planned
from pywebbench.catalogue.mix import MixEntry, load_mix
from pywebbench.commands.run import command
from pywebbench.faults import measure_of
from pywebbench.load import LoadSpec
from pywebbench.run.robustness import fault_url
from pywebbench.run.runner import run_study
from pywebbench.store import Store
from pywebbench.study.config import ConfigError, resolve
from pywebbench.study.matrix import keep_mix

#: No "/" among the endpoints; the heaviest GET answering 2xx is /health (30), not the
#: heavier POST (60) or the 404 page (40).
MIX = """
[[request]]
name = "POST /search"
weight = 60
method = "POST"
path = "/search"
body = "q=x"

[[request]]
name = "GET /items/{id}"
weight = 20
path = "/items/1"

[[request]]
name = "GET /health"
weight = 30
path = "/health?deep=1"

[[request]]
name = "GET /missing"
weight = 40
path = "/missing"
expect_status = [404]
"""


def _study(folder: Path, mix_file: Path, faults: str = "churn=2") -> dict[str, Any]:
    return {
        "matrix": {"interpreters": [CPYTHON], "servers": ["gunicorn-sync"]},
        "load": {"connections": [4], "replicates": 1, "warmup": "fixed",
                 "warmup_iterations": 0, "duration_s": 0.5, "faults": faults},
        "cpus": {"server": [0], "generator": [1]},
        "app": {"app": "mixapp:app", "interface": "wsgi", "project": str(folder),
                "mix": str(mix_file)},
        "report": False,
    }  # fmt: skip


def test_the_fault_url_is_the_mix_entry_on_the_cells_host(tmp_path: Path) -> None:
    _, mix_file = project(tmp_path, MIX)
    spec = LoadSpec(url="http://127.0.0.1:8123/", mix=load_mix(mix_file))
    assert fault_url(spec) == "http://127.0.0.1:8123/health?deep=1"
    assert fault_url(LoadSpec(url="http://127.0.0.1:8123/json")) == "http://127.0.0.1:8123/json"
    post = MixEntry(name="POST /x", method="POST", path="/x")
    assert fault_url(LoadSpec(url="http://[::1]:80/", mix=[post])) == "http://[::1]:80/"


def test_an_expected_status_is_a_good_answer_in_the_score() -> None:
    """With a mix, the good clients' answers are the statuses their entries expect (the 404
    page's 404s); a status an entry does not expect is a check_failed error, counted once."""
    mix = [MixEntry(name="GET /", path="/"), MixEntry(name="GET /gone", expect_status=[404])]
    result = synthetic_result(LoadSpec(url="http://127.0.0.1:9/", mix=mix), 0, None)
    doc = result.model_dump(mode="json")
    doc.update(requests=1010, errors=10, status_counts={"200": 900, "404": 100, "500": 10},
               error_classes={"check_failed": {"count": 10, "example": "status 500"}})  # fmt: skip
    m = measure_of(doc)
    assert (m.requests, m.errors) == (1000, 10)
    doc["spec"]["mix"] = []  # the same responses without a mix: only 2xx are answers
    m = measure_of(doc)
    assert (m.requests, m.errors) == (900, 10 + 110)


#: No GET expecting a 2xx: a POST, a HEAD, a 404 page and a GET expected to answer 503.
NO_GET_2XX = """
[[request]]
name = "POST /search"
weight = 60
method = "POST"
path = "/search"

[[request]]
name = "HEAD /items/{id}"
weight = 20
method = "HEAD"
path = "/items/1"

[[request]]
name = "GET /missing"
weight = 40
path = "/missing"
expect_status = [404]

[[request]]
name = "GET /down"
weight = 10
path = "/down"
expect_status = [503]
"""


def test_faults_with_a_mix_without_a_get_answering_2xx_are_refused(tmp_path: Path) -> None:
    """One line naming both flags (``run`` prints it and exits with status 2 before anything
    is written); the same mix without --faults, or a mix with such a GET, is fine."""
    folder, mix_file = project(tmp_path, NO_GET_2XX)
    with pytest.raises(ConfigError) as caught:
        planned(resolve(_study(folder, mix_file)))
    assert str(caught.value) == (
        f"--faults with --mix (load.faults, app.mix): {mix_file} has no GET request expecting "
        "a 2xx, which the fault phase aims its fault clients at and checks the server's "
        "recovery with; add one, or measure the mix in a run without --faults"
    )
    study = _study(folder, mix_file)
    del study["load"]["faults"]
    assert planned(resolve(study)).cells
    mix_file.write_text(MIX)
    assert planned(resolve(_study(folder, mix_file))).cells


def test_a_study_with_a_mix_and_faults(tmp_path: Path) -> None:
    """The fault phase of a cell with a mix (a fake bench): its good clients draw from the
    mix, its fault clients and recovery check get the /health entry's URL, and the cell
    stores its robustness."""
    folder, mix_file = project(tmp_path, MIX)
    config = resolve(_study(folder, mix_file))
    keep_mix(config)
    assert config.app is not None
    aimed: list[str] = []

    def measured(url: str, specs: Any, run_load: Any, **kw: Any) -> Any:
        aimed.append(url)
        return _robustness_run(url, specs, run_load, **kw)

    bench = fake_bench(fault_clients=measured)
    timeline = bench.timeline
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_study(
            config,
            planned(config),
            store,
            results_dir=tmp_path,
            agent=FakeAgent(timeline),
            executor=bench.executor(),
        )
        (cell,) = store.cells(outcome.run_id)
    assert outcome.cells_ok == 1, cell.failure_reason
    assert aimed == ["http://127.0.0.1:9/health?deep=1"]
    loads = [e["spec"] for e in timeline.entries if e["entry"] == "load"]
    assert len(loads) >= 2 and all(s["mix"] == config.app.mix_entries for s in loads)
    rob = cell.flags["robustness"]
    assert rob["mix"] == "churn=2" and rob["survived"] and rob["answered_after"]


def test_run_refuses_it_in_one_line(tmp_path: Path) -> None:
    folder, mix_file = project(tmp_path, NO_GET_2XX)
    results = tmp_path / "res"
    args = ["--app", "mixapp:app", "--interface", "wsgi", "--project", str(folder), "--mix",
            str(mix_file), "--python", CPYTHON, "--server", "gunicorn-sync", "--faults",
            "churn=2", "--results-dir", str(results), "--dry-run"]  # fmt: skip
    res = CliRunner().invoke(command, args)
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines() == [
        f"error: --faults with --mix (load.faults, app.mix): {mix_file} has no GET request "
        "expecting a 2xx, which the fault phase aims its fault clients at and checks the "
        "server's recovery with; add one, or measure the mix in a run without --faults"
    ]
    assert not results.exists()
