"""The package's import graph, read from the source with :mod:`ast` (nothing is imported):

- no module imports a leading-underscore name from another module, ``TYPE_CHECKING`` and
  function-level imports included (a private module, ``_base.py`` or ``_common.py``, may be
  imported within its own package);
- no import cycle among the modules of ``python/pywebbench`` (the code that runs inside a
  stack's virtualenv, ``inside/``, imports no pywebbench and is left out).

An import of a package counts as an import of its ``__init__``; ``from pkg import name``
counts as an import of ``pkg.name`` where that is a module, else of ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pywebbench

ROOT = Path(pywebbench.__file__).parent
PACKAGE = "pywebbench"
ENGINE = "pywebbench._engine"  # the compiled Rust engine: a private module of the package


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] == "inside":
            continue
        parts = [PACKAGE, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    is_pkg = MODULES[module].name == "__init__.py"
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import in ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    out: list[tuple[str, str | None, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES or sub == ENGINE:
                    out.append((sub, None, node.lineno))
                else:
                    out.append((target, alias.name, node.lineno))
    return [(m, n, line) for m, n, line in out if m == PACKAGE or m.startswith(PACKAGE + ".")]


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]


def _private_module_outside_its_package(importer: str, imported: str) -> bool:
    """``pkg._base`` imported from outside ``pkg`` (or a private name's module)."""
    parts = imported.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and part != "__init__":
            owner = ".".join(parts[:i])
            return not (importer == owner or importer.startswith(owner + "."))
    return False


def test_no_module_imports_a_private_name_of_another_module() -> None:
    bad = []
    for module in MODULES:
        for imported, name, line in _imports(module):
            where = f"{MODULES[module].relative_to(ROOT.parent)}:{line}"
            dunder = name is not None and name.startswith("__") and name.endswith("__")
            if name is not None and name.startswith("_") and not dunder and imported != module:
                bad.append(f"{where}: {name} from {imported}")
            elif _private_module_outside_its_package(module, imported):
                bad.append(f"{where}: {imported}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_among_the_modules() -> None:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        deps = {imported for imported, _, _ in _imports(module) if imported in MODULES}
        deps.discard(module)
        # a package's __init__ that re-exports its own modules is not a cycle with them
        deps -= {
            d for d in deps if _package_of(d) == module and MODULES[module].name == "__init__.py"
        }
        graph[module] = deps
    found = _cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checker_sees_a_cycle_and_a_private_import() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _private_module_outside_its_package("pywebbench.run.x", "pywebbench.catalogue._base")
    assert not _private_module_outside_its_package(
        "pywebbench.catalogue.servers.uwsgi", "pywebbench.catalogue.servers._base"
    )
