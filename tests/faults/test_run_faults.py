"""`pywebbench run --faults`: the runner's fault phase and what it stores."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pwbtest import command, neighbour, planned
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.faults.outcome import CellRobustness
from pywebbench.load import LocalAgent
from pywebbench.refserver import RefServer
from pywebbench.run.robustness import FaultTarget, GuardedAgent, fault_phase
from pywebbench.store import Store
from pywebbench.study.config import resolve

PYWEBBENCH = str(Path(sys.executable).parent / "pywebbench")


def test_fault_phase_of_the_runner_against_the_reference_server() -> None:
    """The runner's own fault phase (real engine, real fault clients, reference server)."""
    config = resolve(
        None,
        {
            "matrix": {"servers": ["gunicorn-sync"], "frameworks": ["raw-wsgi"]},
            # a lenient guard: a busy CI machine does not trip it, pywebbench's own threads on
            # the server's core would (they are kept off it: half a core of a 1-s window)
            "load": {"duration_s": 1.0, "faults": "slowloris=4,smuggle=1", "connections": [8],
                     "interference_max": 0.4},
        },
    )  # fmt: skip
    assert config.load.faults == "slowloris=4,smuggle=1"
    [cell] = [c for c in planned(config).cells if c.workload.name == "hello"][:1]
    agent = LocalAgent()
    with RefServer(cpus=[0]) as srv:
        clean = agent.run(cell.load_spec(srv.url, config.load, [1], duration_s=1.0))
        rob = fault_phase(
            cell,
            FaultTarget(srv.url, lambda: True, srv.pid),
            clean,
            config=config,
            agent=agent,
            server_cpus=[0],
            generator_cpus=[1],
        )
    flag = json.loads(json.dumps(rob.to_flag()))  # stored as JSON in the cell's flags
    assert CellRobustness.from_flag(flag) == rob
    assert rob.mix == "slowloris=4,smuggle=1"
    assert rob.survived and rob.answered_after
    # Floors that say the windows served: the reference server on its core answered
    # 55,000-107,000 requests/s on 4 connections on this project's 2-core VM (5 Dec 2026), and
    # 4 slowloris connections do not hold it; at 2.9x slower (a 1.45x slower core at 50%
    # steal, docs/contributing.md) still over 100x the floor: missed only if the host took
    # over 99% of a window, far rarer than 1 in 10,000 (issue 52).
    assert rob.clean_rps > 100 and rob.faulted_rps > 100
    assert rob.malformed == {"smuggle": "rejected"} and rob.malformed_accepted == []
    # Timing-free: with no good request failed and the malformed one rejected, the error and
    # malformed parts give 30 points whatever a busy machine does to throughput and p99.
    assert rob.good_errors == 0, rob
    assert rob.score >= 30, rob
    assert rob.fault_report.kinds["slow-headers"].attempts >= 4
    assert rob.curve is None and "curve" not in flag  # a single mix, no sweep
    # The interference guard read the faulted window. What it found depends on the machine
    # (a neighbour spinning on core 0 takes half of it while it spins), so what is checked
    # is the rule: interfered exactly when others took more than the limit after the
    # re-measures, and measured again only while they did (the server survived and answered).
    assert rob.others_share is not None, rob
    assert rob.interfered == (rob.others_share > 0.4), rob
    if rob.interfered:
        assert rob.remeasured == config.load.interference_retries, rob


def test_a_server_that_died_gives_no_share() -> None:
    """A dead server's tree reads 0 CPU seconds: the window's share is unknown, not minus
    everything it used (thousands of percent of a core)."""
    proc = subprocess.Popen([sys.executable, "-c", "sum(range(10**7))"])
    alive = [True]

    class Agent:
        name = "local"

        def run(self, spec: Any, progress: Any = None) -> Any:
            proc.wait(timeout=30)  # the "server" used CPU, then died
            alive[0] = False
            return SimpleNamespace(interrupted=False)

    target = FaultTarget("http://127.0.0.1:1/", lambda: alive[0], proc.pid)
    guarded = GuardedAgent(Agent(), target, [0], [1])
    guarded.run(cast(Any, None))
    assert guarded.worst_share() is None and not guarded.interrupted


def test_the_fault_phase_beside_a_neighbour_is_measured_again_then_flagged() -> None:
    """The interference guard covers the fault phase: a neighbour spinning on the server's
    core takes most of it from every window, so each measurement is made again
    (``interference_retries`` times; in a sweep each time on a fresh server) and stored
    flagged ``interfered`` with the share others took; the curve's points say so too."""
    config = resolve(
        None,
        {
            "matrix": {"servers": ["gunicorn-sync"], "frameworks": ["raw-wsgi"]},
            "load": {"duration_s": 0.5, "faults": "slowloris=2", "connections": [4],
                     "interference_retries": 1},
        },
    )  # fmt: skip
    [cell] = [c for c in planned(config).cells if c.workload.name == "hello"][:1]
    agent = LocalAgent()
    said: list[str] = []
    started: list[int] = []

    @contextmanager
    def fresh() -> Iterator[FaultTarget]:
        with RefServer(cpus=[0]) as one:
            started.append(one.pid)
            yield FaultTarget(one.url, lambda: True, one.pid)

    with neighbour(0), RefServer(cpus=[0]) as srv:
        rob = fault_phase(
            cell, FaultTarget(srv.url, lambda: True, srv.pid), None, config=config,
            agent=agent, server_cpus=[0], generator_cpus=[1], phase=said.append,
        )  # fmt: skip
        sweep = config.model_copy(
            update={"load": config.load.model_copy(update={"faults": "slowloris=2,3"})}
        )
        swept = fault_phase(
            cell, FaultTarget(srv.url, lambda: True, srv.pid), None, config=sweep,
            agent=agent, server_cpus=[0], generator_cpus=[1], fresh_server=fresh,
            phase=said.append,
        )  # fmt: skip
    assert rob.interfered and rob.remeasured == 1, rob
    # The spinner gets about half the server's core (the scheduler shares it evenly between
    # runnable tasks) and steal only adds to the share: 0.5 or more against the 0.2 floor,
    # missed only if a runnable spinner was kept off its core for 60% of a window, far rarer
    # than 1 in 10,000 (issue 52).
    assert rob.others_share is not None and rob.others_share > 0.2, rob
    assert CellRobustness.from_flag(json.loads(json.dumps(rob.to_flag()))) == rob
    assert said[0].startswith("re-measuring faults of ") and "of a core from its cores" in said[0]
    assert swept.curve is not None
    assert [(p.size, p.interfered, p.remeasured) for p in swept.curve.points] == [
        (2, True, 1),
        (3, True, 1),
    ]
    assert all(p.others_share is not None and p.others_share > 0.2 for p in swept.curve.points)
    assert len(started) == 4 and len(set(started)) == 4  # every attempt on a fresh server
    assert sum(" at 2: " in m for m in said) == 1 and sum(" at 3: " in m for m in said) == 1


# uvicorn 0.54 + h11 (the catalogue's uvicorn-h11) answers a request with both Content-Length
# and Transfer-Encoding and, under smuggling, the hidden request too (docs/faults.md).
E2E_MIX = "slowloris=8,bad-request-line=1,cl-te-conflict=1,smuggle=1"


@pytest.fixture(scope="module")
def faulted_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`pywebbench run --faults` on one real stack, with its reports; (results dir, cell flags)."""
    results = tmp_path_factory.mktemp("faulted-study")
    cpython = default_interpreters()[0].name
    proc = command(
        ["run", "--server", "uvicorn-h11", "--framework", "raw-asgi",
         "--workload", "hello", "--python", cpython, "-d", "1", "--warmup", "fixed",
         "--max-replicates", "1", "--warmup-duration", "0.5", "-c", "16", "--replicates", "1",
         "--faults", E2E_MIX, "--results-dir", str(results)],
        timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    cells = [c for c in study.cells if c.status == "ok"]
    assert cells, [(c.key, c.failure_reason) for c in study.cells]
    flags = dict(cells[0].flags, _stdout=proc.stdout)
    return results, flags


def test_run_with_faults_end_to_end(faulted_study: tuple[Path, dict[str, Any]]) -> None:
    """`pywebbench run --faults` on one real stack: the robustness lands in the store and in
    the console's ranking."""
    rob = faulted_study[1]["robustness"]
    out = faulted_study[1]["_stdout"]
    # the flags cell may wrap onto the row's next line: read the table's text as one line
    flat = " ".join(re.sub("[\u2500-\u257f]", " ", out).split())
    assert "robust" in out and "accepted malformed: cl-te-conflict" in flat, out
    assert rob["mix"] == E2E_MIX
    assert rob["survived"] and rob["answered_after"] and 0 <= rob["score"] <= 100
    assert rob["malformed"]["bad-request-line"] in {"rejected", "closed"}
    assert rob["report"]["kinds"]["slow-headers"]["attempts"] >= 8
    assert "cl-te-conflict" in rob["malformed_accepted"], rob["malformed"]
    found = {f["kind"] for f in rob["report"]["findings"]}
    assert set(rob["malformed_accepted"]) <= found


def _retained(rob: dict[str, Any]) -> str:
    """The robustness table's retained figure: marked when the phase stayed interfered."""
    return f"{rob['retained_pct']:.0f}%" + (" (interfered)" if rob.get("interfered") else "")


def _md_section(md: str, title: str) -> str:
    start = md.index(title)
    end = md.find("\n#", start + len(title))
    return md[start : end if end >= 0 else len(md)]


def test_markdown_lists_the_robustness_and_accepted_malformed_requests(
    faulted_study: tuple[Path, dict[str, Any]],
) -> None:
    results, flags = faulted_study
    rob = flags["robustness"]
    md = next((results / "reports").glob("report-*.md")).read_text()
    ranking = _md_section(md, "## hello")
    header = next(line for line in ranking.splitlines() if line.startswith("| # |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in ranking.splitlines() if line.startswith("| 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # The score as a whole number in the ranking; the accepted kinds flagged in the notes.
    assert cells[cols.index("Robustness")] == f"{rob['score']:.0f}"
    assert "accepted malformed: " + ", ".join(rob["malformed_accepted"]) in row
    section = _md_section(md, "### hello: robustness under faults")
    table = [line for line in section.splitlines() if line.startswith("| cpython")]
    assert len(table) == 1, section
    # a fault phase that stayed interfered (a neighbour on the server's core) is marked
    assert f"| {rob['score']:.1f} | {_retained(rob)} |" in table[0]
    assert "| yes | yes (" in table[0] and f"Fault mix `{E2E_MIX}`" in section
    for f in rob["report"]["findings"]:
        kind_lines = [x for x in section.splitlines() if f"`{f['kind']}`" in x]
        assert kind_lines, (f["kind"], section)
        assert any(f"status {f['status']}" in x for x in kind_lines)
    assert "`smuggle` hidden request answered (smuggling)" in section
    assert "Transfer-Encoding: chunked" in section  # the request as sent


def test_html_shows_the_robustness_column_and_findings(
    faulted_study: tuple[Path, dict[str, Any]],
) -> None:
    """The report in headless Chromium: the column with its tooltip, the table, the findings."""
    results, flags = faulted_study
    rob = flags["robustness"]
    html = next((results / "reports").glob("report-*.html"))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("report_probe.py")), str(html)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["errors"] == []
    assert shown["column_header"] == "Robustness"
    assert shown["score_text"] == f"{rob['score']:.0f}"
    tip = shown["tooltip"]
    assert f"score {rob['score']:.1f} of 100" in tip and f"{rob['retained_pct']:.0f}%" in tip
    assert "survived yes" in tip and "answered normally after yes" in tip
    assert "malformed accepted: " + ", ".join(rob["malformed_accepted"]) in tip
    assert E2E_MIX in shown["caption"]
    assert shown["table_visible"]
    assert {"Score", "Retained", "Survived", "Answered after"} <= set(shown["table_heads"])
    assert shown["row"]["score"] == f"{rob['score']:.1f}"
    assert shown["row"]["retained"] == _retained(rob)
    assert shown["row"]["survived"] == "yes" and shown["row"]["answered_after"].startswith("yes (")
    assert shown["row"]["accepted"] == ", ".join(rob["malformed_accepted"])
    stored = rob["report"]["findings"]
    assert shown["findings_visible"] and len(shown["findings"]) == len(stored) >= 1
    assert {f["kind"] for f in shown["findings"]} == {f["kind"] for f in stored}
    assert "hidden request answered (smuggling)" in {f["what"] for f in shown["findings"]}
    # Wire text shown as text, exactly as stored (escaped by the engine).
    assert shown["findings"][0]["request"] == stored[0]["request"]
    assert shown["findings"][0]["status"] == str(stored[0]["status"])
