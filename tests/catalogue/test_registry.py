"""The catalogue's registries find their members by themselves, and every member is linked
to what runs inside the stack's venv (launcher script, app module) by its own attributes."""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pywebbench.catalogue.base import (
    APPS_DIR,
    LAUNCHERS_DIR,
    WSGI,
    Interpreter,
    LaunchContext,
    ServerAdapter,
)
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.pintable import main as pintable_main
from pywebbench.catalogue.pintable import server_pin_table, table_in, with_table
from pywebbench.catalogue.registry import (
    ADAPTER_ATTRIBUTE,
    CatalogueError,
    discover,
    plugin_names,
)
from pywebbench.catalogue.servers import ADAPTERS
from pywebbench.catalogue.servers._base import BaseAdapter, launcher_path

CTX = LaunchContext(
    interpreter=Interpreter("cpython3.12", "cpython", "3.12.0", "/usr/bin/python3.12"),
    venv=Path("/nonexistent/venv"),
    app_dir=APPS_DIR,
    app="mod:app",
    host="127.0.0.1",
    port=12345,
)


def public_modules(package: str) -> list[str]:
    pkg = importlib.import_module(package)
    return [i.name for i in pkgutil.iter_modules(pkg.__path__) if not i.name.startswith("_")]


def test_every_module_is_registered_once() -> None:
    """servers/ and frameworks/: one public module, one member; nothing is listed by hand."""
    for package, registry, attr in (
        ("pywebbench.catalogue.servers", ADAPTERS, "ADAPTER"),
        ("pywebbench.catalogue.frameworks", FRAMEWORKS, "FRAMEWORK"),
    ):
        modules = public_modules(package)
        members = [getattr(importlib.import_module(f"{package}.{m}"), attr) for m in modules]
        assert sorted(m.name for m in members) == sorted(registry), package
        assert all(registry[m.name] is m for m in members)


def test_adapters_name_their_launcher_and_every_launcher_is_used() -> None:
    """An adapter started from Python names its launcher module (the file exists); every
    launch_*.py belongs to an adapter; each server-specific option an adapter passes is
    declared by that launcher (so each such constant lives in the adapter only)."""
    used = set()
    for adapter in ADAPTERS.values():
        launcher = getattr(adapter, "launcher", None)
        if launcher is None:
            continue
        path = launcher_path(launcher)
        assert path.is_file(), (adapter.name, path)
        used.add(path.name)
        source = path.read_text()
        assert "import pywebbench" not in source and "from pywebbench" not in source
        if isinstance(adapter, BaseAdapter):
            for flag in adapter.launcher_options(CTX):
                assert f'"{flag}"' in source, (adapter.name, flag, path.name)
    on_disk = {p.name for p in LAUNCHERS_DIR.glob("launch_*.py")} - {"launch_common.py"}
    assert on_disk == used


def test_frameworks_name_their_app_and_every_app_is_used() -> None:
    used = set()
    for fw in FRAMEWORKS.values():
        module = fw.app.split(":", 1)[0]
        path = APPS_DIR / f"{module}.py"
        assert path.is_file(), (fw.name, path)
        used.add(path.name)
    on_disk = {p.name for p in APPS_DIR.glob("pwb_*.py")} - {"pwb_common.py"}
    assert on_disk == used


def test_inside_code_never_imports_pywebbench_and_parses_on_39() -> None:
    """What runs in a stack's venv: no pywebbench import, valid Python 3.9 syntax."""
    import ast

    for path in [*APPS_DIR.glob("*.py"), *LAUNCHERS_DIR.glob("*.py")]:
        source = path.read_text()
        ast.parse(source, filename=str(path), feature_version=(3, 9))
        assert not re.search(r"^\s*(from|import) pywebbench", source, re.M), path


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on sys.path for throwaway plugin modules (removed afterwards)."""
    sys.path.insert(0, str(tmp_path))
    before = set(sys.modules)
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in set(sys.modules) - before:
            if name.startswith("pwbreg_"):
                del sys.modules[name]


SERVER_PLUGIN = """
from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.servers.waitress import Waitress

class Renamed(Waitress):
    name = {name!r}

ADAPTER = Renamed()
"""


def test_plugins_join_the_registry(plugin_dir: Path) -> None:
    (plugin_dir / "pwbreg_extra.py").write_text(SERVER_PLUGIN.format(name="waitress-too"))
    found = discover("pywebbench.catalogue.servers", ADAPTER_ATTRIBUTE, ServerAdapter,
                     plugins=["pwbreg_extra"])  # fmt: skip
    assert "waitress-too" in found and set(ADAPTERS) < set(found)
    wsgi = [n for n, a in found.items() if a.interface == WSGI]
    assert list(found)[: len(wsgi)] == sorted(wsgi)  # WSGI first, by name


def test_plugin_errors_are_clear(plugin_dir: Path) -> None:
    (plugin_dir / "pwbreg_clash.py").write_text(SERVER_PLUGIN.format(name="waitress"))
    (plugin_dir / "pwbreg_empty.py").write_text("X = 1\n")
    (plugin_dir / "pwbreg_broken.py").write_text("raise RuntimeError('boom')\n")
    (plugin_dir / "pwbreg_wrong.py").write_text("ADAPTER = object()\n")
    cases = {
        "pwbreg_clash": "server name 'waitress' is already taken by "
        "pywebbench.catalogue.servers.waitress",
        "pwbreg_empty": "defines neither ADAPTER nor FRAMEWORK",
        "pwbreg_broken": "cannot import 'pwbreg_broken': RuntimeError: boom",
        "pwbreg_wrong": "ADAPTER is not a ServerAdapter instance",
        "pwbreg_missing": "cannot import 'pwbreg_missing'",
    }
    for module, message in cases.items():
        with pytest.raises(CatalogueError, match=re.escape(message)) as info:
            discover("pywebbench.catalogue.servers", ADAPTER_ATTRIBUTE, ServerAdapter,
                     plugins=[module])  # fmt: skip
        assert "\n" not in str(info.value)
        assert module == "pwbreg_clash" or str(info.value).startswith("PYWEBBENCH_PLUGINS")


def test_builtin_module_without_member_is_an_error(plugin_dir: Path) -> None:
    package = plugin_dir / "pwbreg_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_shared.py").write_text("")  # private: skipped
    (package / "lonely.py").write_text("NOT_AN_ADAPTER = 1\n")
    with pytest.raises(CatalogueError, match="pwbreg_pkg.lonely defines no ADAPTER"):
        discover("pwbreg_pkg", ADAPTER_ATTRIBUTE, ServerAdapter, plugins=())


def test_plugin_names_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYWEBBENCH_PLUGINS", " a.b, ,c,a.b ")
    assert plugin_names() == ["a.b", "c"]
    assert plugin_names("") == []


def test_docs_pin_table_is_the_catalogue(tmp_path: Path) -> None:
    """docs/servers.md shows exactly the built-in adapters' pins; the command rewrites it."""
    page = Path(__file__).resolve().parents[2] / "docs" / "servers.md"
    text = page.read_text()
    assert table_in(text) == server_pin_table(), (
        "docs/servers.md pin table is stale: python -m pywebbench.catalogue.pintable "
        "docs/servers.md"
    )
    rows = server_pin_table().splitlines()[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == list(ADAPTERS)
    stale = tmp_path / "servers.md"
    stale.write_text(with_table(text, "| old |\n"))
    assert pintable_main(["--check", str(stale)]) == 1
    assert pintable_main([str(stale)]) == 0
    assert stale.read_text() == text


def test_every_workload_has_a_verification_rule() -> None:
    from pywebbench.catalogue.workloads import HTTP_WORKLOADS, WORKLOADS, WS_WORKLOADS
    from pywebbench.verify.rules import BODY_RULES, CONTENT_TYPES

    assert set(HTTP_WORKLOADS) <= set(BODY_RULES) and set(HTTP_WORKLOADS) <= set(CONTENT_TYPES)
    # a WebSocket workload is verified by its echo (pywebbench.verify.websocket)
    assert WS_WORKLOADS == {"ws-echo"} and HTTP_WORKLOADS | WS_WORKLOADS == set(WORKLOADS)
