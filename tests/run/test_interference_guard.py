"""The interference guard in a real study: a neighbour spinning on the server's core makes
every measured iteration interfered; each is measured again, then stored flagged, and the
cell reads "interfered" in the store and on the console (docs/interference.md). The speed of
the server's core is probed during every iteration (docs/interference.md#core-speed)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pwbtest import neighbour, pwb
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.meter.interference import AvailableShare
from pywebbench.run.measure import Measurer
from pywebbench.run.seams import Seams
from pywebbench.store import Store

CPYTHON = default_interpreters()[0].name
STUDY = [
    "run",
    "--design",
    "sequential",  # the guard of a replicate's measured iterations (docs/interference.md)
    "--python",
    CPYTHON,
    "--server",
    "gunicorn-sync",
    "--framework",
    "raw-wsgi",
    "--workload",
    "hello",
    "-c",
    "4",
    "-d",
    "1",
    "--warmup",
    "fixed",
    "--warmup-duration",
    "0.5",
    "--iterations",
    "2",
    "--replicates",
    "1",
    "--max-replicates",
    "1",
    "--server-cpus",
    "0",
    "--no-report",
]


def test_a_steady_neighbour_flags_every_iteration_after_its_re_measure(
    tmp_path: Path, census: str
) -> None:
    results = tmp_path / "res"
    with neighbour(0):
        proc = pwb(*STUDY, "--interference-retries", "1", results=results)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "interfered, re-measured (2x)" in proc.stdout, proc.stdout  # the cell's flags
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    (cell,) = study.cells
    assert cell.id is not None and cell.status == "ok"
    measured = study.iterations_of(cell.id)
    assert [i.idx for i in measured] == [0, 1]  # the discarded attempts are not iterations
    for it in measured:
        # A neighbour that never sleeps gets about half the server's core (the scheduler
        # shares it out evenly between runnable tasks); at 50% steal a quarter of the
        # window, 5x the 0.05 floor, and steal only adds to the share. Under the floor, a
        # runnable spinner was kept off its core for 95% of the window: far rarer than 1 in
        # 10,000 (issue 52, docs/contributing.md).
        assert it.interfered and it.others_cpu_s is not None
        assert it.others_cpu_s / it.duration_s > 0.05, it
        (attempt,) = it.remeasured  # measured once again, then stored flagged
        assert attempt["share"] > 0.05 and attempt["rps"] > 0
    assert cell.flags["interfered"] is True and cell.flags["remeasured"] == 2


def test_the_guard_can_be_set_off_and_is_stored_either_way(tmp_path: Path, census: str) -> None:
    results = tmp_path / "res"
    with neighbour(0):
        proc = pwb(*STUDY, "--interference-max", "2", results=results)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "interfered" not in proc.stdout.split("ranked by requests/s")[1]
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    (cell,) = study.cells
    assert cell.id is not None
    for it in study.iterations_of(cell.id):
        assert not it.interfered and it.remeasured == []
        assert it.others_cpu_s is not None and it.others_cpu_s > 0  # measured all the same
    assert json.loads(cell.flags_json)["interfered"] is False
    bad = pwb(*STUDY, "--interference-retries", "-1", results=results)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "--interference-retries" in bad.stderr


def test_the_server_core_speed_is_probed_unless_set_off(tmp_path: Path, census: str) -> None:
    for extra, probed in (((), True), (("--no-core-speed",), False)):
        results = tmp_path / ("probed" if probed else "unprobed")
        args = [a for a in STUDY if a != "--no-report"] if probed else STUDY  # one report
        proc = pwb(*args, *extra, results=results)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # probed: how far the core strayed (req/s scaled only when the study shows they
        # follow it: two iterations do not, so "as measured", but with the rates read)
        said = "core ran" if probed else "core speed not probed"
        assert said in proc.stdout, proc.stdout  # under the ranked table
        if probed:  # and in the report's manifest
            (markdown,) = (results / "reports").glob("report-*.md")
            assert "Core speed (run `" in markdown.read_text() and said in markdown.read_text()
            (html,) = (results / "reports").glob("report-*.html")
            assert said in html.read_text()
        with Store(results / "pywebbench.sqlite", create=False) as store:
            study = store.load_study()
        (cell,) = study.cells
        assert cell.id is not None
        its = study.iterations_of(cell.id, kind=None)
        assert len(its) == 3  # the warm-up and two measured iterations
        for it in its:
            if probed:  # loop steps per CPU-second on the server's core: a floor with
                # a margin of over 100x (tests/meter/test_core_speed.py's module docstring)
                assert it.core_rate is not None and it.core_rate > 1e5, it
            else:
                assert it.core_rate is None, it


def test_a_warm_up_is_divided_by_the_share_of_the_server_cores_it_had() -> None:
    """The wiring of the warm-up's correction, deterministic: a server pinned apart from the
    generator gets an :class:`AvailableShare` of its own cores (the generator's steal counted
    only for a load that waits on the generator), times the core's speed when probed; a
    server sharing the generator's cores gets no share (what it lost cannot be told from
    what the generator took). The share's arithmetic is tested on fixed counters in
    tests/meter/test_interference_meter.py, the division of a curve in
    tests/analysis/test_steady.py; how level a real warm-up beside a bursty neighbour stays is
    :func:`test_a_bursty_neighbour_does_not_bend_the_warm_up_curve` (benchmark)."""
    server = SimpleNamespace(pid=os.getpid())
    cores = sorted(os.sched_getaffinity(0))
    apart = [c for c in range(os.cpu_count() or 1) if c not in cores] or [10_000]

    def measurer(generator_cpus: list[int], speed: object = None) -> Any:
        return SimpleNamespace(
            _probe=None,
            generator_cpus=generator_cpus,
            config=SimpleNamespace(load=SimpleNamespace(interference_max=0.05)),
            _speed_tracker=lambda: speed,
            seams=Seams(),
        )

    scale = Measurer._bucket_scale(measurer(apart), server, True)
    assert isinstance(scale, AvailableShare)
    assert scale.cpus == cores and scale.threshold == 0.05
    assert scale.generator_cpus == sorted(set(apart) - set(cores))
    open_loop = Measurer._bucket_scale(measurer(apart), server, False)
    assert isinstance(open_loop, AvailableShare) and open_loop.generator_cpus == []
    assert Measurer._bucket_scale(measurer(cores), server, True) is None
    both = Measurer._bucket_scale(measurer(apart, lambda: 2.0), server, True)
    assert both is not None and not isinstance(both, AvailableShare)
    assert 0.25 * 2.0 <= both() <= 2.0  # the speed times a share in [floor, 1]


@pytest.mark.benchmark
def test_a_bursty_neighbour_does_not_bend_the_warm_up_curve(tmp_path: Path, census: str) -> None:
    """An accuracy on this host's timing, not in the suite (issue 52: it failed fresh-clone
    suites under steal; python -m pytest -m benchmark tests/run/test_interference_guard.py).

    The cpu workload keeps gunicorn-sync's core busy; a neighbour spinning 0.5 s of every
    second there takes about half of it in its bursts, so every other half-second of the raw
    curve reads about half. Each bucket divided by the share of its core the server had
    (docs/interference.md#warm-ups), the stored curve stays level: no more than three
    buckets under 0.7x its upper quartile, where the raw curve has 6-7.

    Designed false-failure rate: about 1 in 10,000. Divided, 0 of 182 buckets in 13 runs
    (28 Nov 2026, one of them a fresh-clone suite) read under 0.7x their upper quartile and
    3 under 0.75x (the bound this test had, which failed that suite with 2 of 13); taking 2%
    a bucket, 4 or more of 13 below is binomially 1e-4 (buckets that a slow step of the host
    lowers together make it likelier, hence the margin). The raw curve fails it by 3-4."""
    study = [
        "run", "--python", CPYTHON, "--server", "gunicorn-sync", "--framework", "raw-wsgi",
        "--workload", "cpu", "-c", "4", "-d", "1", "--warmup-cap", "4", "--iterations", "1",
        "--replicates", "1", "--max-replicates", "1", "--server-cpus", "0", "--no-report",
        "--design", "sequential",
    ]  # fmt: skip
    results = tmp_path / "res"
    with neighbour(0, on="500ms", off="500ms"):
        proc = pwb(*study, results=results)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study_ = store.load_study()
    (cell,) = study_.cells
    assert cell.id is not None
    (replicate,) = study_.replicates_of(cell.id)
    rates = sorted(r for _, r in replicate.warmup_curve[1:])  # the first bucket is cold
    assert len(rates) >= 6, replicate.warmup_curve
    upper = rates[3 * len(rates) // 4]  # the quartile above the neighbour's dips
    # the hypervisor's share of the two pinned cores in the warm-up, for the message: a
    # fresh-clone suite failed here reading 46-193 req/s while the host took 24-43% of the
    # cores (the division corrects for steal too since then, down to its floor of 0.25)
    (warmup,) = study_.iterations_of(cell.id, kind="warmup")
    steal = (warmup.steal_s or 0.0) / (2 * warmup.duration_s) if warmup.duration_s else 0.0
    # raw, 6-7 of 14 buckets read 0.45-0.6x the others; divided, 0.73-1.2x
    assert sum(r < 0.7 * upper for r in rates) <= 3, (f"steal {steal:.0%}", replicate.warmup_curve)
