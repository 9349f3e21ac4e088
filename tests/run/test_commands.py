"""`pywebbench runs` / `export` / `run --dry-run`: listings, formats and clear errors."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from pwbtest import command

sys.path.insert(0, str(Path(__file__).parents[1] / "store"))
from pywebbench.store import Store  # noqa: E402
from test_store import make_run  # noqa: E402


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return command([*args], timeout=120)


def test_runs_and_export(tmp_path: Path) -> None:
    res = tmp_path / "res"
    with Store(res / "pywebbench.sqlite") as store:
        first = make_run(store)
        second = make_run(store)
    out = cli("runs", "--results-dir", str(res))
    assert out.returncode == 0 and first in out.stdout and second in out.stdout
    assert "2/0/2" in out.stdout  # cells ok/failed/all
    # a prefix of the first run's id only it has (two runs made in the same second share
    # their first 16 characters, and then 2 more hex digits 1 time in 256)
    prefix = next(first[:n] for n in range(18, len(first) + 1) if not second.startswith(first[:n]))
    doc = json.loads(cli("export", prefix, "--results-dir", str(res)).stdout)
    assert [r["id"] for r in doc["runs"]] == [first]
    latest = json.loads(cli("export", "--results-dir", str(res)).stdout)
    assert [r["id"] for r in latest["runs"]] == [second]
    target = tmp_path / "cells.csv"
    out = cli(
        "export",
        first,
        second,
        "--format",
        "csv",
        "--table",
        "cells",
        "-o",
        str(target),
        "--results-dir",
        str(res),
    )
    assert out.returncode == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(rows) == 4 and {r["run_id"] for r in rows} == {first, second}


def test_clear_errors(tmp_path: Path) -> None:
    out = cli("runs", "--results-dir", str(tmp_path / "none"))
    assert out.returncode == 2 and "no results store" in out.stderr
    out = cli("export", "nope", "--results-dir", str(tmp_path / "none"))
    assert out.returncode == 2 and "no results store" in out.stderr
    with Store(tmp_path / "res" / "pywebbench.sqlite") as store:
        make_run(store)
    out = cli("export", "nope", "--results-dir", str(tmp_path / "res"))
    assert out.returncode == 2 and "no run 'nope'" in out.stderr
    out = cli("run", "--resume", "--results-dir", str(tmp_path / "empty"))
    assert out.returncode == 2 and "--resume" in out.stderr
    out = cli("run", "--resume", "-c", "4", "--results-dir", str(tmp_path / "res"))
    assert out.returncode == 2 and "drop the other study options" in out.stderr
    out = cli("run", "--server", "no-such-server", "--dry-run", "--results-dir", str(tmp_path))
    assert out.returncode == 2 and "--server 'no-such-server' matches nothing" in out.stderr
    out = cli("run", "--python", "no-such-python", "--results-dir", str(tmp_path / "py"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "matrix.interpreters: --python no-such-python: unknown interpreter" in out.stderr
    assert not (tmp_path / "py").exists()
    out = cli("run", "--path", "/x", "--dry-run")
    assert out.returncode == 2 and "need --app" in out.stderr


def test_dry_run_lists_the_quick_matrix(tmp_path: Path) -> None:
    out = cli("run", "--dry-run", "--results-dir", str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.startswith("  ")]
    cells = [ln for ln in lines if ln.endswith(" c64")]
    servers = {c.split("/")[1].split(" ")[0] for c in cells}
    frameworks = {c.split("/")[2].split("@")[0].split(" ")[0] for c in cells}
    workloads = {c.split(" ")[1] for c in cells}
    assert len(servers) >= 4 and len(frameworks) >= 3 and workloads == {"hello", "cpu"}
    # each interpreter's processes, and the rounds a group plans beyond its budget
    # (CPython's and PyPy's stacks: PyPy is part of the suite's set-up)
    plan = " ".join(out.stdout.split())
    assert "2 interleaved groups (4 server processes a stack, 3 on PyPy), 10.0 min" in plan
    assert "the rounds they plan at least come to 12.6 min or more" in plan
    assert not (tmp_path / "res").exists()  # a dry run writes nothing


def test_dry_run_says_which_cells_take_the_per_cell_path_and_why(tmp_path: Path) -> None:
    """An interleaved study names what keeps cells out of its groups, with a count each; the
    quick study's cells all fit in groups, and so do a connection per request's and h2c's
    (issue 64 item 2: a group of their own, a group being one load point)."""
    res = str(tmp_path / "res")
    quick = cli("run", "--dry-run", "--results-dir", res)
    assert quick.returncode == 0, quick.stderr
    assert "per-cell path" not in quick.stdout
    hello = ("--workload", "hello", "--python", "cpython3.11")
    closing = cli(
        "run", "--dry-run", "--results-dir", res, *hello, "--connection-mode", "keepalive,close"
    )
    assert closing.returncode == 0, closing.stderr
    assert "per-cell path" not in closing.stdout
    assert "2 interleaved groups" in closing.stdout  # keep-alive's and close's
    h2c = cli("run", "--dry-run", "--results-dir", res, *hello, "--protocol", "http1,h2c")
    assert h2c.returncode == 0, h2c.stderr
    assert "per-cell path" not in h2c.stdout
    assert "2 interleaved groups" in h2c.stdout  # HTTP/1.1's and h2c's
    deep = cli("run", "--dry-run", "--results-dir", res, *hello, "--warmup", "deep")
    assert deep.returncode == 0, deep.stderr
    (line,) = [ln for ln in deep.stdout.splitlines() if "per-cell path" in ln]
    assert "--warmup deep: a warm-up of each server of its own" in line
    cells = [ln for ln in deep.stdout.splitlines() if ln.endswith(" hello c64")]
    assert cells and f"per-cell path {len(cells)} cell(s)" in line
