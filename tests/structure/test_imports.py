"""The package's import graph, read from the source with :mod:`ast` (nothing is imported):

- no module imports a leading-underscore name from another module, ``TYPE_CHECKING`` and
  function-level imports included (a private module, ``_base.py`` or ``_common.py``, may be
  imported within its own package);
- no import cycle among the modules of ``python/pywebbench`` (the code that runs inside a
  stack's virtualenv, ``inside/``, imports no pywebbench and is left out);
- no import cycle among its packages: each sub-package (``pywebbench.load``, with everything
  under it) and each top-level module (``pywebbench.bringup``) is one node, and an import of
  anything in B from anything in A is an edge A -> B, so the packages can be read in one
  order (docs/architecture.md's pipeline: a stage imports the stages before it);
- ``pywebbench.analysis`` (statistics as pure functions on plain data) imports nothing of
  pywebbench outside itself: not the packages that use it (``run``, ``ab``, ``compare``,
  ``report``, ``commands``, ``study``), nor the stages whose records it reads (a slice is a
  protocol there, not ``load``'s class);
- ``pywebbench.study`` (a study declared and planned from files) imports none of the stages
  that probe, install or start things, nor their drivers: ``provision``, ``launch``,
  ``bringup``, ``run``, ``ab``, ``report``, ``commands``;
- no module outside ``pywebbench.analysis`` has what an interval is computed with: scipy,
  numpy, ruptures or statsmodels, the t quantile (``analysis.stats.t_quantile``), a measure
  of spread from :mod:`statistics` (``stdev``, ``variance``, ``NormalDist``, ...; a median or a mean
  is a figure, not an interval) or a square root (``math.sqrt``, ``** 0.5``). A plain
  ratio ``a / b`` cannot be told from a unit conversion by its syntax: the ratios of
  figures (``analysis.ratio.ratio``, ``spread``) are kept there by review.

An import of a package counts as an import of its ``__init__``; ``from pkg import name``
counts as an import of ``pkg.name`` where that is a module, else of ``pkg``.
"""

from __future__ import annotations

import ast
from itertools import pairwise
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


def _node(module: str) -> str:
    """The package-level node of ``module``: ``pywebbench.<first part>`` (the package itself
    for ``pywebbench``)."""
    return ".".join(module.split(".")[:2])


def _package_edges() -> dict[tuple[str, str], list[str]]:
    """Every edge A -> B between two package-level nodes, with the import lines that make it
    (``path:line: imported module``), TYPE_CHECKING and function-level imports included."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module in MODULES:
        for imported, _, line in _imports(module):
            if imported == ENGINE:
                continue
            a, b = _node(module), _node(imported)
            if a != b:
                where = f"{MODULES[module].relative_to(ROOT.parent)}:{line}: imports {imported}"
                edges.setdefault((a, b), []).append(where)
    return edges


def _a_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One cycle through the first node of a strongly connected ``component``: the shortest
    path from it back to itself, as the nodes in order (the first repeated at the end)."""
    start, inside = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, set()) & inside):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{component} is not a strongly connected component")


def test_no_import_cycle_among_the_packages() -> None:
    edges = _package_edges()
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    lines = []
    for component in _cycles(graph):
        cycle = _a_cycle(component, graph)
        lines.append(" -> ".join(cycle))
        lines += [f"  {a} -> {b}: {edges[a, b][0]}" for a, b in pairwise(cycle)]
    assert not lines, "package cycles (one import line per edge):\n" + "\n".join(lines)


def test_analysis_imports_nothing_of_pywebbench_outside_itself() -> None:
    bad = [
        where
        for (a, _), lines in _package_edges().items()
        if a == f"{PACKAGE}.analysis"
        for where in lines
    ]
    assert not bad, "pywebbench.analysis imports pywebbench outside itself:\n" + "\n".join(bad)


#: What the study layer (the declaration of a study and its plan, read from files) must not
#: import: the stages that probe, install, start or measure, and the packages that drive it.
STUDY_USERS = ("provision", "launch", "bringup", "run", "ab", "report", "commands")


def test_study_imports_nothing_that_starts_a_process() -> None:
    forbidden = {f"{PACKAGE}.{name}" for name in STUDY_USERS}
    bad = [
        where
        for (a, b), lines in _package_edges().items()
        if a == f"{PACKAGE}.study" and b in forbidden
        for where in lines
    ]
    assert not bad, "pywebbench.study imports a stage that runs things:\n" + "\n".join(bad)


def test_the_checker_sees_a_cycle_and_a_private_import() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = {"a": {"b", "d"}, "b": {"c"}, "c": {"a"}, "d": {"c"}}
    assert _a_cycle(["a", "b", "c", "d"], graph) == ["a", "b", "c", "a"]
    assert _node("pywebbench.catalogue.servers.uwsgi") == "pywebbench.catalogue"
    assert _node("pywebbench.bringup") == "pywebbench.bringup"
    assert _private_module_outside_its_package("pywebbench.run.x", "pywebbench.catalogue._base")
    assert not _private_module_outside_its_package(
        "pywebbench.catalogue.servers.uwsgi", "pywebbench.catalogue.servers._base"
    )


#: Libraries an interval, a fit or a resample is computed with: the analysis layer's alone.
STATISTICS_LIBRARIES = ("scipy", "numpy", "ruptures", "statsmodels")
#: What :mod:`statistics` offers beyond a median or a mean: spreads and distributions.
SPREAD_FUNCTIONS = frozenset(
    {
        "stdev",
        "pstdev",
        "variance",
        "pvariance",
        "quantiles",
        "NormalDist",
        "covariance",
        "correlation",
        "linear_regression",
    }
)


def _interval_tools(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each use in ``tree`` of what an interval is computed with."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, f"import {a.name}")
                for a in node.names
                if a.name.split(".")[0] in STATISTICS_LIBRARIES
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            root = node.module.split(".")[0]
            names = {a.name for a in node.names}
            if root in STATISTICS_LIBRARIES:
                found.append((node.lineno, f"from {node.module} import ..."))
            elif node.module == "statistics" and names & SPREAD_FUNCTIONS:
                found.append((node.lineno, f"statistics.{min(names & SPREAD_FUNCTIONS)}"))
            elif node.module == "math" and "sqrt" in names:
                found.append((node.lineno, "math.sqrt"))
            elif "t_quantile" in names:
                found.append((node.lineno, f"t_quantile from {node.module}"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, name = node.value.id, node.attr
            if (owner, name) == ("math", "sqrt") or name == "t_quantile":
                found.append((node.lineno, f"{owner}.{name}"))
            elif owner == "statistics" and name in SPREAD_FUNCTIONS:
                found.append((node.lineno, f"statistics.{name}"))
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Pow)
            and isinstance(node.right, ast.Constant)
            and node.right.value == 0.5
        ):
            found.append((node.lineno, "** 0.5"))
    return found


def test_no_module_outside_analysis_computes_an_interval() -> None:
    bad = [
        f"{MODULES[module].relative_to(ROOT.parent)}:{line}: {what}"
        for module in MODULES
        if _node(module) != f"{PACKAGE}.analysis"
        for line, what in _interval_tools(ast.parse(MODULES[module].read_text()))
    ]
    assert not bad, "interval tools outside pywebbench.analysis:\n" + "\n".join(bad)


def test_the_interval_check_sees_each_tool() -> None:
    code = """
import numpy as np
from scipy import stats
import statistics
from statistics import median, stdev
from math import sqrt
from pywebbench.analysis.stats import t_quantile
s = statistics.pstdev(xs)
h = math.sqrt(v) + stats.t_quantile(0.975, 3) + v ** 0.5
m = statistics.median(xs) + statistics.fmean(xs) + 2 ** 2
"""
    lines = sorted(line for line, _ in _interval_tools(ast.parse(code)))
    assert lines == [2, 3, 5, 6, 7, 8, 9, 9, 9]
