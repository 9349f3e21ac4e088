"""Every built-in framework, every workload, under CPython and PyPy, on real servers.

Services are real (redis-server, PostgreSQL 15, started by ``start_services``); apps run
under waitress (WSGI), uvicorn (ASGI) or their own server (tornado, aiohttp, socketify).
"""

from __future__ import annotations

import pytest
from apprunner import interpreters, run_app
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.workloads import WORKLOADS
from pywebbench.verify import verify

INTERPRETERS = interpreters()
CASES = [
    pytest.param(interp, fw, id=f"{interp.name}-{fw.name}")
    for interp in INTERPRETERS
    for fw in FRAMEWORKS.values()
    if fw.unavailable(interp) is None
]


def test_catalogue_shape() -> None:
    names = set(FRAMEWORKS)
    must = {"raw-wsgi", "raw-asgi", "flask", "bottle", "pyramid", "django", "falcon",
            "starlette", "fastapi", "werkzeug", "tornado", "aiohttp", "socketify"}  # fmt: skip
    assert must <= names
    for fw in FRAMEWORKS.values():
        assert fw.workloads == frozenset(WORKLOADS), fw.name
        for interp in INTERPRETERS:
            reqs = fw.requirements(interp)
            assert all("==" in r for r in reqs), (fw.name, reqs)  # exact pins only


@pytest.mark.parametrize("interp, fw", CASES)
def test_every_workload(interp, fw, framework_env, services, tmp_path) -> None:
    env = framework_env(interp)
    failures = []
    with run_app(env, fw, tmp_path, services) as url:
        for name in sorted(fw.workloads):
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
