"""``pywebbench ab`` of a workload that needs a service: the service is started for the run,
as a study starts it, and its location reaches both sides' servers.

Without redis-server (or without ``PWB_REDIS_URL`` in the servers' environment) the redis
workload answers 500, so each side fails verification and ``ab`` exits 2 before any load.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pwbtest import pwb


def test_ab_of_the_redis_workload_starts_redis_for_both_sides(tmp_path: Path, census: str) -> None:
    """Two gunicorn workers models of one raw WSGI app, one process a side, short slices:
    a run of a few seconds in which every request of every slice reaches redis. A missing
    redis-server is a failure (scripts/setup.sh installs Debian's), not a skip."""
    assert shutil.which("redis-server"), "redis-server must be installed (scripts/setup.sh)"
    done = pwb(
        "ab", "--workload", "redis", "--framework", "raw-wsgi",
        "--base", "server=gunicorn-sync", "--change", "server=gunicorn-gthread", "-c", "4",
        "--budget", "6", "--warmup", "0.5", "--slice", "0.4", "--settle", "0.1",
        "--processes", "1", "--interference-limit", "1", "--no-core-speed",
        "--format", "json", "--output", str(tmp_path / "ab.json"), "--no-store",
        results=tmp_path / "results", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "starting services: redis" in done.stderr  # progress: the document is in a file
    doc: dict[str, Any] = json.loads((tmp_path / "ab.json").read_text())
    assert doc["errors"] == {"base": 0, "change": 0}
    sides = {s["side"] for s in doc["slices"] if s["requests"] > 0}
    assert sides == {"base", "change"}
    assert all(s["errors"] == 0 for s in doc["slices"])
