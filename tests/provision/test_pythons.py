"""Installing interpreters that are not here: version requests, uv (faked: its downloads come
from outside the registries), the cached source build of a free-threaded CPython, and the
one-line refusal when nothing is allowed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pywebbench.catalogue import interpreters as I
from pywebbench.catalogue.base import Interpreter, Stack
from pywebbench.catalogue.frameworks import frameworks
from pywebbench.catalogue.servers import adapters
from pywebbench.provision import pythons as P


def test_version_requests() -> None:
    assert P.parse_request("3.13") == P.PythonRequest("cpython", "3.13", False)
    assert P.parse_request("3.14t") == P.PythonRequest("cpython", "3.14", True)
    assert P.parse_request("cpython3.12") == P.PythonRequest("cpython", "3.12", False)
    assert P.parse_request("cpython3.13t").name == "cpython3.13t"  # type: ignore[union-attr]
    assert P.parse_request("pypy3.10") == P.PythonRequest("pypy", "3.10", False)
    for not_a_version in ("pypy3.10t", "flask", "3", "/usr/bin/python3", "3.13.1"):
        assert P.parse_request(not_a_version) is None, not_a_version


def test_configure_flags_no_pgo_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PWB_PYTHON_PGO", raising=False)
    ft = P.configure_flags(P.PythonRequest("cpython", "3.13", True))
    assert "--disable-gil" in ft and "--enable-optimizations" not in ft
    assert "--disable-gil" not in P.configure_flags(P.PythonRequest("cpython", "3.13", False))
    monkeypatch.setenv("PWB_PYTHON_PGO", "1")
    pgo = P.configure_flags(P.PythonRequest("cpython", "3.13", True))
    assert {"--enable-optimizations", "--with-lto"} <= set(pgo)
    assert P.build_dir_name("3.13.5", ft) == "cpython-3.13.5t"
    assert P.build_dir_name("3.13.5", pgo) == "cpython-3.13.5t-pgo"


def _pywebbench(
    args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pywebbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
    )


def test_refusal_is_one_line_exit_2(tmp_path: Path) -> None:
    """No network, no cached source: ``--python 3.14`` says what was tried and what to do."""
    env = {"PWB_CACHE_DIR": str(tmp_path), "PWB_OFFLINE": "1"}
    args = ["run", "--server", "gunicorn-gthread", "--framework", "raw-wsgi"]
    res = _pywebbench([*args, "--python", "3.14", "--results-dir", str(tmp_path / "results")], env)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: matrix.interpreters: --python 3.14: "), lines[0]
    assert "tried uv (offline" in lines[0]
    assert "a source build (no cached source" in lines[0] and "docs/interpreters.md" in lines[0]
    assert not (tmp_path / "results").exists()  # nothing half-written
    res = _pywebbench(
        [*args, "--python", "3.14t"], {"PWB_CACHE_DIR": str(tmp_path), "PWB_PYTHON_INSTALL": "none"}
    )
    assert res.returncode == 2 and "not allowed by PWB_PYTHON_INSTALL" in res.stderr
    res = _pywebbench([*args, "--python", "pypy3.10"], env)  # not the installed PyPy 3.9
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "PyPy is not installed by pywebbench" in res.stderr


def _fake_uv(tmp_path: Path, answer: Path, fail_install: str = "") -> Path:
    """A ``uv`` that records its calls and answers ``python find`` with ``answer``."""
    log = tmp_path / "uv-calls.jsonl"
    script = tmp_path / "uv"
    script.write_text(
        f"""#!{sys.executable}
import json, os, sys
with open({str(log)!r}, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "dir": os.environ.get("UV_PYTHON_INSTALL_DIR"),
                        "downloads": os.environ.get("UV_PYTHON_DOWNLOADS")}}) + "\\n")
if sys.argv[1:3] == ["python", "install"] and {fail_install!r}:
    sys.stderr.write({fail_install!r} + "\\n")
    sys.exit(2)
if sys.argv[1:3] == ["python", "find"]:
    print({str(answer)!r})
"""
    )
    script.chmod(0o755)
    return script


def test_uv_install_with_a_faked_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "managed" / "bin" / "python3.14t"
    python.parent.mkdir(parents=True)
    python.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setenv("PWB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PWB_UV", str(_fake_uv(tmp_path, python)))
    monkeypatch.setenv("PWB_PYTHON_INSTALL", "uv")
    monkeypatch.delenv("PWB_OFFLINE", raising=False)
    assert P.install("3.14t") == str(python)
    calls = [json.loads(line) for line in (tmp_path / "uv-calls.jsonl").read_text().splitlines()]
    assert calls[0]["argv"] == ["python", "install", "3.14t"]
    assert calls[1]["argv"][:2] == ["python", "find"] and calls[1]["argv"][-1] == "3.14t"
    assert calls[0]["dir"] == str(tmp_path / "cache" / "pythons" / "uv")
    assert calls[0]["downloads"] == "automatic"


def test_uv_failure_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWB_CACHE_DIR", str(tmp_path / "cache"))
    uv = _fake_uv(tmp_path, tmp_path / "none", fail_install="error: network unreachable")
    monkeypatch.setenv("PWB_UV", str(uv))
    monkeypatch.setenv("PWB_PYTHON_INSTALL", "uv")
    monkeypatch.delenv("PWB_OFFLINE", raising=False)
    with pytest.raises(I.InterpreterError, match=r"uv \(uv install failed: error: network"):
        P.install("3.14")


def _facts(version: str, free_threaded: bool) -> I.Facts:
    return {
        "implementation": "cpython",
        "version": version,
        "version_info": [int(x) for x in version.split(".")],
        "executable": f"/opt/{version}{'t' if free_threaded else ''}/bin/python3",
        "build": "main",
        "free_threaded": free_threaded,
    }


def test_free_threaded_and_gil_builds_never_share_a_name_or_match() -> None:
    gil, ft = I.assign_names([(_facts("3.13.0", False), "pyenv"), (_facts("3.13.5", True), "x")])
    assert (gil.name, ft.name) == ("cpython3.13", "cpython3.13t")
    assert ft.free_threaded and not gil.free_threaded
    assert I.match("3.13", [gil, ft]) == [gil]
    assert I.match("3.13t", [gil, ft]) == [ft]
    assert I.match("cpython3.13t", [gil, ft]) == [ft]
    server, framework = adapters()["gunicorn-gthread"], frameworks()["raw-wsgi"]
    keys = {Stack(i, server, framework, ()).env_key() for i in (gil, ft)}
    assert len(keys) == 2  # never one venv


def test_what_fails_on_313t_is_declared_for_313t_only() -> None:
    """The catalogue's free-threaded declarations (measured by
    benchmarks/free_threaded_catalogue.py on 3.13.5t) hold for that version's free-threaded
    build only: not for its GIL build, nor for 3.14t, which was not measured."""
    servers, fws = adapters(), frameworks()
    ft313, gil313, ft314 = (
        Interpreter(n, "cpython", v, "/x", free_threaded=ft)
        for n, v, ft in (("a", "3.13.5", True), ("b", "3.13.5", False), ("c", "3.14.0", True))
    )
    declared = {
        name: server.unavailable(ft313)
        for name, server in servers.items()
        if server.unavailable(ft313) and not server.unavailable(gil313)
    }
    assert set(declared) == {
        "daphne", "eventlet", "gevent-pywsgi", "gunicorn-gevent", "socketify-asgi",
        "socketify-native", "socketify-wsgi", "uwsgi",
    }  # fmt: skip
    assert all(servers[n].unavailable(ft314) is None for n in declared)
    assert "PyO3 does not support" in str(fws["fastapi"].unavailable(ft313))
    assert fws["fastapi"].unavailable(gil313) is None and fws["fastapi"].unavailable(ft314) is None
    assert fws["flask"].unavailable(ft313) is None


def test_granian_on_313t_is_pinned_to_a_release_with_a_313t_wheel() -> None:
    granian = adapters()["granian-wsgi"]
    interps = {
        name: Interpreter(name, "cpython", version, "/x", free_threaded=ft)
        for name, version, ft in (
            ("cpython3.13t", "3.13.5", True),
            ("cpython3.14t", "3.14.0", True),
            ("cpython3.13", "3.13.0", False),
        )
    }
    assert all(granian.unavailable(i) is None for i in interps.values())
    with_gil = I.with_gil(interps["cpython3.13t"], "1")
    assert "refuses to start with the GIL on" in str(granian.unavailable(with_gil))
    assert granian.requirements(interps["cpython3.13t"]) == ["granian==2.7.9"]
    assert granian.requirements(interps["cpython3.13"]) == ["granian==2.8.7"]
    assert granian.requirements(interps["cpython3.14t"]) == ["granian==2.8.7"]


@pytest.fixture(scope="session")
def built_313t() -> str:
    """CPython 3.13t built from Debian's source package, once per cache (minutes the first
    time; the cache, ``$PWB_CACHE_DIR/pythons``, is kept)."""
    return str(P.build_from_source(P.PythonRequest("cpython", "3.13", True), print))


def test_source_build_is_free_threaded_recorded_and_discovered(built_313t: str) -> None:
    manifest = P.build_manifest(built_313t)
    assert manifest is not None
    assert "--disable-gil" in manifest["configure"]  # type: ignore[operator]
    assert "--enable-optimizations" not in manifest["configure"]  # type: ignore[operator]
    assert str(manifest["source"]).endswith(".orig.tar.xz")
    interp = I.find("3.13t")
    assert interp.free_threaded and interp.name == "cpython3.13t"
    assert os.path.samefile(interp.path, built_313t)  # python3.13 is a hard link to it
    assert [f for f in I.discover_all() if f.interpreter.free_threaded] == [
        I.Found(interp, "provisioned")
    ]  # one interpreter, not one per link
    assert interp.optimizations == ""  # no PGO, no LTO
    found = {f.interpreter.name: f.source for f in I.discover_all()}
    assert found["cpython3.13t"] == "provisioned"
    assert I.find("3.13").free_threaded is False
    again = P.build_from_source(P.PythonRequest("cpython", "3.13", True), print)
    assert str(again) == built_313t  # cached: nothing rebuilt


def test_gil_axis_names_and_refusal() -> None:
    gil, ft = I.assign_names([(_facts("3.13.0", False), "pyenv"), (_facts("3.13.5", True), "x")])
    assert I.split_gil("3.13t@gil1") == ("3.13t", "1")
    assert I.split_gil("cpython3.13t") == ("cpython3.13t", "")
    on = I.with_gil(ft, "1")
    assert (on.name, on.gil) == ("cpython3.13t@gil1", "1")
    assert I.find("3.13t@gil0", [gil, ft]).name == "cpython3.13t@gil0"
    with pytest.raises(I.InterpreterError, match="only on a free-threaded build"):
        I.find("3.13@gil1", [gil, ft])
    server, framework = adapters()["gunicorn-gthread"], frameworks()["raw-wsgi"]
    with_on, as_built = (Stack(i, server, framework, ()) for i in (on, ft))
    assert with_on.env_key() == as_built.env_key()  # one venv: the same interpreter
    assert with_on.name != as_built.name  # never one row


def _gil_reported(python: str, tmp_path: Path, gil: str = "") -> list[bool]:
    """Import the apps' common module in ``python`` as a server would; the GIL states its
    process wrote into PWB_RUNTIME_DIR."""
    from pywebbench.catalogue.base import APPS_DIR
    from pywebbench.launch.server import interpreter_env

    runtime = tmp_path / f"runtime-{len(list(tmp_path.iterdir()))}"
    runtime.mkdir()
    interp = Interpreter("x", "cpython", "3.13.5", python, free_threaded=True, gil=gil)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(APPS_DIR)}
    env.update(interpreter_env(interp, runtime))
    subprocess.run(
        [python, "-c", "import pwb_common, time; time.sleep(0.2)"], env=env, check=True, timeout=60
    )
    return [json.loads(p.read_text())["gil_enabled"] for p in runtime.glob("*.json")]


def test_the_server_process_reports_its_gil(built_313t: str, tmp_path: Path) -> None:
    assert _gil_reported(sys.executable, tmp_path) == [True]  # a GIL build: always on
    assert _gil_reported(built_313t, tmp_path) == [False]  # free-threaded, as built
    assert _gil_reported(built_313t, tmp_path, gil="1") == [True]  # PYTHON_GIL=1


def test_stacks_lists_what_runs_on_313t_and_why_not(built_313t: str) -> None:
    args = [
        "stacks",
        "--python",
        "3.13t",
        "--server",
        "granian-wsgi,gunicorn-gthread,gevent-pywsgi",
    ]
    res = _pywebbench([*args, "--framework", "raw-wsgi", "--json"], {})
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    (interp,) = doc["interpreters"]
    assert (interp["name"], interp["free_threaded"]) == ("cpython3.13t", True)
    by_server = {s["server"]: s for s in doc["stacks"]}
    assert by_server["gunicorn-gthread"]["available"]
    assert by_server["granian-wsgi"]["available"]
    assert not by_server["gevent-pywsgi"]["available"]
    assert "CFFI does not support the free-threaded build" in by_server["gevent-pywsgi"]["reason"]


def test_a_study_runs_on_313t_with_the_gil_axis(built_313t: str, tmp_path: Path) -> None:
    """granian (the newest release with a cp313t wheel) and gunicorn-gthread serve on the
    free-threaded build as built (GIL off); gunicorn-gthread with PYTHON_GIL=1 too (granian
    refuses it, and the catalogue says so before anything starts); the store says which ran
    with the GIL, per replicate, and the two variants are two rows of one build."""
    results = tmp_path / "results"
    res = _pywebbench(
        [
            "run", "--python", "3.13t,3.13t@gil1", "--server", "granian-wsgi,gunicorn-gthread",
            "--framework", "raw-wsgi", "--workload", "hello", "--replicates", "1",
            "--max-replicates", "1", "-d", "1", "-c", "8", "--warmup", "fixed",
            "--warmup-duration", "0.5", "--no-report", "--results-dir", str(results),
        ],
        {},
        timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    db = sqlite3.connect(results / "pywebbench.sqlite")
    rows = db.execute(
        "SELECT s.interpreter, s.server, s.interpreter_free_threaded, r.gil_enabled, c.status, "
        "(SELECT min(i.rps) FROM iterations i WHERE i.cell_id = c.id AND i.kind = 'measured') "
        "FROM replicates r JOIN cells c ON c.id = r.cell_id "
        "JOIN stacks s ON s.id = c.stack_id ORDER BY s.interpreter, s.server"
    ).fetchall()
    got = {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}
    assert got == {
        ("cpython3.13t", "granian-wsgi"): (1, 0, "ok"),
        ("cpython3.13t", "gunicorn-gthread"): (1, 0, "ok"),
        ("cpython3.13t@gil1", "gunicorn-gthread"): (1, 1, "ok"),
    }, rows
    assert all(r[5] and r[5] > 0 for r in rows)
