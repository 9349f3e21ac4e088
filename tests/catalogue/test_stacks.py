"""Stack planning: interface matching, union of requirements, declared unavailability."""

from __future__ import annotations

import pytest
from pywebbench.catalogue import interpreters as I
from pywebbench.catalogue.base import ASGI, WSGI, Framework, Interpreter, ServerAdapter
from pywebbench.catalogue.stacks import plan, requirement_name, select_names


class _Server(ServerAdapter):
    def __init__(self, name: str, interface: str, reqs: list[str], why: str | None = None):
        self.name = name
        self.interface = interface
        self._reqs = reqs
        self._why = why

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return self._reqs

    def unavailable(self, interpreter: Interpreter) -> str | None:
        return self._why if interpreter.is_pypy else None


class _Framework(Framework):
    def __init__(self, name: str, interface: str, reqs: list[str], workloads: set[str]):
        self.name = name
        self.interface = interface
        self.app = f"pwb_{name}:app"
        self._reqs = reqs
        self.workloads = frozenset(workloads)

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return self._reqs


@pytest.fixture(scope="module")
def interps() -> list[Interpreter]:
    d = I.default_interpreters()
    assert any(i.is_pypy for i in d)
    return d


def test_interfaces_match_and_requirements_union(interps) -> None:
    wsgi_srv = _Server("w", WSGI, ["gunicorn==23.0.0", "jinja2==3.1.6"])
    asgi_srv = _Server("a", ASGI, ["uvicorn==0.30.0"])
    native = _Server("tornado", "tornado", ["tornado==6.4"])
    flask = _Framework("flask", WSGI, ["flask==3.1.3", "jinja2==3.1.6"], {"hello", "json"})
    star = _Framework("starlette", ASGI, ["starlette==0.49.3"], {"hello"})
    tfw = _Framework("tornado", "tornado", ["tornado==6.4"], {"hello"})
    cands = plan(interps, [wsgi_srv, asgi_srv, native], [flask, star, tfw])
    pairs = {(c.server.name, c.framework.name) for c in cands}
    assert pairs == {("w", "flask"), ("a", "starlette"), ("tornado", "tornado")}
    assert len(cands) == 3 * len(interps)
    c = next(c for c in cands if c.framework.name == "flask")
    assert c.available and c.stack is not None
    assert c.stack.requirements == ("flask==3.1.3", "jinja2==3.1.6", "gunicorn==23.0.0")
    assert c.workloads == ("hello", "json")
    t = next(c for c in cands if c.framework.name == "tornado")
    assert t.stack is not None and t.stack.requirements == ("tornado==6.4",)


def test_pypy_incompatibilities_declared(interps) -> None:
    uvloop_srv = _Server("uvicorn-uvloop", ASGI, ["uvicorn==0.30.0", "uvloop==0.21.0"])
    declared = _Server("pyuwsgi", WSGI, ["pyuwsgi"], why="does not compile on PyPy")
    orjson_fw = _Framework("fastjson", ASGI, ["orjson==3.10.0"], {"json"})
    plain_fw = _Framework("raw-wsgi", WSGI, [], {"hello"})
    raw_asgi = _Framework("raw-asgi", ASGI, [], {"hello"})
    cands = plan(interps, [uvloop_srv, declared], [orjson_fw, plain_fw, raw_asgi])
    by = {(c.interpreter.is_pypy, c.server.name, c.framework.name): c for c in cands}
    assert by[(False, "uvicorn-uvloop", "raw-asgi")].available
    pypy_uvloop = by[(True, "uvicorn-uvloop", "raw-asgi")]
    assert not pypy_uvloop.available and pypy_uvloop.stack is None
    assert "uvloop" in (pypy_uvloop.unavailable or "")
    assert "orjson" in (by[(True, "uvicorn-uvloop", "fastjson")].unavailable or "")
    assert "does not compile" in (by[(True, "pyuwsgi", "raw-wsgi")].unavailable or "")
    assert by[(False, "pyuwsgi", "raw-wsgi")].available


def test_workload_filter(interps) -> None:
    srv = _Server("w", WSGI, [])
    fw = _Framework("f", WSGI, [], {"hello", "json"})
    cands = plan(interps[:1], [srv], [fw], workloads=["json,cpu"])
    assert cands[0].workloads == ("json",)
    cands = plan(interps[:1], [srv], [fw], workloads=["cpu"])
    assert not cands[0].available and "none of the workloads" in (cands[0].unavailable or "")
    with pytest.raises(ValueError, match="--workload 'nosuch' matches nothing; valid: hello"):
        plan(interps[:1], [srv], [fw], workloads=["nosuch"])


def test_select_names_globs_and_errors() -> None:
    names = ["gunicorn-sync", "gunicorn-gthread", "uvicorn-h11"]
    assert select_names(["gunicorn-*"], names, "--server") == names[:2]
    # the user's order (a study runs --workload json,hello json first), globs in registry order
    assert select_names(["uvicorn-h11,gunicorn-sync"], names, "--server") == [
        "uvicorn-h11",
        "gunicorn-sync",
    ]
    assert select_names(["uvicorn-*", "gunicorn-*,uvicorn-h11"], names, "--server") == [
        "uvicorn-h11",
        "gunicorn-sync",
        "gunicorn-gthread",
    ]
    with pytest.raises(ValueError, match="--server 'nginx' matches nothing; valid: gunicorn-sync"):
        select_names(["nginx"], names, "--server")


def test_requirement_name() -> None:
    assert requirement_name("Uvicorn[standard]>=0.30; python_version>'3.8'") == "uvicorn"
    assert requirement_name("pydantic_core==2.33.2") == "pydantic-core"
