"""The grader's worker: run ONE exercise's answer, in a fresh process, and report outcomes.

``python -m course.grading_worker SPEC.json OUT.pt`` (started by ``course grade``; not meant
to be run by hand). The order of events is the point of this module:

1. Before any learner code runs, import torch and the checks, and take private copies of
   what we will use: the exercise (deep-copied, so its case tensors cannot be changed
   through the registry), ``outcomes_of``, ``measure_cost`` and ``torch.save``.
2. Extract only the learner's *definitions* from the notebook's code cells: top-level
   ``import``, ``def``, ``class`` and assignments to plain names (``x = ...``, ``a, b = ...``),
   statement by statement, each under a time limit, with stdout and stderr discarded.
   Everything else (calls such as ``check(...)``, ``print``, plotting, loops, attribute or
   item assignments such as ``course.checks.check = ...``, IPython magics) is not run.
3. Look the answer up by the exercise's ``name``; run it on every case (visible and hidden)
   with the per-case time limit; measure its cost if the exercise is cost-graded.
4. Write the outcomes (plain data: tensors, numbers, strings) with ``torch.save``.

The worker never decides pass or fail: the grading process, which runs no learner code,
loads the outcomes with ``torch.load(weights_only=True)`` and compares them with the
oracle's. Whatever the learner's code does in here (patch the checks, patch torch, print
"passed") can only change the outcomes it reports for its own answer.
"""

from __future__ import annotations

import ast
import builtins
import copy
import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout

__all__ = ["definitions", "main"]

_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _plain_target(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return True
    return isinstance(node, (ast.Tuple, ast.List)) and all(_plain_target(e) for e in node.elts)


def _is_definition(stmt: ast.stmt) -> bool:
    if isinstance(stmt, _KEPT):
        return True
    if isinstance(stmt, ast.Assign):
        return all(_plain_target(t) for t in stmt.targets)
    return isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name)


def definitions(source: str) -> list[ast.Module]:
    """The definitions of one cell, one module per statement (IPython syntax understood).

    Raises:
        SyntaxError: the cell is not Python (e.g. a markdown cell retyped as code).

    Example:
        >>> [ast.unparse(m) for m in definitions("%matplotlib inline\\nimport torch\\nprint(1)\\nx = 2\\nx.y = 3")]
        ['import torch', 'x = 2']
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:  # perhaps IPython syntax (%magic, !shell): let IPython translate it
        from IPython.core.inputtransformer2 import TransformerManager

        tree = ast.parse(TransformerManager().transform_cell(source))
    return [ast.Module(body=[s], type_ignores=[]) for s in tree.body if _is_definition(s)]


class _NoIPython:
    """``get_ipython()`` for code outside IPython: every call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec_path, out_path = argv
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)

    # 1. Capture everything we rely on before learner code runs.
    import torch

    from course import checks

    ex = copy.deepcopy(checks.get(spec["exercise"]))
    outcomes_of, measure_cost, missing = checks.outcomes_of, checks.measure_cost, checks.MISSING
    time_limit, save, timeout_error = checks._time_limit, torch.save, checks.CaseTimeout
    case_timeout = float(spec.get("case_timeout") or ex.timeout)

    # 2. The learner's definitions, statement by statement.
    os.chdir(spec["cwd"])
    sys.path.insert(0, spec["cwd"])
    namespace = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": _NoIPython}
    notes: list[str] = []
    sink = io.StringIO()
    for index, source in spec["cells"]:
        try:
            statements = definitions(source)
        except SyntaxError as e:
            notes.append(f"cell {index}: not Python ({e.msg}), skipped")
            continue
        for stmt in statements:
            try:
                with redirect_stdout(sink), redirect_stderr(sink), time_limit(spec["cell_timeout"]):
                    exec(compile(stmt, f"<cell {index}>", "exec"), namespace)
            except timeout_error:
                notes.append(f"cell {index}: a definition ran past {spec['cell_timeout']:g} s")
            except Exception as e:
                notes.append(f"cell {index}: {type(e).__name__}: {str(e)[:200]}")
            sink.seek(0)
            sink.truncate()

    # 3. Run the answer on every case.
    answer = namespace.get(ex.name, missing)
    with redirect_stdout(sink), redirect_stderr(sink):
        yours = outcomes_of(ex, answer, timeout=case_timeout)
        cost = measure_cost(ex, answer, timeout=case_timeout) if ex.cost else {}

    # 4. Report plain data only.
    save({"yours": yours, "cost": cost, "defined": answer is not missing, "notes": notes}, out_path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
