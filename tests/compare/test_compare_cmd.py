"""``pywebbench compare`` on real stored runs: A/A passes, a real regression trips the gate,
formats, --vary, incomplete cells and bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from compare_study import STACK, StoredRuns, edited_copy, pwb
from pywebbench.cli import cli
from pywebbench.meter.core_speed import study_scaling
from pywebbench.store import Store, Study

GATE = "slower>5%,p99>10%,errors>0"


def compare(runs: StoredRuns | Path, *args: str) -> tuple[int, str, str]:
    """``pywebbench compare ARGS`` in this process (the CLI group, as the console script)."""
    store = runs.store if isinstance(runs, StoredRuns) else runs
    res = CliRunner().invoke(cli, ["compare", *args, "--store", str(store)])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout, res.stderr


def test_the_console_script_exits_1_on_a_regression(stored_runs: StoredRuns) -> None:
    proc = pwb(
        "compare",
        stored_runs.a1,
        stored_runs.slow,
        "--fail-if",
        GATE,
        "--store",
        str(stored_runs.store),
    )
    assert proc.returncode == 1 and "GATE FAILED" in proc.stdout, proc.stdout + proc.stderr


def _with_noise(seed: int, replicate_sd: float, iteration_sd: float) -> Callable[[Study], None]:
    """An edit for :func:`edited_copy`: every measured iteration's req/s (and requests)
    times a seeded log-normal factor, one per replicate times one per iteration: the spread
    of server processes and of their iterations, with no change in the stack."""

    def edit(study: Study) -> None:
        rnd = random.Random(seed)
        per_replicate: dict[int, float] = {}
        for it in study.iterations:
            if it.kind != "measured":
                continue
            if it.replicate not in per_replicate:
                per_replicate[it.replicate] = math.exp(rnd.gauss(0.0, replicate_sd))
            factor = per_replicate[it.replicate] * math.exp(rnd.gauss(0.0, iteration_sd))
            it.rps *= factor
            it.requests = round(it.requests * factor)

    return edit


def test_aa_same_stack_twice_passes_the_gate(stored_runs: StoredRuns, tmp_path: Path) -> None:
    """A/A on data: a real run against copies of itself whose server processes and
    iterations spread as this machine's do (10% between replicates, docs/steady-state.md;
    3% between iterations), seeded. Deterministic: its false-failure rate is 0. How often
    the gate would trip on such pairs is the interval's coverage: at --level 0.999 the
    ratio's interval (Welch's t on the replicates' log figures, analysis/ratio.py) misses the
    true ratio of 1 a time in 1,000, and the gate trips only when the whole interval lies
    beyond its 5% margin, rarer still; benchmarks/aa_intervals.py measures the coverage."""
    for seed in range(8):
        store = tmp_path / f"aa{seed}.sqlite"
        a, b = edited_copy(stored_runs.store, stored_runs.a1, store, _with_noise(seed, 0.10, 0.03))
        rc, out, err = compare(
            store, a, b, "--fail-if", GATE, "--format", "json", "--level", "0.999"
        )
        assert rc == 0, (seed, out + err)
        doc = json.loads(out)
        assert doc["gate"] == {"rules": GATE.split(","), "passed": True, "violations": []}
        [cell] = doc["cells"]
        assert cell["stack"] == STACK and cell["workload"] == "cpu"
        rps = cell["rps"]
        assert rps["ci_low"] <= rps["ratio"] <= rps["ci_high"], (seed, rps)
        assert rps["ci_low"] < 1.05 and rps["ci_high"] > 0.95, (seed, rps)


def test_two_real_runs_of_one_stack_compare_as_a_pair(stored_runs: StoredRuns) -> None:
    """The real A/A pair, for function: one cell, its ratio inside its interval, exit 0
    without a gate. Whether the gate passes two real runs minutes apart depends on how far
    the host moved between them (drift is not in the interval): that is
    :func:`test_aa_same_stack_twice_passes_the_gate`, on data."""
    rc, out, err = compare(stored_runs, stored_runs.a1, stored_runs.a2, "--format", "json")
    assert rc == 0, out + err
    [cell] = json.loads(out)["cells"]
    assert cell["stack"] == STACK and cell["workload"] == "cpu"
    rps = cell["rps"]
    assert rps["ci_low"] <= rps["ratio"] <= rps["ci_high"], rps
    assert cell["verdict"] in {"no significant change", "slower", "faster"}, cell


def test_real_regression_fails_the_gate_and_names_the_cell(stored_runs: StoredRuns) -> None:
    """fib(27) against fib(20): about 29x the work, a ratio near 0.05.

    Designed false-failure rate: at most 1 in 1,000 while the replicates' log figures spread
    by at most 0.2 (sd; the machine's replicates varied 10-18% minutes apart, docs/
    steady-state.md). Simulated with the gate's own interval (99% Welch's t on log figures,
    3 replicates a side, 10^6 draws): at a true ratio of 0.05 the interval's upper end reaches
    0.95 (the gate misses) 6 times in 10,000 at sd 0.2, 3 in 10^6 at sd 0.15; the point ratio
    reaching 0.5 never happened. (With fib(24), ratio ~0.2, the gate missed 9 in 100 at sd
    0.2: the test failed on a loaded machine.)
    """
    rc, out, err = compare(stored_runs, stored_runs.a1, stored_runs.slow, "--fail-if", GATE)
    assert rc == 1, out + err
    out = " ".join(out.split())  # the table wraps long cells
    assert "GATE FAILED [slower>5%]" in out and f"{STACK} | cpu @ c8" in out
    assert "slower" in out
    # Same data, same verdict and interval: the bootstrap is seeded.
    first = compare(stored_runs, stored_runs.a1, stored_runs.slow, "--format", "json")
    again = compare(stored_runs, stored_runs.a1, stored_runs.slow, "--format", "json")
    assert first[0] == 0 and first[1] == again[1]
    cell = json.loads(first[1])["cells"][0]
    assert cell["verdict"] == "slower" and cell["rps"]["ratio"] < 0.5
    assert cell["p50"]["ratio"] > 2.0  # every request does ~29x the work
    # and costs the server more CPU: read in the same iterations as req/s, where the server
    # used most of its core on both sides, so about the inverse of the req/s ratio
    assert cell["cpu_per_request"]["ratio"] > 1.5


def test_latest_two_and_the_formats(stored_runs: StoredRuns, tmp_path: Path) -> None:
    rc, out, _ = compare(stored_runs, "--latest", "2", "--format", "markdown")
    assert rc == 0
    assert f"{stored_runs.a2} → {stored_runs.slow}" in out
    assert "| cell | req/s | p50 | p99 | CPU/req | peak RSS | verdict |" in out and "slower" in out
    page = tmp_path / "cmp.html"
    rc, _, err = compare(
        stored_runs, stored_runs.a1, stored_runs.slow, "--format", "html", "-o", str(page)
    )
    assert rc == 0 and f"wrote {page}" in err
    html = page.read_text()
    assert 'class="masthead"' in html and "--bad: #c53030" in html  # the report's look
    assert 'data-verdict="slower"' in html and STACK in html


def _rename_interpreter(study: Study) -> None:
    for stack in study.stacks:
        stack.interpreter = "pypy3.9"
        stack.key = stack.name = stack.key.replace(stack.key.split("/")[0], "pypy3.9")


def test_vary_interpreter_pairs_other_interpreters(stored_runs: StoredRuns, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    base, new = edited_copy(stored_runs.store, stored_runs.a1, store, _rename_interpreter)
    out_file = tmp_path / "out.json"
    rc, out, err = compare(store, base, new, "--format", "json", "-o", str(out_file))
    assert rc == 2 and not out_file.exists()
    assert err.count("\n") == 1 and "no complete cells in common" in err and "--vary" in err
    rc, out, err = compare(store, base, new, "--vary", "interpreter", "--format", "json")
    assert rc == 0, err
    cell = json.loads(out)["cells"][0]
    assert f"interpreter {stored_runs.store and STACK.split('/')[0]} -> pypy3.9" in cell["differs"]
    assert cell["verdict"] == "no significant change" and cell["rps"]["ratio"] == 1.0


def _interfere(study: Study) -> None:
    """Other processes took CPU from every measured iteration's cores (docs/interference.md)."""
    for it in study.iterations:
        if it.kind == "measured":
            it.interfered = True
            it.others_cpu_s = 0.13 * it.duration_s


def test_an_interfered_cell_is_never_no_significant_change(
    stored_runs: StoredRuns, tmp_path: Path
) -> None:
    store = tmp_path / "s.sqlite"
    base, new = edited_copy(stored_runs.store, stored_runs.a1, store, _interfere)
    rc, out, err = compare(store, base, new, "--format", "json")
    assert rc == 0, err  # no gate asked for
    cell = json.loads(out)["cells"][0]
    assert cell["rps"]["ratio"] == 1.0 and cell["verdict"] == "interfered"
    rc, out, err = compare(store, base, new, "--fail-if", "slower>5%")
    assert rc == 1 and "GATE FAILED [interfered]" in out and "in NEW" in out, out + err
    rc, out, err = compare(store, new, base, "--fail-if", "slower>5%")  # BASE interfered
    assert rc == 1 and "in BASE" in out, out + err
    rc, out, err = compare(store, base, new, "--fail-if", "slower>5%", "--accept-interfered")
    assert rc == 0 and "gate passed" in out, out + err  # the same figures: nothing slower
    # a neighbour does not move peak RSS (nor instruction counts): judged on the figures
    rc, out, err = compare(store, base, new, "--fail-if", "memory>5%")
    assert rc == 0 and "gate passed" in out, out + err
    rc, out, err = compare(store, base, new, "--fail-if", "memory>5%", "--fail-if", "p99>5%")
    assert rc == 1 and "GATE FAILED [interfered]" in out, out + err


def _interrupt_last_cell(study: Study) -> None:
    study.runs[0].status = "interrupted"
    study.cells[-1].status = "interrupted"


def test_incomplete_cells_are_named_and_left_out(stored_runs: StoredRuns, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    base, new = edited_copy(stored_runs.store, stored_runs.a1, store, _interrupt_last_cell)
    rc, out, err = compare(store, base, new)
    assert rc == 2  # its only cell was interrupted: nothing left to compare
    assert f"warning: NEW run {new} cell {STACK} | cpu @ c8 is interrupted" in err
    assert "no complete cells in common" in err


def test_bad_input_is_one_line_and_exit_2(stored_runs: StoredRuns, tmp_path: Path) -> None:
    out_file = tmp_path / "never.md"
    cases = [
        (["nope-1", stored_runs.a1], "RUNS: no run 'nope-1'"),
        ([stored_runs.a1, stored_runs.a2, "--fail-if", "slower>>5%"], "--fail-if: cannot parse"),
        ([stored_runs.a1, stored_runs.a2, "--fail-if", "faster>5%"], "unknown metric 'faster'"),
        ([stored_runs.a1, stored_runs.a2, "--fail-if", "slower>5"], "is a percentage"),
        ([stored_runs.a1], "expected BASE and NEW"),
        ([stored_runs.a1, stored_runs.a2, "--vary", "moon"], "--vary: unknown axis 'moon'"),
        ([stored_runs.a1, stored_runs.a2, "--level", "95"], "--level: 95.0 is not"),
        (["--latest", "3"], "--latest: compares two runs"),
    ]
    for args, message in cases:
        rc, out, err = compare(stored_runs, *args, "--format", "markdown", "-o", str(out_file))
        assert rc == 2, (args, out, err)
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert not out_file.exists()


def _add_a_second_workload(study: Study) -> None:
    """Give the copy an extra cell (its only cell again, as workload 'cpu-extra')."""
    cell = study.cells[0]
    extra = dataclasses.replace(cell, id=-1, key=cell.key + "-extra", workload="cpu-extra")
    study.cells.append(extra)
    for it in [i for i in study.iterations if i.cell_id == cell.id]:
        study.iterations.append(dataclasses.replace(it, id=-(it.id or 0) - 1, cell_id=-1))


def test_unmatched_cells_are_listed(stored_runs: StoredRuns, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    base, new = edited_copy(stored_runs.store, stored_runs.a1, store, _add_a_second_workload)
    rc, out, err = compare(store, base, new, "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [c["workload"] for c in doc["cells"]] == ["cpu"]
    assert doc["unmatched"] == [
        {
            "side": "new",
            "cell": f"{STACK} | cpu-extra @ c8",
            "reason": "no cell with the same stack, workload and load point",
        }
    ]
    rc, out, _ = compare(store, base, new, "--format", "markdown")
    assert f"unmatched NEW cell {STACK} \\| cpu-extra @ c8" in out


def _bound_to_unix(study: Study) -> None:
    """The copy's cells measured on a unix socket (``--bind unix``), labels left alone."""
    for cell in study.cells:
        cell.bind = "unix"


def test_cells_pair_only_with_cells_of_the_same_bind(
    stored_runs: StoredRuns, tmp_path: Path
) -> None:
    store = tmp_path / "s.sqlite"
    base, new = edited_copy(stored_runs.store, stored_runs.a1, store, _bound_to_unix)
    rc, out, err = compare(store, base, new, "--format", "json")
    assert rc == 2 and "no complete cells in common" in err, (out, err)


def _wild_replicates(study: Study) -> None:
    """Replicates 20x apart (one server process crawled, one flew), as the quick study saw
    on a PyPy cell that printed a CI of -546-5,091 req/s (issue 22)."""
    for it in study.iterations:
        if it.kind == "measured":
            it.rps *= {0: 0.05, 1: 1.0}.get(it.replicate, 3.0)


def test_no_interval_of_a_stored_run_goes_below_zero(
    stored_runs: StoredRuns, tmp_path: Path
) -> None:
    """Every interval pywebbench prints for a cell (report, console summary, compare,
    history) stays above zero, on a stored run with wild replicates."""
    from pywebbench.report.build import build_view
    from pywebbench.run.console import summary_rows

    store = tmp_path / "s.sqlite"
    base, new = edited_copy(stored_runs.store, stored_runs.a1, store, _wild_replicates)
    with Store(store, create=False) as db:
        study = db.load_study([new])
    estimates = [p.rps for w in build_view(study).workloads for p in w.points if p.rps]
    summaries = [row["rps"] for rows in summary_rows(study).values() for row in rows]
    assert estimates and summaries
    for est in estimates:
        assert est.n >= 2 and 0 < est.low < est.median < est.high, est
    for s in summaries:
        assert s.n >= 2 and 0 < s.ci_low < s.median < s.ci_high, s
    rc, out, err = compare(store, base, new, "--format", "json")
    assert rc == 0, err
    rps = json.loads(out)["cells"][0]["rps"]
    assert 0 < rps["ci_low"] < rps["ci_high"], rps
    history = CliRunner().invoke(
        cli, ["history", STACK, "-w", "cpu", "--store", str(store), "--format", "json"]
    )
    assert history.exit_code == 0, history.output
    rows = json.loads(history.stdout)
    assert len(rows) == 2  # the original and the wild copy
    for row in rows:
        assert row["rps"]["n"] >= 2 and 0 < row["rps"]["ci_low"] < row["rps"]["ci_high"], row


def _slower_core(study: Study) -> None:
    """Every iteration ran on a core doing 0.7x the work per CPU-second, and the server's
    req/s followed it with the elasticity the stored run shows, as compare will pool it over
    both sides (docs/interference.md#core-speed)."""
    beta = study_scaling(study, study).elasticities[(STACK.split("/")[0], "cpu")]
    for it in study.iterations:
        assert it.core_rate, "the stored runs were measured with the core-speed probe"
        it.core_rate *= 0.7
        it.rps *= 0.7**beta


def _slower_unprobed(study: Study) -> None:
    """The same slowdown, measured without the probe (--no-core-speed)."""
    _slower_core(study)
    for it in study.iterations:
        it.core_rate = None


def test_a_slower_core_is_not_a_slower_stack(stored_runs: StoredRuns, tmp_path: Path) -> None:
    with Store(stored_runs.store, create=False) as store:
        original = store.load_study([stored_runs.a1])
    beta = study_scaling(original, original).elasticities[(STACK.split("/")[0], "cpu")]
    assert 0.0 <= beta <= 1.5
    for name, edit, ratio in (
        ("probed", _slower_core, 1.0),  # req/s at one core speed: the same stack
        ("unprobed", _slower_unprobed, 0.7**beta),  # a side without rates: both raw, slower
    ):
        store, out_file = tmp_path / f"{name}.sqlite", tmp_path / f"{name}.json"
        base, new = edited_copy(stored_runs.store, stored_runs.a1, store, edit)
        rc, out, err = compare(
            store, base, new, "--format", "json", "-o", str(out_file), "--fail-if", "slower>5%"
        )
        cell = json.loads(out_file.read_text())["cells"][0]
        assert cell["rps"]["ratio"] == pytest.approx(ratio), name
        if name == "probed":
            assert rc == 0 and cell["verdict"] == "no significant change", out + err
