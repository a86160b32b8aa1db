"""The package's house rules, read from its source with ``ast``: no import cycles between
course's modules, and no module importing another module's private names.

Only imports at module level count for cycles (a function-level import runs later, when
both modules exist, and is how the CLI keeps start-up cheap); every import counts for the
private-name rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "course"

# torch's own private names that a mirror must offer under the same name (DESIGN.md): the
# facade re-exports them, nothing else may import them.
TORCH_PRIVATE_API = {
    ("course.autograd_graph", "_engine_run_backward"),
    ("course.autograd_graph", "_register_logging_hooks_on_whole_graph"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not MODULES[module].name == "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, top_level_only: bool):
    """(imported module, imported name or None, line) for every import in ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:  # `from course.show import graph`: a module, not a name
                    yield sub, None, node.lineno
                else:
                    yield target, alias.name, node.lineno


def _top_level_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _, _ in _imports(module, top_level_only=True):
            # importing a.b.c runs a and a.b first: count the packages too
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                dep = ".".join(parts[:i])
                if dep in MODULES and dep != module:
                    graph[module].add(dep)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def _is_parent_package(pkg: str, module: str) -> bool:
    return module.startswith(pkg + ".")


def test_the_package_has_no_import_cycles():
    graph = _top_level_graph()
    # a package importing its own submodules in __init__ is how packages work, not a cycle
    for module, deps in graph.items():
        graph[module] = {d for d in deps if not _is_parent_package(d, module)}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_another_modules_private_names():
    offences = []
    for module in MODULES:
        for target, name, line in _imports(module, top_level_only=False):
            if not target.startswith("course") or target == module:
                continue
            private_name = name is not None and name.startswith("_") and not name.startswith("__")
            if private_name and (module, name) not in TORCH_PRIVATE_API:
                offences.append(f"{module}:{line} imports {name} from {target}")
            # a private module (course.checks._outcomes) belongs to its package alone
            private_mod = [p for p in target.split(".") if p.startswith("_") and not p.startswith("__")]
            if private_mod and not module.startswith(target.rsplit(".", 1)[0]):
                offences.append(f"{module}:{line} imports the private module {target}")
    assert offences == []


@pytest.mark.parametrize("layer", ["autograd", "aot", "offload"])
def test_the_reference_layer_imports_nothing_from_teaching_or_machinery(layer):
    bad = []
    for module in MODULES:
        if not module.startswith(f"course.{layer}"):
            continue
        for target, _, line in _imports(module, top_level_only=False):
            if target.startswith(("course.show", "course.grading", "course.checks", "course.widgets")):
                bad.append(f"{module}:{line} imports {target}")
    assert bad == []


def test_the_public_import_paths_of_design_md_still_import():
    import importlib

    for name in ["course.autograd_graph", "course.descriptors", "course.fx_utils", "course.joint",
                 "course.offload", "course.show", "course.widgets", "course.checks", "course.checkpoint"]:
        assert importlib.import_module(name).__all__, name
