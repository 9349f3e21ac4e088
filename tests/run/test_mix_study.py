"""A study with a traffic mix (issue 53, docs/mix.md): ``pywebbench run --app ... --mix``
on a small real app, in both designs. Each endpoint is verified before the load, every
measured iteration (a per-cell run, or an interleaved slice) stores each endpoint's figures,
and they add up to the iteration's own. No timing is asserted."""

from __future__ import annotations

from pathlib import Path

from pwbmix import CPYTHON, ENDPOINTS, FAST, ONE_REPLICATE, app_args, project, run_study
from pwbtest import pwb
from pywebbench.store import Store, Study
from pywebbench.store.endpoints import cell_endpoints, iteration_endpoints

#: The fault phase of the per-cell study: event kinds (no held connection).
FAULTS = "churn=2,bad-request-line=1"


def _check_endpoints(study: Study) -> None:
    """Every measured iteration holds the mix's endpoints, summing to its own figures."""
    for cell in study.cells:
        assert cell.workload == "mix:mix.toml"
        measured = study.iterations_of(cell.id)
        assert measured
        for it in measured:
            endpoints = iteration_endpoints(it)
            assert [e["name"] for e in endpoints] == ENDPOINTS
            assert sum(e["requests"] for e in endpoints) == it.requests > 0
            assert sum(e["errors"] for e in endpoints) == it.errors == 0
            missing = endpoints[3]
            assert missing["status_counts"] == {"404": missing["requests"]}
            for e in endpoints:
                assert e["latency"]["summary"]["count"] == e["requests"]
        figures = cell_endpoints(measured)
        assert [f.name for f in figures] == ENDPOINTS
        assert sum(f.requests for f in figures) == sum(i.requests for i in measured)
        assert abs(sum(f.share_sent for f in figures) - 1) < 1e-9
        assert all(f.p50_us <= f.p99_us <= f.p999_us for f in figures)


def test_a_mix_study_per_cell(tmp_path: Path, census: str) -> None:
    """The sequential design: each endpoint verified, the runs' ``endpoints`` stored; the
    expected 404s of the 404 page are its answers, not errors. The console prints each
    endpoint's figures. With --faults (event kinds only: nothing holds the sync worker), the
    fault phase runs on the mix: its good clients draw from it, its fault clients and
    recovery check aim at the heaviest GET answering 2xx (GET /), and the cell stores its
    robustness."""
    said: list[str] = []
    study = run_study(
        tmp_path, tmp_path / "res", "--server", "gunicorn-sync", "--design", "sequential",
        *FAST, *ONE_REPLICATE, "--no-report", "--faults", FAULTS, said=said,
    )  # fmt: skip
    _check_endpoints(study)
    (cell,) = study.cells
    assert all(i.non_2xx == 0 for i in study.iterations_of(cell.id))
    flat = " ".join(said[0].replace("│", " ").split())  # the console's tables, unwrapped
    assert "mix:mix.toml @ c4: endpoints of the mix (measured iterations)" in flat
    for name in ENDPOINTS:
        assert f" {name} " in flat
    rob = cell.flags["robustness"]
    assert rob["mix"] == FAULTS and rob["survived"] and rob["answered_after"], rob
    assert rob["clean_rps"] > 0 and rob["faulted_rps"] > 0, rob
    assert rob["report"]["kinds"]["churn"]["attempts"] >= 2, rob["report"]
    assert rob["malformed"]["bad-request-line"] in {"rejected", "closed"}, rob


def test_a_mix_study_interleaved(tmp_path: Path, census: str) -> None:
    """The interleaved design: one stack's two processes loaded in slices by the engine's
    sliced run, each slice with its endpoints."""
    study = run_study(
        tmp_path, tmp_path / "res", "--server", "granian-wsgi", "--design", "interleaved",
        "--python", CPYTHON, "--replicates", "2", "--group-budget", "4", "-c", "4",
        "--no-report",
    )  # fmt: skip
    _check_endpoints(study)
    (cell,) = study.cells
    assert cell.flags["group"]["processes"] == 2
    assert all("ab_slice" in i.result for i in study.iterations_of(cell.id))


def test_each_endpoint_is_verified_before_the_load(tmp_path: Path, census: str) -> None:
    """An endpoint that does not answer what its entry expects fails the cell at
    verification, named; nothing is loaded."""
    folder, mix_file = project(tmp_path)
    mix_file.write_text(mix_file.read_text().replace("expect_status = [404]", ""))
    proc = pwb(
        "run", *app_args(folder, mix_file), "--server", "gunicorn-sync", "--design",
        "sequential", *FAST, *ONE_REPLICATE, "--no-report", results=tmp_path / "res",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    with Store(tmp_path / "res" / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    (cell,) = study.cells
    assert cell.status == "failed" and cell.failure_phase == "verify"
    assert 'endpoint "GET /missing" (GET /missing): status 404, expected 200' in str(
        cell.failure_reason
    )
    assert not study.iterations


def test_mix_and_path_are_refused_together(tmp_path: Path) -> None:
    """--mix with --path, or a bad mix file: one line, exit 2, nothing started."""
    folder, mix_file = project(tmp_path)
    proc = pwb("run", *app_args(folder, mix_file), "--path", "/x", "--dry-run",
               results=tmp_path / "res")  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --mix and --path (app.mix, app.paths): the mix gives every path; give one"
    ]
    mix_file.write_text('[[request]]\nname = "a"\nweight = 0\npath = "/"\n')
    proc = pwb("run", *app_args(folder, mix_file), "--dry-run", results=tmp_path / "res")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f'error: app: --mix: {mix_file}: request 1 ("a"): weight: must be > 0, got 0'
    ]
