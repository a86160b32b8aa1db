"""``course assign``: turn every ``solutions/NN_slug.ipynb`` into ``notebooks/NN_slug.ipynb``.

A lesson is written once, with its solutions, in ``solutions/``. The learner copy is
generated, like nbgrader's ``clearsolutions`` preprocessor:

- a region of a code cell between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes,
  at the region's indentation, a size hint and a greppable stub::

      # YOUR CODE HERE (about 3 lines)
      raise NotImplementedError("exercise 0.1")

  A region at top level (a prediction, say) also names what to define, and assigns each
  name it defines the placeholder ``...`` instead of raising, so "Run All" goes on and the
  check reports the exercise as not attempted::

      # YOUR CODE HERE (about 1 line; define predicted_a_grad)
      predicted_a_grad = ...  # exercise 0.2: write your answer in place of ...

  (a top-level region that defines a function or class keeps the raising stub).
- the exercise id comes from (first match wins): an id on the marker
  (``### BEGIN SOLUTION 0.1``); else the name the region defines (the ``def``/``class`` it
  sits in, or the names it assigns at top level) looked up among the exercises that
  ``course/checks/lessonNN/`` registers for this lesson (NN from the file name); else a
  ``check("N.M")`` call in the same cell or the next code cell;
- a cell whose top-level region keeps a raising stub gets nbval's ``raises-exception`` tag,
  so "Run All" and ``pytest --nbval-lax`` go on past it;
- outputs and execution counts are cleared, except in cells tagged ``keep_output``;
- notebook metadata is kept, and the kernelspec is set to ``python3`` if missing, so
  JupyterLab opens the copy without asking for a kernel; ``language_info`` is what the kernel
  reports (:data:`LANGUAGE_INFO`).

Malformed markers (unclosed, nested, an END without a BEGIN, markers in a markdown cell)
stop with an error naming the notebook, the cell and the line.

``course assign --check`` regenerates in memory and fails if ``notebooks/`` differs.
``course assign --execute`` first runs each solution notebook in a fresh kernel and stores
its outputs (what nbval compares), then writes the learner copies.

Example:
    >>> print(clear_solutions('def f(x):\\n    ### BEGIN SOLUTION\\n    return 2 * x\\n'
    ...                       '    ### END SOLUTION\\n', lambda name: "0.1", where="demo"))
    def f(x):
        # YOUR CODE HERE (about 1 line)
        raise NotImplementedError("exercise 0.1")
    <BLANKLINE>
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat

from course.house.rules import offence

__all__ = ["AssignError", "clear_solutions", "execute_solution", "learner_copy", "lesson_paths", "main"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
KEEP_OUTPUT_TAG = "keep_output"
RAISES_TAG = "raises-exception"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
#: What ipykernel reports of its language, less the Python version (which differs from one
#: machine to the next). A learner's copy gets the exact report of the Python it runs in when
#: ``course start`` writes it (:func:`course.learner.copies.kernel_language_info`: JupyterLab
#: marks a tab unsaved when the stored report differs from the kernel's).
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}
LESSON_FILE = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")
_CHECK_CALL = re.compile(r"""check\(\s*["'](\d+\.\d+)["']""")
_MARKER = re.compile(r"^\s*###\s*(BEGIN|END)\s+SOLUTION\b(.*)$")


class AssignError(ValueError):
    """A malformed solution region; the message names notebook, cell and line."""


def _region_names(lines: list[str], begin: int, body: list[str], indent: str) -> list[str]:
    """Names a region defines: its enclosing defs/classes, innermost first (a region in a
    method or a nested function belongs to the registered name around it), or what it
    assigns at top level."""
    enclosing, depth = [], len(indent)
    for line in reversed(lines[:begin]):
        stripped = line.lstrip()
        if stripped and len(line) - len(stripped) < depth:
            depth = len(line) - len(stripped)
            m = re.match(r"(?:async\s+)?(?:def|class)\s+(\w+)", stripped)
            if m:
                enclosing.append(m.group(1))
    if enclosing:
        return enclosing
    try:
        tree = ast.parse("\n".join(line[len(indent) :] for line in body))
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)] if target else []
    return names


def _size_hint(body: list[str]) -> str:
    n = sum(1 for line in body if line.strip() and not line.strip().startswith("#"))
    return f"about {n} line" + ("" if n == 1 else "s")


def clear_solutions(source: str, exercise_for: Callable[[str | None], str | None], where: str) -> str:
    """Replace every solution region of one code cell's ``source`` by a stub.

    Args:
        source: the cell's source.
        exercise_for: maps a name the region defines (or None) to the exercise id, or None.
        where: "notebook, cell N", for error messages.

    Returns:
        The learner's source.

    Raises:
        AssignError: unclosed, nested or stray markers, or no exercise id can be derived.
    """
    lines = source.split("\n")
    out: list[str] = []
    begin: int | None = None
    for i, line in enumerate(lines):
        m = _MARKER.match(line)
        if not m:
            if begin is None:
                out.append(line)
            continue
        if m.group(1) == "BEGIN":
            if begin is not None:
                raise AssignError(
                    f"{where}, line {i + 1}: nested {BEGIN} (the one on line {begin + 1} is still open)"
                )
            begin, explicit = i, m.group(2).strip() or None
            continue
        if begin is None:
            raise AssignError(f"{where}, line {i + 1}: {END} without a {BEGIN}")
        indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
        body = lines[begin + 1 : i]
        ex_id = explicit
        for name in [] if ex_id else _region_names(lines, begin, body, indent) or [None]:
            ex_id = exercise_for(name)
            if ex_id:
                break
        if not ex_id or not re.fullmatch(r"\d+\.\d+", ex_id):
            raise AssignError(
                f"{where}, line {begin + 1}: cannot tell which exercise this region belongs to; "
                f"write `{BEGIN} N.M`, or register the name it defines in course/checks"
            )
        hint = _size_hint(body)
        placeholders = _placeholder_names(body) if not indent else []
        if not indent:  # a top-level region: say which names the learner must define
            defined = list(dict.fromkeys(_region_names(lines, begin, body, indent)))
            hint += f"; define {', '.join(defined)}" if defined else ""
        out.append(f"{indent}# YOUR CODE HERE ({hint})")
        if placeholders:  # a value to write down: a placeholder the check calls not attempted
            out += [
                f"{name} = ...  # exercise {ex_id}: write your answer in place of ..."
                for name in placeholders
            ]
        else:
            out.append(f'{indent}raise NotImplementedError("exercise {ex_id}")')
        begin = None
    if begin is not None:
        raise AssignError(f"{where}, line {begin + 1}: {BEGIN} is never closed by {END}")
    return "\n".join(out)


def _placeholder_names(body: list[str]) -> list[str]:
    """The names a top-level region assigns, when it only assigns plain names (a value to
    write down); [] when it defines a function or class, or does anything else."""
    try:
        tree = ast.parse("\n".join(body))
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            names += [t.id for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        else:
            return []
    return list(dict.fromkeys(names))


def _raises_at_top_level(learner_source: str) -> bool:
    return any(line.startswith("raise NotImplementedError(") for line in learner_source.split("\n"))


def _exercise_lookup(lesson: int, next_sources: list[str]) -> Callable[[str | None], str | None]:
    from course import checks

    def lookup(name: str | None) -> str | None:
        ex = checks.by_name(lesson, name) if name else None
        if ex is not None:
            return ex.id
        for src in next_sources:
            m = _CHECK_CALL.search(src)
            if m:
                return m.group(1)
        return None

    return lookup


def learner_copy(nb: nbformat.NotebookNode, path: Path) -> nbformat.NotebookNode:
    """The learner copy of the solution notebook ``nb`` (read from ``path``); ``nb`` is unchanged.

    Raises:
        AssignError: a malformed region (see :func:`clear_solutions`).
    """
    m = LESSON_FILE.match(path.name)
    lesson = int(m.group(1)) if m else -1
    nb = copy.deepcopy(nb)
    code_sources = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for idx, cell in enumerate(nb.cells):
        where = f"{path}, cell {idx} ({cell.cell_type})"
        if cell.cell_type != "code":
            for n, line in enumerate(cell.source.split("\n")):
                if _MARKER.match(line):
                    raise AssignError(f"{where}, line {n + 1}: solution markers belong in code cells")
            continue
        following = [src for i, src in code_sources if i >= idx][:2]  # this cell and the next code cell
        if any(_MARKER.match(line) for line in cell.source.split("\n")):
            cell.source = clear_solutions(cell.source, _exercise_lookup(lesson, following), where)
            if _raises_at_top_level(cell.source) and RAISES_TAG not in cell.metadata.get("tags", []):
                cell.metadata.setdefault("tags", []).append(RAISES_TAG)
        cell.metadata.pop("execution", None)
        if KEEP_OUTPUT_TAG not in cell.metadata.get("tags", []):
            cell.outputs, cell.execution_count = [], None
    nb.metadata["kernelspec"] = {**KERNELSPEC, **nb.metadata.get("kernelspec", {})}
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    nbformat.validate(nb)
    return nb


def lesson_paths(solutions: Path) -> list[Path]:
    """Every ``NN_slug.ipynb`` in ``solutions``, sorted."""
    return sorted(p for p in solutions.glob("*.ipynb") if LESSON_FILE.match(p.name))


def _render(nb: nbformat.NotebookNode) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def execute_solution(path: Path, cell_timeout: float = 600) -> None:
    """Run the solution notebook ``path`` in a fresh kernel and store its outputs in place.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised (a solution must run clean).
    """
    from course.grading.kernel import run_notebook

    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {**KERNELSPEC, **nb.metadata.get("kernelspec", {})}
    run = run_notebook(
        nb, path.parent, cell_timeout, total_timeout=10 * cell_timeout, keep_outputs=True, allow_errors=False
    )
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)  # the kernel's report, less its version
    text = _render(nb)
    if path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    print(f"executed {path} ({len(run.cells)} code cells, {run.seconds:.1f} s)")


def _out_of_date(dest: Path, src: Path) -> str:
    """The house-rule offence of a learner copy that is not what its solution generates."""
    what = f"out of date: it is not what {src} generates, byte for byte"
    return offence("learner-copy", str(dest), what, lesson=src.name[:2], notebook=dest)


def _generate_solutions_module(root: Path, src: Path, check: bool) -> list[str]:
    """Write (or, with ``check``, compare) the module of ``src``'s reference solutions that the
    checks import (:mod:`course.house.solutions`); only in a checkout that holds the checks."""
    from course.house.solutions import SolutionsError, module_path, solutions_module

    if not (root / "course" / "checks").is_dir():
        return []
    dest = module_path(root, src)
    try:
        text = solutions_module(src)
    except SolutionsError as e:
        return [f"error: {e}"]
    current = dest.read_text(encoding="utf-8") if dest.exists() else None
    if current == text:
        return []
    if check:
        what = f"it is not what the solution regions of {src.relative_to(root)} make"
        return [offence("solutions-once", str(dest.relative_to(root)), what, lesson=src.name[:2])]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text, encoding="utf-8")
    print(f"wrote {dest}")
    return []


def _default_root() -> Path:
    package_root = Path(__file__).resolve().parent.parent
    return package_root if (package_root / "solutions").is_dir() else Path.cwd()


def main(argv: list[str] | None = None) -> int:
    """``course assign [--check] [--root DIR]``: generate (or verify) the learner copies."""
    parser = argparse.ArgumentParser(prog="course assign", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if notebooks/ is not up to date")
    parser.add_argument("--execute", action="store_true", help="run solutions/ first and store their outputs")
    parser.add_argument("--root", type=Path, default=None, help="folder holding solutions/ and notebooks/")
    parser.add_argument("lessons", nargs="*", help="only these lessons (file names or NN prefixes)")
    args = parser.parse_args(argv)
    root = args.root or _default_root()
    solutions, notebooks = root / "solutions", root / "notebooks"
    paths = [
        p
        for p in lesson_paths(solutions)
        if not args.lessons or any(p.name.startswith(x) for x in args.lessons)
    ]
    if args.execute and not args.check:
        for src in paths:
            execute_solution(src)
    if not paths:
        print(f"course assign: no NN_slug.ipynb in {solutions}", file=sys.stderr)
        return 1
    problems: list[str] = []
    for src in paths:
        problems += _generate_solutions_module(root, src, check=args.check)
        dest = notebooks / src.name
        try:
            text = _render(learner_copy(nbformat.read(src, as_version=4), src))
        except AssignError as e:
            problems.append(f"error: {e}")
            continue
        current = dest.read_text(encoding="utf-8") if dest.exists() else None
        if args.check:
            if current != text:
                problems.append(_out_of_date(dest.relative_to(root), src.relative_to(root)))
        elif current != text:
            notebooks.mkdir(exist_ok=True)
            dest.write_text(text, encoding="utf-8")
            print(f"wrote {dest}")
    if args.check:
        # a learner copy whose solution is gone (with a lesson filter, only those lessons count)
        wanted = [
            p.name
            for p in notebooks.glob("*.ipynb")
            if not args.lessons or any(p.name.startswith(x) for x in args.lessons)
        ]
        stale = sorted(set(wanted) - {p.name for p in lesson_paths(solutions)})
        problems += [f"no solution for {notebooks / name}" for name in stale if LESSON_FILE.match(name)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if args.check and not problems:
        print(f"notebooks/ is up to date ({len(paths)} lessons)")
    return 1 if problems else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
