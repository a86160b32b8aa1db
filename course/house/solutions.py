"""Each reference solution written once: in its lesson's solution notebook, copied from there.

An exercise's reference solution is what the check compares a learner's answer against, and
what the lesson shows once the learner has tried. It is typed in one place only, the solution
region of ``solutions/NN_slug.ipynb``; :func:`solutions_module` turns a notebook into the
module ``course/checks/solutions/lessonNN.py`` that the checks import, as d2l's library is
generated from its notebooks. ``course assign`` writes both generated copies (that module and
the learner copy), and ``course assign --check`` fails when either is not what the notebook
makes (house rule "solutions written once").

What goes into the module, in the notebook's order:

- every top-level statement of a code cell that holds a solution region (the ``def`` or
  ``class`` around a region, or the assignment a prediction's region makes), with the marker
  lines dropped;
- the notebook's imports those statements read (found with :mod:`symtable`: the names a
  statement reads at module level and does not define), and nothing else of the notebook.

A solution that reads any other name of the notebook (a tensor made in an earlier cell, say)
cannot be copied alone and is refused, naming the cell and the name::

    >>> cells = ["import torch\\nimport math", "x = torch.ones(2)",
    ...          "def double(x):\\n    ### BEGIN SOLUTION\\n    return torch.mul(x, 2)\\n    ### END SOLUTION"]
    >>> print(solution_statements(cells, where="demo.ipynb"))
    import torch
    <BLANKLINE>
    <BLANKLINE>
    def double(x):
        return torch.mul(x, 2)
    <BLANKLINE>
    >>> solution_statements(["x = 2", "def f():\\n    ### BEGIN SOLUTION\\n    return x\\n    ### END SOLUTION"],
    ...                     where="demo.ipynb")
    Traceback (most recent call last):
    ...
    course.house.solutions.SolutionsError: demo.ipynb: a solution reads 'x', which the notebook ...
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from pathlib import Path

__all__ = ["SolutionsError", "module_path", "solution_statements", "solutions_module"]

_MARKER = re.compile(r"^\s*###\s*(BEGIN|END)\s+SOLUTION\b")
_BUILTINS = frozenset(dir(builtins))


class SolutionsError(ValueError):
    """A solution that cannot be copied on its own; the message names the cell and the name."""


def module_path(root: Path, notebook: Path) -> Path:
    """Where the module generated from ``solutions/NN_slug.ipynb`` lives."""
    return root / "course" / "checks" / "solutions" / f"lesson{notebook.name[:2]}.py"


def _statements(source: str) -> list[tuple[ast.stmt, int, int]]:
    """Each top-level statement of a cell with its first and last line (decorators included)."""
    return [
        (node, min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]), node.end_lineno)
        for node in ast.parse(source).body
    ]


def _region_lines(lines: list[str]) -> set[int]:
    """The line numbers (1-based) inside solution regions, markers included."""
    inside, found = False, set()
    for number, line in enumerate(lines, start=1):
        m = _MARKER.match(line)
        if m and m.group(1) == "BEGIN":
            inside = True
        if inside:
            found.add(number)
        if m and m.group(1) == "END":
            inside = False
    return found


def _defines(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _binds_a_package_by_a_submodule(node: ast.stmt, name: str) -> bool:
    """Whether ``node`` binds ``name`` only as ``import name.sub`` does: a plain ``import name``
    met earlier is what a solution reading ``name`` should get, not a submodule's import."""
    binding = [alias for alias in node.names if (alias.asname or alias.name).split(".")[0] == name]
    return isinstance(node, ast.Import) and all("." in a.name and a.asname is None for a in binding)


def _reads(text: str) -> set[str]:
    """The module-level names ``text`` reads and does not define (every scope in it)."""
    needed: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        for symbol in table.get_symbols():
            if table.get_type() == "module":
                if symbol.is_referenced() and not symbol.is_assigned() and not symbol.is_imported():
                    needed.add(symbol.get_name())
            elif symbol.is_global() and not symbol.is_declared_global():
                needed.add(symbol.get_name())
        for child in table.get_children():
            walk(child)

    walk(symtable.symtable(text, "<solution>", "exec"))
    return needed - _BUILTINS


def solution_statements(cells: list[str], where: str) -> str:
    """The solutions of a notebook's code ``cells`` and the imports they read, as one module body.

    Raises:
        SolutionsError: a solution reads a name of the notebook that is not an import.
    """
    picked: list[tuple[int, str, bool]] = []  # (order, text, is a solution)
    imports: dict[str, tuple[int, str]] = {}
    order = 0
    for source in cells:
        if any(line.lstrip().startswith(("%", "!")) for line in source.split("\n")):
            continue  # a magic: not Python, and never a solution
        lines = source.split("\n")
        region = _region_lines(lines)
        for node, first, last in _statements(source):
            order += 1
            text = "\n".join(line for line in lines[first - 1 : last] if not _MARKER.match(line))
            if region & set(range(first, last + 1)):
                picked.append((order, text, True))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _defines(node):
                    if name not in imports or not _binds_a_package_by_a_submodule(node, name):
                        imports[name] = (order, text)
    defined = set().union(*(_defines(ast.parse(text).body[0]) for _, text, _ in picked)) if picked else set()
    wanted: dict[int, str] = {}
    for _, text, _ in picked:
        for name in sorted(_reads(text) - defined):
            if name not in imports:
                raise SolutionsError(
                    f"{where}: a solution reads {name!r}, which the notebook defines outside an import; "
                    "a reference solution must stand alone: pass it as an argument, or import it"
                )
            wanted[imports[name][0]] = imports[name][1]
    head = "\n".join(text for _, text in sorted(wanted.items()))
    return "\n\n\n".join(([head] if head else []) + [text for _, text, _ in sorted(picked)]) + "\n"


def solutions_module(notebook: Path) -> str:
    """The text of the module generated from the solution notebook ``notebook``."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    body = solution_statements(cells, where=str(notebook))
    head = (
        f'"""Lesson {notebook.name[:2]}\'s reference solutions, copied from solutions/{notebook.name}.\n\n'
        f"Generated by ``course assign``: don't edit it; edit the notebook's solution regions, then\n"
        f'run ``course assign {notebook.name[:2]}`` (house rule "solutions written once").\n'
        '"""\n\n'
    )
    return head + body
