"""The package layout is the architecture: layers import downwards only, and nothing circles.

Every ``import`` in ``a2a_flask`` (type-checking ones included) is read from
the source, so a new module that reaches up a layer, or closes an import
circle, fails here with the offending edge named.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "a2a_flask"

#: What each top-level part of the package may import from the package (besides itself).
#: Leaves (config, signals, concurrency, version, deprecation) import nothing of ours.
LEAVES = {"config", "signals", "concurrency", "version", "deprecation"}
ALLOWED: Dict[str, Set[str]] = {
    "protocol": set(),
    "dialects": {"protocol"},
    "stores": {"protocol"},
    "signing": {"protocol"},  # its errors are in the one tree (protocol/errors.py)
    "push": {"stores", "protocol", "signing", "observe"},
    "engine": {"push", "stores", "protocol", "observe"},
    "web": {"engine", "dialects", "push", "stores", "signing", "protocol", "observe"},
    "client": {"dialects", "protocol", "signing", "observe"},
    # Observability sits at the bottom (beside the leaves): every layer may report to it.
    "observe": set(),
    "testing": {"client", "web", "stores", "protocol"},
    # The compatibility paths of 0.1 re-export what moved.
    "models": {"protocol"},
    "errors": {"protocol"},
    "auth": {"web"},
    "card_signing": {"signing"},
    "__main__": {"client"},
}
#: Parts that must work without Flask (they are shared with clients and tools).
NO_FLASK = {"protocol", "dialects", "stores", "signing", "push", "engine", "client", "observe",
            *LEAVES}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> List[str]:
    """Every module of the package (or outside name) that ``name`` imports."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # "from . import x" imports the submodule x when there is one.
            submodules = [f"{target}.{a.name}" for a in node.names
                          if f"{target}.{a.name}" in MODULES]
            found += submodules or [target]
    return found


GRAPH = {name: [t for t in imports_of(name) if t in MODULES and t != name] for name in MODULES}


def part_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_module_imports_only_lower_layers(name):
    part = part_of(name)
    if part == "":
        return  # the package itself is the public surface: it may import anything
    if name == "a2a_flask.push.signing":
        allowed = {"signing"}  # the compatibility path of 0.1
    else:
        allowed = set() if part in LEAVES else ALLOWED[part]
    wrong = [t for t in GRAPH[name] if part_of(t) not in allowed | {part} | LEAVES
             or (part in LEAVES and part_of(t) != part)]
    assert not wrong, f"{name} imports {wrong}; {part} may import only {sorted(allowed)}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if part_of(n) in NO_FLASK))
def test_lower_layers_do_not_need_flask(name):
    outside = [t for t in imports_of(name) if t.split(".")[0] in ("flask", "werkzeug")]
    assert not outside, f"{name} imports {outside}"


def find_cycle(graph: Dict[str, List[str]]) -> List[str]:
    """One import circle as a path (first == last), or [] when there is none."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def test_no_import_circles():
    # A package's __init__ runs when a submodule is imported, but that is not an
    # edge: only what each module's own import statements name counts.
    assert find_cycle(GRAPH) == []


def test_the_cycle_finder_finds_a_circle():
    graph: Dict[str, List[str]] = {"a": ["b"], "b": ["c"], "c": ["a"], "d": []}
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_the_layer_check_sees_relative_and_submodule_imports():
    edges: List[Tuple[str, str]] = [(n, t) for n, ts in GRAPH.items() for t in ts]
    assert ("a2a_flask.web.rest", "a2a_flask.web.rest03") in edges
    assert ("a2a_flask.dialects.v01", "a2a_flask.dialects.v03") in edges


#: The engine's long-lived objects: built through their constructors (web/assembly.py),
#: never wired by setting attributes on them from outside.
WIRED = {"service", "runtime", "writer", "runs", "keeper", "following", "push"}


def attribute_wiring(source: str) -> List[str]:
    """Assignments ``<...>.service.x = ...`` (any name of :data:`WIRED` on the path, not
    reached through ``self``) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                   else [])
        for target in targets:
            if not isinstance(target, ast.Attribute):
                continue
            path, value = [], target.value
            while isinstance(value, ast.Attribute):
                path.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id != "self":
                path.append(value.id)
            if WIRED & set(path):
                found.append(f"line {node.lineno}: {ast.unparse(target)}")
    return found


def test_the_object_graph_is_built_through_constructors():
    wired = {name: found for name, path in MODULES.items()
             if (found := attribute_wiring(path.read_text()))}
    assert wired == {}


def test_the_wiring_check_sees_attributes_set_from_outside():
    assert attribute_wiring("service.push = p\nstate.service.runtime.runner = r\n"
                            "self.push = p\nrun.worker = w\n") == [
        "line 1: service.push", "line 2: state.service.runtime.runner"]
