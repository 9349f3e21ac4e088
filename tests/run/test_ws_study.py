"""The ws-echo workload in a study: the ASGI servers that serve WebSocket, upgraded and
verified (each echo checked), then loaded by the engine's WebSocket mode (messages/s, each
message's round trip); servers that cannot are skipped with the reason."""

from __future__ import annotations

import os
from pathlib import Path

from pwbtest import command, pwb
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import Store, Study

CPYTHON = default_interpreters()[0].name
FAST = ["-d", "1", "--warmup", "fixed", "--warmup-duration", "0.5", "--python", CPYTHON]
ONE_REPLICATE = ["--replicates", "1", "--max-replicates", "1"]
SERVERS = ("uvicorn-h11", "hypercorn", "daphne", "granian-asgi")


def test_a_websocket_study_over_four_servers(tmp_path: Path) -> None:
    results = tmp_path / "res"
    proc = pwb(
        "run", *FAST, *ONE_REPLICATE, "-c", "4", "--workload", "ws-echo",
        "--server", ",".join(SERVERS), "--framework", "raw-asgi", results=results, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study: Study = store.load_study()
    assert not study.failures, [(f.phase, f.reason) for f in study.failures]
    stacks = {s.id: s.key for s in study.stacks}
    cells = {stacks[c.stack_id].split("/")[1]: c for c in study.cells}
    assert set(cells) == set(SERVERS)
    for server, cell in cells.items():
        assert cell.status == "ok", (cell.key, cell.failure_reason)  # verified, then measured
        assert (cell.protocol, cell.load_point) == ("ws", "c4"), cell
        (it,) = study.iterations_of(cell.id)
        spec = it.result["spec"]
        assert spec["protocol"] == "ws" and spec["url"].startswith("ws://127.0.0.1:"), spec
        # every message echoed intact (a corrupt echo is an error), on 4 upgraded connections;
        # 11,804-13,288 messages were measured in the 1-s iterations (5 Dec 2026), 4,070 at
        # 2.9x slower (docs/contributing.md, "Timing bounds in the suite"): 100 is 40x under.
        assert it.requests > 100 and it.errors == 0, (server, it.result["error_classes"])
        assert it.non_2xx == 0, it  # messages have no status: none counts as a non-2xx
        assert it.result["websocket"]["handshakes"] >= 4, it.result["websocket"]
    md = next((results / "reports").glob("*.md")).read_text()
    assert "req/s are messages/s" in md.split("## ws-echo", 1)[1]


def test_servers_without_websocket_are_skipped_with_the_reason(tmp_path: Path) -> None:
    proc = command(
        ["run", "--python", CPYTHON, "--server", "hypercorn,socketify-asgi",
         "--framework", "raw-asgi,flask", "--workload", "hello,ws-echo", "-c", "4",
         "--protocol", "http1,h2c", "--dry-run", "--results-dir", str(tmp_path / "res")],
        timeout=60, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "socketify-asgi/raw-asgi ws: socketify-asgi does not serve WebSocket" in out, out
    labels = sorted(line.strip() for line in proc.stdout.splitlines() if " c4" in line)
    # ws-echo is one cell per stack whatever --protocol says; flask implements no ws-echo
    assert [x for x in labels if "ws-echo" in x] == [f"{CPYTHON}/hypercorn/raw-asgi ws-echo c4"], (
        labels
    )
    assert f"{CPYTHON}/hypercorn/raw-asgi hello c4 h2c" in labels, labels


def test_faults_with_ws_echo_are_refused_in_one_line(tmp_path: Path) -> None:
    results = tmp_path / "res"
    proc = pwb(
        "run", "--python", CPYTHON, "--server", "hypercorn", "--framework", "raw-asgi",
        "--workload", "ws-echo", "--faults", "default", results=results, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "--faults with --workload ws-echo" in proc.stderr and proc.stderr.count("\n") == 1
    assert not results.exists()
