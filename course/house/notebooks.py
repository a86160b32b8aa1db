"""The finders of the house rules that read lesson notebooks: each returns offences as sentences.

Every finder returns a list of :func:`course.house.rules.offence` lines, empty when the rule
holds, so a test asserts ``finder(...) == []`` and a failure prints the rule, the file and the
fix. The notebook finders read ``.ipynb`` files as JSON; cells are counted from 1, as JupyterLab
shows them::

    >>> import json, pathlib, tempfile
    >>> cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
    ...           "source": "with torch.no_grad():\\n    def f(x):\\n        return x"}]
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "09_demo.ipynb"
    >>> _ = path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    >>> where, what = not_at_top_level(path, ["f"])[0].split(": ", 1)
    >>> where.endswith("09_demo.ipynb, cell 1, line 2")
    True
    >>> print(what.split(" (house rule")[0])
    f is defined inside a `with` statement, which the grader does not run

    # OK:  def f(x): ...             at the top level of a cell: the grader defines f
    # BAD: with torch.no_grad():     f stays undefined when the grader checks it
    #          def f(x): ...

What is ours and what is torch's: all of it is ours (torch has no lessons).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from course.grading import cells
from course.house.rules import offence

__all__ = [
    "HERE",
    "code_cells",
    "minutes_disagree",
    "not_at_top_level",
    "predictions_written_down",
    "unstable_outputs",
]

#: Where a finder reads a relative ``path`` from when given no ``root``; a finder reads
#: ``root / path`` and names ``path`` in its offences.
HERE = Path(".")


def code_cells(path: Path) -> list[tuple[int, str, dict]]:
    """(cell number from 1, source, cell) for each code cell of the notebook at ``path``."""
    found = cells.cells(Path(path).read_bytes())
    return [(n, cells.source(c), c) for n, c in enumerate(found, 1) if c.get("cell_type") == "code"]


def _parse(source: str) -> ast.Module | None:
    """A cell's code, IPython magics and shell lines blanked; None if it is still not Python."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_OWN_SCOPE = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _bound(node: ast.AST) -> Iterable[tuple[str, int]]:
    """(name, line) for each module-level name ``node`` binds (function bodies not entered)."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, _SCOPES):
            yield n.name, n.lineno
            continue
        if isinstance(n, _OWN_SCOPE):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            yield n.id, n.lineno
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            yield from ((a.asname or a.name.split(".")[0], n.lineno) for a in n.names)
        todo.extend(ast.iter_child_nodes(n))


def _reads(fn: ast.AST) -> set[str]:
    """The global names a def or class reads: loaded in it, never assigned nor a parameter in it."""
    loaded = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    local = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local |= {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}  # parameters, lambdas' too
    return loaded - local


def not_at_top_level(path: Path, names: Iterable[str], root: Path = HERE) -> list[str]:
    """Rule ``top-level``: each answer in ``names``, and each helper an answer reads, is defined
    at the top level of a cell (where the grader's checking process defines it).

    An answer or helper bound only inside a statement the grader skips (a ``with``, ``for``,
    ``if`` or ``try`` block, an augmented assignment) is an offence; a name the notebook never
    binds is not (the grader reports it as not attempted)."""
    from course.grading.worker import definitions

    top: set[str] = set()
    hidden: dict[str, tuple[int, int, str]] = {}
    answers: dict[str, ast.AST] = {}
    names = set(names)
    for number, source, _ in code_cells(root / path):
        tree = _parse(source)
        if tree is None:
            continue
        kept = {ast.dump(m.body[0]) for m in definitions(source)}  # what the grader runs
        for stmt in tree.body:
            bound = list(_bound(stmt))
            if ast.dump(stmt) in kept:
                top |= {name for name, _ in bound}
                if isinstance(stmt, _SCOPES) and stmt.name in names:
                    answers[stmt.name] = stmt
            else:
                kind = type(stmt).__name__.lower().replace("asyncwith", "with")
                for name, line in bound:
                    hidden.setdefault(name, (number, line, kind))
    found = []
    for name in sorted(names & set(hidden) - top):
        cell, line, kind = hidden[name]
        found.append(
            offence(
                "top-level",
                f"{path}, cell {cell}, line {line}",
                f"{name} is defined inside a `{kind}` statement, which the grader does not run",
                name=name,
                block=kind,
            )
        )
    for answer, fn in sorted(answers.items()):
        for helper in sorted(_reads(fn) & set(hidden) - top):
            cell, line, kind = hidden[helper]
            found.append(
                offence(
                    "top-level",
                    f"{path}, cell {cell}, line {line}",
                    f"{answer} reads {helper}, which is defined inside a `{kind}` statement the grader does not run",
                    name=helper,
                    block=kind,
                )
            )
    return found


def _literals(tree: ast.Module) -> Iterable[tuple[object, int]]:
    """(value, line) for every container literal of a cell that Python evaluates on its own."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Dict, ast.Set)):
            try:
                yield ast.literal_eval(node), node.lineno
            except ValueError:
                continue


def predictions_written_down(path: Path, exercises: Iterable, root: Path = HERE) -> list[str]:
    """Rule ``prediction-literal``: no code cell of the (learner) notebook holds, as a literal,
    the answer of a prediction whose answer is a container of two or more items (a lone number
    is too common to tell)."""
    predictions = [
        ex
        for ex in exercises
        if ex.kind == "predict" and isinstance(ex.solution, (tuple, list, dict)) and len(ex.solution) >= 2
    ]
    found = []
    for number, source, _ in code_cells(root / path):
        tree = _parse(source)
        for value, line in _literals(tree) if tree and predictions else ():
            found += [
                offence(
                    "prediction-literal",
                    f"{path}, cell {number}, line {line}",
                    f"the answer of prediction {ex.id} ({ex.name}) is written there",
                    name=ex.name,
                )
                for ex in predictions
                if value == ex.solution
            ]
    return found


#: What changes from run to run in a printed output: a memory address, an absolute path of
#: this machine, a timestamp.
UNSTABLE = re.compile(
    r"0x[0-9a-fA-F]{6,16}|(?:/tmp/|/home/|/Users/|/work/|site-packages/)\S*"
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d"
)


def _ignored_by_nbval(source: str, cell: dict) -> bool:
    tags = {t.lower() for t in cell.get("metadata", {}).get("tags", [])}
    return "nbval-ignore-output" in tags or "# NBVAL_IGNORE_OUTPUT" in source


def _output_text(output: dict) -> str:
    text = output.get("text") or output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


def unstable_outputs(path: Path, root: Path = HERE) -> list[str]:
    """Rule ``deterministic``: no stored output that nbval compares holds what changes between
    runs (:data:`UNSTABLE`). ``nbval_sanitize.cfg`` would mask it, but the learner reads it."""
    lesson = Path(path).name[:2]
    found = []
    for number, source, cell in code_cells(root / path):
        if _ignored_by_nbval(source, cell):
            continue
        for output in cell.get("outputs", []):
            m = UNSTABLE.search(_output_text(output))
            if m:
                found.append(
                    offence(
                        "deterministic",
                        f"{path}, cell {number}",
                        f"its stored output holds {m.group(0)!r}, which changes from run to run",
                        lesson=lesson,
                    )
                )
                break
    return found


def minutes_disagree(path: Path, lesson, root: Path = HERE) -> list[str]:
    """Rule ``minutes``: the time the lesson's opening cell announces ("About 45-60 minutes") is
    the time ``course/lessons.py`` lists (``lesson.time_text``), or none is announced."""
    found = cells.cells((root / path).read_bytes())
    opening = cells.source(found[0]) if found else ""
    stated = re.findall(r"[Aa]bout (\d+(?:-\d+)? minutes)", opening)
    if stated in ([], [lesson.time_text]):
        return []
    what = f"the opening says {', '.join(map(repr, stated))}, course/lessons.py says {lesson.time_text!r}"
    return [offence("minutes", f"{path}, cell 1", what, time_text=lesson.time_text, notebook=path)]
