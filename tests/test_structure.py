"""The package's house rules, read from its source with ``ast``: no import cycles between
course's modules, and no module importing another module's private names.

Only imports at module level count for cycles (a function-level import runs later, when
both modules exist, and is how the CLI keeps start-up cheap); every import counts for the
private-name rule.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from course.house.rules import offence

PACKAGE = Path(__file__).resolve().parents[1] / "course"

# The torch modules the course mirrors. A private name that torch itself spells with an
# underscore in one of them (``_get_grad_fn_or_grad_acc``, ``_engine_run_backward``) keeps its
# underscore in the mirror and may be used wherever torch's may: it is torch's name, not ours.
MIRRORED_TORCH_MODULES = (
    "torch.autograd.graph",
    "torch.utils.checkpoint",
    "torch._functorch._aot_autograd.descriptors",
    "torch._functorch._aot_autograd.fx_utils",
)


def _torch_private_names() -> set[str]:
    import importlib

    names = set()
    for name in MIRRORED_TORCH_MODULES:
        module = importlib.import_module(name)
        names |= {n for n in vars(module) if n.startswith("_") and not n.startswith("__")}
    return names


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
                found.append(stack[stack.index(nxt) :] + [nxt])
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


def _where(module: str) -> str:
    """The file of ``module`` from the checkout's root (``course/aot/joint.py``)."""
    path = MODULES.get(module)
    if path is not None and path.is_relative_to(ROOT):
        return str(path.relative_to(ROOT))
    return module.replace(".", "/") + ".py"


def cycle_offences(graph: dict[str, set[str]]) -> list[str]:
    """One house-rule offence per import cycle of ``graph`` (module -> modules it imports at
    top level); a package importing its own submodules in ``__init__`` is how packages work."""
    graph = {m: {d for d in deps if not _is_parent_package(d, m)} for m, deps in graph.items()}
    return [
        offence("no-cycles", _where(cycle[0]), "imports itself through " + " -> ".join(cycle[1:]))
        for cycle in _cycles(graph)
    ]


def test_the_package_has_no_import_cycles():
    offences = cycle_offences(_top_level_graph())
    assert offences == [], "\n".join(offences)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def private_import_offences(modules) -> list[str]:
    """One house-rule offence per import, in ``modules``, of another module's private name or of
    a private module from outside its package (torch's own private names aside)."""
    offences = []
    for module in modules:
        for target, name, line in _imports(module, top_level_only=False):
            if not target.startswith("course") or target == module:
                continue
            where = f"{_where(module)}:{line}"
            private_name = name is not None and name.startswith("_") and not name.startswith("__")
            if private_name and name not in _torch_private_names():
                offences.append(offence("private-names", where, f"imports {name} from {target}", name=name))
            # a private module (course.checks.outcomes) belongs to its package alone
            private_mod = [p for p in target.split(".") if p.startswith("_") and not p.startswith("__")]
            if private_mod and not module.startswith(target.rsplit(".", 1)[0]):
                what = f"imports the private module {target}"
                offences.append(offence("private-names", where, what, name=target))
    return offences


def test_no_module_imports_another_modules_private_names():
    offences = private_import_offences(MODULES)
    assert offences == [], "\n".join(offences)


def layer_offences(layer: str, above: tuple[str, ...]) -> list[str]:
    """One house-rule offence per import, in a module of ``layer``, of a module ``above`` it."""
    return [
        offence(
            "layering", f"{_where(module)}:{line}", f"{module} imports {target}", layer=layer, above=target
        )
        for module in MODULES
        if module.startswith(layer)
        for target, _, line in _imports(module, top_level_only=False)
        if target.startswith(above)
    ]


@pytest.mark.parametrize("layer", ["autograd", "aot", "offload"])
def test_the_reference_layer_imports_nothing_from_teaching_or_machinery(layer):
    offences = layer_offences(
        f"course.{layer}", ("course.show", "course.grading", "course.checks", "course.widgets")
    )
    assert offences == [], "\n".join(offences)


def test_lesson_content_imports_nothing_that_judges_or_grades():
    """course/content/ is what a notebook runs; the answer keys (course.checks) and the grader
    sit above it, so reading a lesson's content never meets an exercise's answer."""
    offences = layer_offences("course.content", ("course.checks", "course.grading"))
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize(
    "layer, above",
    [
        ("course.grading", ("course.classroom", "course.learner", "course.house")),
        ("course.learner", ("course.classroom", "course.house")),
        ("course.classroom", ("course.house",)),
    ],
)
def test_each_floor_of_the_machinery_imports_only_the_floors_below_it(layer, above):
    """Scoring one notebook (grading) sits below the learner's folder and the instructor's class,
    and the author's tools (house) sit on top: an import the other way is an arrow back up."""
    offences = layer_offences(layer, above)
    assert offences == [], "\n".join(offences)


#: Every folder of course/ with an __init__.py, as a dotted package name (lessons_data holds only
#: notebooks).
SUBPACKAGES = sorted(
    "course." + p.parent.relative_to(PACKAGE).as_posix().replace("/", ".")
    for p in PACKAGE.rglob("__init__.py")
    if p.parent != PACKAGE and p.parent.name != "lessons_data"
)


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_package_index_names_every_module_in_its_folder(package):
    """A maintainer finds a file from its package's index: a module the index leaves out is a
    module nobody is told about."""
    from course.house.sources import index_offences

    folder = PACKAGE / package.removeprefix("course.").replace(".", "/")
    modules = sorted(
        p.stem if p.is_file() else p.name
        for p in folder.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    )
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    offences = index_offences(package, docstring, modules)
    assert offences == [], "\n".join(offences)


def test_the_public_import_paths_of_design_md_still_import():
    import importlib

    for name in [
        "course.autograd_graph",
        "course.descriptors",
        "course.fx_utils",
        "course.joint",
        "course.offload",
        "course.show",
        "course.widgets",
        "course.checks",
        "course.checkpoint",
    ]:
        assert importlib.import_module(name).__all__, name


# Module-level state that stays, each for a reason: torch keeps the same switch or stack in
# its own module (the mirror must behave the same), or it is a catalogued wrong answer.
ALLOWED_MODULE_STATE = {
    ("course.autograd.checkpoint", "_enable_checkpoint_early_stop"): "torch/utils/checkpoint.py's own global",
    (
        "course.autograd.checkpoint_debug",
        "_checkpoint_debug_enabled",
    ): "torch/utils/checkpoint.py's own global",
    (
        "course.autograd.mutation",
        "_allow_mutation_on_saved_tensors_enabled",
    ): "torch/autograd/graph.py's own global",
    ("course.autograd.creation", "_active"): "per thread, as torch's node creation hook is per thread",
    ("course.trace", "ACTIVE"): "an open-recordings stack, like torch's hook and mode stacks",
    ("course.trace", "_recordings"): "an open-recordings stack, like torch's hook and mode stacks",
    ("course.trace", "_lock"): "guards that stack",
    (
        "course.checks.lesson02.ex2_4_any_grad_hook",
        "_FIRED_ANYWHERE",
    ): "a catalogued wrong answer: state shared by every group",
    (
        "course.checks.registry",
        "_REGISTRY",
    ): "filled once at import by the registrations, like torch's op registry",
    (
        "course.checks.leftovers",
        "_COLLECTORS",
    ): "the open collecting blocks, a stack like torch's mode stacks",
}
_MUTATORS = {
    "append",
    "add",
    "update",
    "extend",
    "insert",
    "pop",
    "popitem",
    "clear",
    "remove",
    "discard",
    "setdefault",
    "__setitem__",
    "__delitem__",
}


def _module_state(module: str) -> list[tuple[str, int, str]]:
    """(name, line, how) for each module-level name of ``module`` that code changes after import:
    a ``global`` statement, a mutating call or item assignment in a function, or a lock or
    thread-local made at import."""
    tree = ast.parse(MODULES[module].read_text())
    top = {
        t.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = ast.unparse(node.value.func)
            if called.split(".")[-1] in {"Lock", "RLock", "local", "Event", "Condition"}:
                found += [
                    (t.id, node.lineno, f"{called}() at import")
                    for t in node.targets
                    if isinstance(t, ast.Name)
                ]
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        local = {a.arg for a in fn.args.args + fn.args.kwonlyargs} | {
            t.id
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for n in ast.walk(fn):
            if isinstance(n, ast.Global):
                found += [(name, n.lineno, "global statement") for name in n.names]
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in _MUTATORS
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id in top - local
            ):
                found.append((n.func.value.id, n.lineno, f".{n.func.attr}()"))
            elif isinstance(n, (ast.Assign, ast.Delete)):
                for t in n.targets if isinstance(n, ast.Assign) else n.targets:
                    if (
                        isinstance(t, ast.Subscript)
                        and isinstance(t.value, ast.Name)
                        and t.value.id in top - local
                    ):
                        found.append((t.value.id, n.lineno, "item assignment"))
    return found


def test_no_module_holds_module_level_mutable_state():
    """State kept in a module outlives the call that made it: two gradings in one process, two
    groups of hooks, two notebooks share it by accident. Pass it explicitly instead (a session
    object, a context manager); only the entries of ALLOWED_MODULE_STATE stay, each saying why."""
    offences = [
        f"{module}:{line} {name} ({how})"
        for module in MODULES
        for name, line, how in _module_state(module)
        if (module, name) not in ALLOWED_MODULE_STATE
    ]
    assert offences == [], (
        "module-level mutable state (house rule: pass it explicitly; if torch's own module keeps the same "
        "state, add it to ALLOWED_MODULE_STATE in tests/test_structure.py with the reason):\n"
        + "\n".join(offences)
    )


def test_the_module_state_finder_finds_state():
    import textwrap

    MODULES["course._probe"] = probe = Path("/tmp") / "course_state_probe.py"
    probe.write_text(
        textwrap.dedent("""
        import threading
        _seen = set()
        _cache = {}
        _lock = threading.Lock()
        _n = 0
        def f(x):
            global _n
            _seen.add(x)
            _cache[x] = 1
        def g(_seen):
            _seen.add(1)  # a parameter, not the module's set
    """)
    )
    try:
        assert sorted((name, how) for name, _, how in _module_state("course._probe")) == [
            ("_cache", "item assignment"),
            ("_lock", "threading.Lock() at import"),
            ("_n", "global statement"),
            ("_seen", ".add()"),
        ]
    finally:
        del MODULES["course._probe"]
        probe.unlink()


ROOT = PACKAGE.parent


def _code_sources():
    """(where, source) for every file of course/ and tests/, and every code cell of solutions/."""
    import json

    for path in sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "tests").glob("*.py")):
        yield str(path.relative_to(ROOT)), path.read_text()
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                lines = "".join(cell["source"]).splitlines()
                code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
                yield f"{path.relative_to(ROOT)} (cell {i + 1})", code


def _private_uses(where: str, source: str) -> list[str]:
    """Every private name of a course module this source reaches for: ``from course.x import _y``,
    ``import course.x._y``, and ``alias._y`` where ``alias`` names a course module (or a name
    imported from one)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    own = (
        where.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        if where.startswith("course/")
        else ""
    )
    private = lambda n: n.startswith("_") and not n.startswith("__")  # noqa: E731
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("course"):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("course")
        ):
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name):
            target = aliases.get(node.value.id)
            if target is not None and target != own and not own.startswith(target + "."):
                found.append(f"{where}:{node.lineno} reads {target}.{node.attr}")
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("course")
        ):
            if node.module == own:
                continue
            for a in node.names:
                if private(a.name):
                    found.append(f"{where}:{node.lineno} imports {a.name} from {node.module}")
    return found


def _private_name_of(use: str) -> str:
    """``_y`` from "... reads course.x._y" or "... imports _y from course.x"."""
    return use.split(" imports ")[1].split(" ")[0] if " imports " in use else use.rsplit(".", 1)[1]


def _an_answer_key_in_its_test(where: str, use: str) -> bool:
    """A lesson's answer keys (truths, oracles, catalogued wrong answers) are private on purpose,
    so that no notebook can import them (tests/test_checks.py); that lesson's own test file,
    ``tests/test_lessonNN.py``, is where they are tested, and the one place outside the checks
    module that may read them."""
    import re

    test = re.fullmatch(r"tests/test_lesson(\d\d)\.py", where.split(":", 1)[0])
    return bool(test) and f"course.checks.lesson{test.group(1)}" in use


def test_no_code_notebook_or_test_reaches_for_another_modules_private_names():
    """The private-name rule, widened: attribute access as well as imports, in the lessons'
    notebooks and the tests as well as the package. torch's own private names, which the
    mirror spells as torch does, are torch's API and stay allowed (MIRRORED_TORCH_MODULES).
    Fix: promote what is needed to a public name (in ``__all__``, with a docstring), or reach it
    through a public one (an exercise's oracle is ``course.checks.get(id).oracle``)."""
    torch_names = _torch_private_names()
    uses = [
        use
        for where, source in _code_sources()
        for use in _private_uses(where, source)
        if _private_name_of(use) not in torch_names and not _an_answer_key_in_its_test(where, use)
    ]
    offences = [
        offence("private-names", *re.fullmatch(r"(.*?:\d+) (.*)", use).groups(), name=_private_name_of(use))
        for use in uses
    ]
    assert offences == [], "\n".join(offences)


def test_every_module_and_function_is_small_enough_to_hold_in_mind():
    """Issue 45: no module over about 500 lines and no function over 80, but where the torch
    code a module mirrors is as long (course.house.sources.MIRRORS). Generated modules
    (course/checks/solutions/, copied from the notebooks) are the notebooks' size."""
    from course.house.sources import size_offences

    offences = [
        o
        for p in sorted(PACKAGE.rglob("*.py"))
        if "solutions" not in p.relative_to(PACKAGE).parts
        for o in size_offences(p.relative_to(PACKAGE.parent), PACKAGE.parent)
    ]
    assert offences == [], "\n".join(offences)
