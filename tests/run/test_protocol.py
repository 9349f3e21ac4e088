"""``--protocol http1,h2c``: the same stacks over HTTP/1.1 and over HTTP/2 with prior
knowledge, side by side in one run (the server told to serve h2c, readiness, verification and
load over it), and the combinations refused or skipped before anything runs."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from pwbtest import PYWEBBENCH, command, pwb
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.export.csv import export_csv
from pywebbench.store import Store, Study

CPYTHON = default_interpreters()[0].name
FAST = ["-d", "1", "--warmup", "fixed", "--warmup-duration", "0.5", "--python", CPYTHON]
ONE_REPLICATE = ["--replicates", "1", "--max-replicates", "1"]


def _argv_line(log_path: str) -> str:
    """The command line the server was started with (the first line of its log)."""
    first = Path(log_path).read_text().splitlines()[0]
    assert first.startswith("# pywebbench: "), first
    return first


def test_granian_and_hypercorn_over_http1_and_h2c_in_one_run(tmp_path: Path) -> None:
    results = tmp_path / "res"
    proc = pwb(
        "run", *FAST, *ONE_REPLICATE, "-c", "4", "--workload", "hello",
        "--server", "granian-wsgi,hypercorn", "--framework", "raw-wsgi,raw-asgi",
        "--protocol", "http1,h2c", "--streams", "3", "--server-scope", "stack",
        results=results, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study: Study = store.load_study()
        flat = list(csv.DictReader(io.StringIO(export_csv(store))))
    assert not study.failures, [(f.phase, f.reason) for f in study.failures]
    stacks = {s.id: s.key for s in study.stacks}
    cells = {(stacks[c.stack_id].split("/")[1], c.protocol): c for c in study.cells}
    assert set(cells) == {
        (server, proto) for server in ("granian-wsgi", "hypercorn") for proto in ("http1", "h2c")
    }
    for (server, proto), cell in cells.items():
        assert cell.status == "ok", (cell.key, cell.failure_reason)  # verified, then measured
        assert cell.load_point == ("c4 h2c×3" if proto == "h2c" else "c4")  # http1: unchanged
        (rep,) = [r for r in study.replicates if r.cell_id == cell.id]
        (it,) = study.iterations_of(cell.id)
        # 3,000 (hypercorn over h2c) to 21,165 requests were measured in the 1-s iterations
        # (5 Dec 2026), 1,034 at 2.9x slower (docs/contributing.md, "Timing bounds in the
        # suite"): 50 is 20x under.
        assert it.requests > 50 and it.non_2xx == 0, it
        # hypercorn ends an h2c connection after 1,000 requests with a graceful GOAWAY and
        # drops the streams it had accepted, up to --streams each (docs/http2.md, seen by
        # h2load too); nothing else may fail
        goaways = (
            (it.requests + it.errors) // 1000 if (server, proto) == ("hypercorn", "h2c") else 0
        )
        classes = it.result.get("error_classes", {})
        assert it.errors <= 3 * goaways and set(classes) <= {"h2_goaway"}, (it.errors, classes)
        spec = it.result["spec"]
        assert spec["protocol"] == proto, spec
        assert spec["streams"] == (3 if proto == "h2c" else 1), spec
        argv = _argv_line(rep.log_path or "")
        if server == "granian-wsgi":  # told to serve HTTP/2 only: HTTP/1.1 could not pass
            assert ("--http 2" if proto == "h2c" else "--http 1") in argv, argv
    # server_scope "stack": one server per stack and protocol
    assert len({r.log_path for r in study.replicates}) == 4
    # the report and the exports say which cells spoke h2c
    md = next((results / "reports").glob("*.md")).read_text()
    section = md.split("## HTTP/1.1 against h2c", 1)[1]
    for label in (
        "granian-wsgi · raw-wsgi | hello | c4 | ",
        "hypercorn · raw-asgi | hello | c4 | ",
    ):
        row = next(line for line in section.splitlines() if label in line)
        assert row.split(" | ")[4] == "3", row  # HTTP/1.1 req/s, then the h2c streams
    html = next((results / "reports").glob("*.html")).read_text()
    assert 'id="protocol"' in html
    # compare pairs h2c cells with h2c cells, never with the HTTP/1.1 ones
    run_id = study.runs[0].id
    cmp = pwb("compare", run_id, run_id, "--format", "json", results=results, timeout=60)
    assert cmp.returncode == 0, cmp.stderr
    rows = json.loads(cmp.stdout)["cells"]
    assert sorted(r["load_point"] for r in rows) == ["c4", "c4", "c4 h2c×3", "c4 h2c×3"], rows
    assert {(r["stack_name"].split("/")[1], r["protocol"]) for r in flat} == set(cells)


def test_h2c_and_websocket_groups_are_interleaved(tmp_path: Path, census: str) -> None:
    """Issue 64 item 2: an interleaved study of h2c and WebSocket cells on granian and
    hypercorn (both serve both): a group per protocol (hello over h2c, ws-echo over
    WebSocket), none on the per-cell path; each group's processes are started speaking its
    protocol (granian told to serve HTTP/2 only: an HTTP/1.1 request could not pass), loaded
    in the engine's slices, and every cell stores its slices and group figures (a
    WebSocket slice counts echoed messages). No process is left behind (``census``)."""
    results = tmp_path / "res"
    proc = pwb(
        "run", "--python", CPYTHON, "--server", "granian-asgi,hypercorn",
        "--framework", "raw-asgi", "--workload", "hello,ws-echo", "-c", "4",
        "--protocol", "h2c", "--streams", "3", "--replicates", "2",
        # the 20 rounds a group plans at least, in 8 s of 4 processes; a group may stop
        # once its processes are warm with 8 measured rounds (the default 3% would take
        # the whole budget)
        "--group-budget", "8", "--slice", "0.1", "--ci-target", "0.5", "--no-report",
        results=results, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 interleaved groups (2 server processes a stack)" in proc.stdout, proc.stdout
    assert "per-cell path" not in proc.stdout
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study: Study = store.load_study()
    assert not study.failures, [(f.phase, f.reason) for f in study.failures]
    stacks = {s.id: s.key for s in study.stacks}
    cells = {(stacks[c.stack_id].split("/")[1], c.workload): c for c in study.cells}
    assert set(cells) == {
        (server, w) for server in ("granian-asgi", "hypercorn") for w in ("hello", "ws-echo")
    }
    for (server, workload), cell in cells.items():
        assert cell.status == "ok", (cell.key, cell.failure_reason)
        ws = workload == "ws-echo"
        assert (cell.protocol, cell.load_point) == (("ws", "c4") if ws else ("h2c", "c4 h2c×3"))
        group = cell.flags["group"]
        assert group["processes"] == 2 and group["stacks"] == 2 and group["rps"] > 0, group
        measured = study.iterations_of(cell.id)
        assert measured and all("ab_slice" in i.result for i in measured)
        requests = sum(i.requests for i in measured)
        errors = sum(i.errors for i in measured)
        assert requests > 100, (cell.key, requests)
        # hypercorn ends an h2c connection after 1,000 requests with a graceful GOAWAY and
        # drops the streams it had accepted, up to --streams each (test above); nothing else
        # may fail
        goaways = 4 + requests // 500 if (server, workload) == ("hypercorn", "hello") else 0
        assert errors <= 3 * goaways, (cell.key, errors, requests)
        for rep in study.replicates_of(cell.id or 0):
            argv = _argv_line(rep.log_path or "")
            if server == "granian-asgi":
                assert (" --ws" if ws else "--http 2") in argv, argv


def test_a_server_that_cannot_serve_h2c_is_skipped_with_a_note(tmp_path: Path) -> None:
    proc = command(
        ["run", "--python", CPYTHON, "--server", "granian-wsgi,gunicorn-sync",
         "--framework", "raw-wsgi", "--workload", "hello", "-c", "4",
         "--protocol", "http1,h2c", "--connection-mode", "keepalive,close,20",
         "--dry-run", "--results-dir", str(tmp_path / "res")],
        timeout=60, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "gunicorn-sync/raw-wsgi h2c: gunicorn-sync does not serve h2c" in out, out
    assert "h2c close: h2c cells keep their connections" in out, out
    labels = [line.strip() for line in proc.stdout.splitlines() if "hello c4" in line]
    assert sorted(labels) == sorted(
        [
            f"{CPYTHON}/granian-wsgi/raw-wsgi hello c4",
            f"{CPYTHON}/granian-wsgi/raw-wsgi hello c4 close",
            f"{CPYTHON}/granian-wsgi/raw-wsgi hello c4 h2c",
            f"{CPYTHON}/granian-wsgi/raw-wsgi hello c4 20/conn",
            f"{CPYTHON}/granian-wsgi/raw-wsgi hello c4 20/conn h2c",
            f"{CPYTHON}/gunicorn-sync/raw-wsgi hello c4",
            f"{CPYTHON}/gunicorn-sync/raw-wsgi hello c4 close",
            f"{CPYTHON}/gunicorn-sync/raw-wsgi hello c4 20/conn",
        ]
    ), proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # fault clients speak HTTP/1.1 only
        (["--server", "granian-wsgi", "--protocol", "h2c", "--faults", "default"],
         "--faults with --protocol h2c"),
        # only servers that cannot: nothing left to run, and the reason is named
        (["--server", "gunicorn-sync", "--protocol", "h2c"], "gunicorn-sync does not serve h2c"),
        (["--server", "granian-wsgi", "--protocol", "h3"], "--protocol"),
        (["--server", "granian-wsgi", "--protocol", "h2c", "--streams", "0"], "--streams"),
        (["--server", "granian-wsgi", "--streams", "4"], "--streams"),  # no h2c cell
    ],
)  # fmt: skip
def test_bad_protocol_requests_are_one_line_exit_2_and_write_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    results = tmp_path / "res"
    base = ["run", "--python", CPYTHON, "--framework", "raw-wsgi", "--workload", "hello"]
    proc = pwb(*base, *args, results=results, timeout=60)
    assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
    assert message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not results.exists(), args  # nothing written


def test_verify_over_h2c(tmp_path: Path) -> None:
    args = [PYWEBBENCH, "verify", "--python", CPYTHON, "--framework", "raw-wsgi"]
    args += ["--workload", "hello,json", "--protocol", "h2c", "--log-dir", str(tmp_path)]
    proc = subprocess.run(
        [*args, "--server", "granian-wsgi,gunicorn-sync"], capture_output=True, text=True,
        timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS hello" in out and "PASS json" in out, out
    assert "gunicorn-sync does not serve h2c" in out and "2 passed, 0 failed" in out, out
