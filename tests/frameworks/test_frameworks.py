"""Every built-in framework, every workload, under CPython and PyPy, on real servers.

Services are real (redis-server, PostgreSQL 15, started by ``start_services``); apps run
under waitress (WSGI), uvicorn (ASGI) or their own server (tornado, aiohttp, socketify).
"""

from __future__ import annotations

import pytest
from apprunner import APPS, group_members, interpreters, run_app
from pywebbench.catalogue.base import ASGI, WSGI
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.workloads import HTTP_WORKLOADS, WORKLOADS, WS_WORKLOADS
from pywebbench.verify import verify
from pywebbench.verify.websocket import verify_ws

INTERPRETERS = interpreters()
CASES = [
    pytest.param(interp, fw, id=f"{interp.name}-{fw.name}")
    for interp in INTERPRETERS
    for fw in FRAMEWORKS.values()
    if fw.unavailable(interp) is None
]


NATIVE = [name for name, fw in FRAMEWORKS.items() if fw.interface not in (WSGI, ASGI)]


def test_catalogue_shape() -> None:
    """Every framework the registry found (none is listed here): its app module is in the
    apps directory, it implements every HTTP workload (and ws-echo: exactly the ASGI apps with
    a WebSocket route), its pins are exact."""
    assert FRAMEWORKS and NATIVE
    with_ws = {"raw-asgi", "starlette", "fastapi"}
    for fw in FRAMEWORKS.values():
        assert (APPS / (fw.app.split(":")[0] + ".py")).is_file(), fw.name
        want = HTTP_WORKLOADS | (WS_WORKLOADS if fw.name in with_ws else frozenset())
        assert fw.workloads == want, fw.name
        for interp in INTERPRETERS:
            reqs = fw.requirements(interp)
            assert all("==" in r for r in reqs), (fw.name, reqs)  # exact pins only


@pytest.mark.parametrize("interp, fw", CASES)
def test_every_workload(interp, fw, framework_env, services, tmp_path) -> None:
    env = framework_env(interp)
    failures = []
    with run_app(env, fw, tmp_path, services) as url:
        for name in sorted(fw.workloads):
            if WORKLOADS[name].websocket:  # ws-echo: each echo checked
                problems, _ = verify_ws(url, WORKLOADS[name])
                failures += problems
                continue
            report = verify(url, WORKLOADS[name])
            if not report.ok:
                failures.append(report.summary())
    log = "\n".join(p.read_text()[-1500:] for p in tmp_path.glob("*.log"))
    assert not failures, "\n".join(failures) + "\n--- server log ---\n" + log


def test_hello_needs_no_services(framework_env, tmp_path) -> None:
    """A hello-only run needs no redis or database; a services workload then says why (503)."""
    interp = INTERPRETERS[0]
    for name in ("flask", "starlette"):
        with run_app(framework_env(interp), FRAMEWORKS[name], tmp_path) as url:
            assert verify(url, WORKLOADS["hello"]).ok
            report = verify(url, WORKLOADS["redis"])
            assert not report.ok
            assert any("status 503" in p and "PWB_REDIS_URL" in p for p in report.problems)


@pytest.mark.parametrize("name", NATIVE)
def test_native_workers(name, framework_env, tmp_path) -> None:
    """``--workers 2`` forks in the server's process group; all of it stops with the group."""
    interp = INTERPRETERS[0]
    with run_app(framework_env(interp), FRAMEWORKS[name], tmp_path, {}, ["--workers", "2"]) as url:
        assert len(group_members(url.pgid)) >= 2
        for _ in range(4):
            assert verify(url, WORKLOADS["hello"]).ok
    assert not group_members(url.pgid)


def test_native_rejects_non_loopback_host(framework_env) -> None:
    import subprocess

    env = framework_env(INTERPRETERS[0])
    done = subprocess.run(
        [str(env.python), str(APPS / "pwb_native_aiohttp.py"), "--host", "0.0.0.0", "--port", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "loopback" in done.stderr


def test_socketify_binds_at_once_on_pypy_with_a_small_nursery(framework_env, tmp_path) -> None:
    """socketify frees the host string of its bind before uSockets reads it, once PyPy's
    minor collection runs in between: with a nursery sized from a 1 MB cache, 3 of 14
    launches failed all three tries. Started five times with a 64 KB nursery, the app must
    bind on its first port every time (inside/launchers/launch_common.py)."""
    pypy = [i for i in INTERPRETERS if i.is_pypy]
    assert pypy, "PyPy is needed here (scripts/setup.sh installs it)"
    env = framework_env(pypy[0])
    for k in range(5):
        mine = tmp_path / str(k)
        mine.mkdir()
        with run_app(env, FRAMEWORKS["socketify"], mine, {"PYPY_GC_NURSERY": "64KB"}) as url:
            assert verify(url, WORKLOADS["hello"]).ok
        assert len(list(mine.glob("*.log"))) == 1, "a bind failed: " + " ".join(
            p.read_text()[-300:] for p in mine.glob("*.log")
        )
