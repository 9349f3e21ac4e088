"""A small WSGI app with several routes and a mix over them, for the tests of a study with a
traffic mix (docs/mix.md): tests/run/test_mix_study.py runs it, the report, store and
compare tests read what it stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from pwbtest import process_census, pwb
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.store import Store, Study

CPYTHON = default_interpreters()[0].name
#: Short windows, one replicate (no timing is asserted on them).
FAST = ["-d", "1", "--warmup", "fixed", "--warmup-duration", "0.5", "--python", CPYTHON]
ONE_REPLICATE = ["--replicates", "1", "--max-replicates", "1", "-c", "4"]

APP = """
def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/missing":
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"no"]
    if environ["REQUEST_METHOD"] == "POST":
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    body = path.encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
"""

#: Four endpoints (one with two concrete requests, a POST with a body, a 404 page).
MIX = """
[[request]]
name = "GET /"
weight = 50
path = "/"

[[request]]
name = "GET /items/{id}"
weight = 20
path = "/items/1"

[[request]]
name = "GET /items/{id}"
weight = 10
path = "/items/2?full=1"

[[request]]
name = "POST /search"
weight = 15
method = "POST"
path = "/search"
body = "q=x"

[[request]]
name = "GET /missing"
weight = 5
path = "/missing"
expect_status = [404]
"""
ENDPOINTS = ["GET /", "GET /items/{id}", "POST /search", "GET /missing"]
SHARES = {"GET /": 0.5, "GET /items/{id}": 0.3, "POST /search": 0.15, "GET /missing": 0.05}


def project(root: Path, mix: str = MIX) -> tuple[Path, Path]:
    """The app's project folder and the mix file, written under ``root``."""
    folder = root / "project"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mixapp.py").write_text(APP)
    mix_file = root / "mix.toml"
    mix_file.write_text(mix)
    return folder, mix_file


def app_args(folder: Path, mix_file: Path) -> list[str]:
    return ["--app", "mixapp:app", "--interface", "wsgi", "--project", str(folder),
            "--mix", str(mix_file)]  # fmt: skip


def run_study(root: Path, results: Path, *extra: str, said: list[str] | None = None) -> Study:
    """``pywebbench run`` of the app with the mix (``extra``: servers, design, ...); the
    stored study, every cell ok. Its console output is appended to ``said``, if given."""
    folder, mix_file = project(root)
    proc = pwb("run", *app_args(folder, mix_file), *extra, results=results, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if said is not None:
        said.append(proc.stdout)
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    assert study.cells and all(c.status == "ok" for c in study.cells), [
        (c.key, c.failure_reason) for c in study.cells
    ]
    return study


#: The session's stored mix study (:func:`shared_study`), made once.
_SHARED: dict[str, Path] = {}


def shared_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store of one short per-cell study of the app with the mix on gunicorn-sync,
    made by the first test module of the session that asks (every process it started
    checked gone) and read by the others: the store, report and compare tests of a mix."""
    if "store" not in _SHARED:
        root = tmp_path_factory.mktemp("mix-study")
        with process_census():
            run_study(
                root, root / "res", "--server", "gunicorn-sync", "--design", "sequential",
                *FAST, *ONE_REPLICATE, "--iterations", "2", "--no-report",
            )  # fmt: skip
        _SHARED["store"] = root / "res" / "pywebbench.sqlite"
    return _SHARED["store"]
