"""``pywebbench history`` and the report's history figure on real stored runs; the app's
git revision recorded for BYO runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from compare_study import STACK, StoredRuns, pwb
from pywebbench.run.host import git_revision


def test_history_lists_every_run_in_order(stored_runs: StoredRuns) -> None:
    proc = pwb("history", STACK, "-w", "cpu", "--format", "json", "--store", str(stored_runs.store))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["run"] for r in rows] == [stored_runs.a1, stored_runs.a2, stored_runs.slow]
    for r in rows:
        # n counts replicates, the CI's unit (each the median of its iterations)
        assert r["stack"] == STACK and r["load_point"] == "c8" and r["rps"]["n"] == 3
        assert r["interpreter_version"] and r["hostname"] and r["packages"]["gunicorn"]
        assert r["rps"]["ci_low"] <= r["rps"]["median"] <= r["rps"]["ci_high"]
    # fib(27) against fib(20), ~29x the work: a ratio near 0.05, and 0.5 was never reached
    # in 10^6 simulated draws at this machine's spread (the false-failure arithmetic is
    # tests/compare/test_compare_cmd.py::test_real_regression_fails_the_gate_and_names_the_cell)
    assert rows[2]["rps"]["median"] < rows[0]["rps"]["median"] / 2
    glob = pwb("history", "*/gunicorn-sync/*", "-w", "cpu", "--store", str(stored_runs.store))
    assert glob.returncode == 0 and glob.stdout.count(STACK) == 3
    missing = pwb("history", STACK, "-w", "json", "--store", str(stored_runs.store))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "STACK: no stored cell" in missing.stderr


def test_report_of_three_runs_has_a_history_figure(stored_runs: StoredRuns, tmp_path: Path) -> None:
    runs = [stored_runs.a1, stored_runs.a2, stored_runs.slow]
    proc = pwb("report", *runs, "--store", str(stored_runs.store), "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    html = next(tmp_path.glob("*.html")).read_text()
    assert "Requests/s run by run" in html and 'data-figure="history-cpu"' in html
    proc = pwb("report", *runs[:2], "--store", str(stored_runs.store), "-o", str(tmp_path / "2"))
    assert "history-cpu" not in next((tmp_path / "2").glob("*.html")).read_text()


def test_git_revision_of_a_checkout(tmp_path: Path) -> None:
    assert git_revision(tmp_path) is None
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "app.py").write_text("app = None\n")
    git("add", "app.py")
    git("commit", "-qm", "app")
    head = git("rev-parse", "HEAD")
    assert git_revision(tmp_path) == {"revision": head, "dirty": False}
    (tmp_path / "app.py").write_text("app = 1\n")
    assert git_revision(tmp_path) == {"revision": head, "dirty": True}
