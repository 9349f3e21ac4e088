"""No dependency cycle between sibling modules of a Rust crate.

Within one parent module, the children must depend on each other one way only: if
``faults::conn`` uses ``faults::driver``, ``faults::driver`` may not use ``faults::conn``
(directly or through other siblings). A parent and its own children may use each other (a
``mod.rs`` declares its children and re-exports their items; a child reaches its parent
with ``super``), as may any module and its ancestors.

Dependencies are read from the source text: ``use`` declarations (braces expanded) and
``crate::``/``super::`` paths written inline. Test modules written inline at the end of a
file (``mod tests { ... }``) are left out: there ``super`` means the file's own module.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

Module = tuple[str, ...]

_LINE_COMMENT = re.compile(r"//[^\n]*")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_STRING = re.compile(r'r#*"(?:.|\n)*?"#*|"(?:\\.|[^"\\])*"')
_INLINE_MOD = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", re.M)
_USE = re.compile(r"\buse\s+([^;]+);")
_INLINE_PATH = re.compile(r"\b(?:crate|super)(?:::(?:super|\w+))+")


def modules_of(src: Path) -> dict[Module, Path]:
    """Every module of the crate rooted at ``src`` (``lib.rs``/``main.rs`` is ``()``)."""
    found: dict[Module, Path] = {}
    for path in sorted(src.rglob("*.rs")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts in (("lib",), ("main",)):
            found[()] = path
        elif parts[-1] == "mod":
            found[parts[:-1]] = path
        else:
            found[parts] = path
    return found


def expand_use(tree: str) -> list[str]:
    """The paths of one ``use`` tree (``a::{b, c::d}`` holds ``a::b`` and ``a::c::d``)."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\bas\w+$", "", tree)]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    return [path for item in items if item for path in expand_use(prefix + item)]


def code_of(path: Path) -> str:
    """The file's code without comments, string literals and trailing inline modules."""
    text = _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", _STRING.sub('""', path.read_text())))
    inline = _INLINE_MOD.search(text)
    return text if inline is None else text[: inline.start()]


def resolve(module: Module, path: str, known: dict[Module, Path]) -> Module | None:
    """The module of ``known`` that ``path``, written in ``module``, lands in (None: external)."""
    segments = path.split("::")
    if segments[0] == "crate":
        base: Module = ()
        segments = segments[1:]
    elif segments[0] in ("super", "self"):
        base = module
        while segments and segments[0] in ("super", "self"):
            if segments.pop(0) == "super":
                base = base[:-1]
    else:
        return None
    for name in segments:
        if base + (name,) not in known:
            break
        base = base + (name,)
    return base


def sibling_edges(src: Path) -> dict[Module, dict[str, set[str]]]:
    """Per parent module, which of its children depends on which (each as its name)."""
    known = modules_of(src)
    edges: dict[Module, dict[str, set[str]]] = {}
    for module, path in known.items():
        code = code_of(path)
        paths = [p for tree in _USE.findall(code) for p in expand_use(tree)]
        paths += _INLINE_PATH.findall(code)
        for target in {resolve(module, p, known) for p in paths}:
            if target is None:
                continue
            common = 0
            while common < min(len(module), len(target)) and module[common] == target[common]:
                common += 1
            if common in (len(module), len(target)):
                continue  # the same module, or one is the other's ancestor
            parent = module[:common]
            edges.setdefault(parent, {}).setdefault(module[common], set()).add(target[common])
    return edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def crate_cycles(src: Path) -> list[str]:
    """Each sibling cycle of the crate at ``src``, as ``parent: a, b, ...``."""
    return [
        f"{'::'.join(('crate', *parent))}: {', '.join(component)}"
        for parent, graph in sorted(sibling_edges(src).items())
        for component in cycles(graph)
    ]


def test_no_sibling_module_cycle_in_the_crates() -> None:
    crates = sorted((REPO / "crates").glob("*/src"))
    assert len(crates) >= 4, crates
    found = {src.parent.name: crate_cycles(src) for src in crates}
    assert {name: c for name, c in found.items() if c} == {}


def test_the_check_finds_a_cycle_and_allows_parent_child_links(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "faults").mkdir(parents=True)
    (src / "lib.rs").write_text("mod faults;\nmod spec;\nmod rate;\n")
    (src / "spec.rs").write_text("use crate::rate::RatePhase;\n")
    (src / "rate.rs").write_text('// use crate::spec::LoadSpec;\nconst X: &str = "crate::spec";\n')
    (src / "faults" / "mod.rs").write_text("mod conn;\nmod driver;\npub use driver::run;\n")
    (src / "faults" / "conn.rs").write_text("use super::{driver::State, Kind};\nuse crate::spec;\n")
    (src / "faults" / "driver.rs").write_text(
        "use super::conn::Conn;\nfn f() { super::Kind::A; }\n"
        "#[cfg(test)]\nmod tests {\n    use super::super::conn::Conn;\n}\n"
    )
    assert crate_cycles(src) == ["crate::faults: conn, driver"]
    (src / "faults" / "conn.rs").write_text("use super::Kind;\nuse crate::spec;\n")
    assert crate_cycles(src) == []
    (src / "rate.rs").write_text("fn f() -> crate::spec::LoadSpec { todo!() }\n")
    assert crate_cycles(src) == ["crate: rate, spec"]
