"""`pywebbench stacks`: the catalogue table/JSON with availability and reasons."""

from __future__ import annotations

import json

from click.testing import CliRunner
from pywebbench.cli import cli


def _run(*args: str):
    return CliRunner().invoke(cli, ["stacks", *args], catch_exceptions=False)


def test_stacks_json_declares_pypy_incompatibilities() -> None:
    res = _run("--server", "uvicorn-*", "--framework", "raw-asgi", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {i["implementation"] for i in doc["interpreters"]} == {"cpython", "pypy"}
    rows = {(s["interpreter"], s["server"]): s for s in doc["stacks"]}
    uvloop = [s for (i, srv), s in rows.items() if "uvloop" in srv and i.startswith("pypy")]
    assert uvloop, f"no uvloop server in {sorted(rows)}"
    for s in uvloop:
        assert s["available"] is False
        assert "uvloop" in s["reason"]
    cpy = [s for (i, srv), s in rows.items() if i.startswith("cpython")]
    assert cpy and all(s["available"] for s in cpy)
    assert all(s["requirements"] and s["env_key"] for s in cpy)


def test_stacks_table_shows_reasons() -> None:
    res = _run("--server", "uvicorn-*", "--framework", "raw-asgi")
    assert res.exit_code == 0, res.output
    assert "Interpreters" in res.output and "pypy3.9" in res.output
    assert "Why not:" in res.output and "uvloop" in res.output
    assert "stacks available" in res.output


def test_stacks_bad_filter_names_flag_and_choices() -> None:
    res = CliRunner().invoke(cli, ["stacks", "--server", "nginx-nope"])
    assert res.exit_code == 2
    assert "--server 'nginx-nope' matches nothing" in res.output
    assert "gunicorn" in res.output  # lists valid names
    res = CliRunner().invoke(cli, ["stacks", "--python", "jython"])
    assert res.exit_code == 2
    assert "--python" in res.output and "cpython" in res.output


def test_stacks_all_interpreters_lists_skipped_ones() -> None:
    res = _run("--python", "all", "--server", "waitress", "--framework", "raw-wsgi")
    assert res.exit_code == 0, res.output
    assert "cpython3.13" in res.output and "pypy3.9" in res.output
    assert "skipped:" in res.output and "Python < 3.9" in res.output
