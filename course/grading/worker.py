"""The grader's worker: run ONE exercise's answer, in a fresh process, and report outcomes.

``python -m course.grading.worker SPEC.json OUT_DIR`` (started by ``course grade``; not meant
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

Steps 2-4 run once per exercise, each in a fresh process: a child forked after step 1 (so
torch is imported once per notebook), or, where there is no ``fork``, a worker per exercise.
One answer's side effects (global hooks left installed, grad mode switched off) cannot
reach another exercise's check.

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
import signal
import sys
import time
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


class _Discard(io.TextIOBase):
    """Where the learner's prints go while checking: nowhere (so a flood costs no memory)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


class _NoIPython:
    """``get_ipython()`` for code outside IPython: every call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _check_one(ex, spec: dict, tools: dict, out_path: str) -> None:
    """Steps 2-4 for one exercise, in a process of its own (learner code runs here)."""
    time_limit, timeout_error, missing = tools["time_limit"], tools["timeout_error"], tools["missing"]
    case_timeout = min(float(spec["cell_timeout"]), float(ex.timeout))
    os.chdir(spec["cwd"])
    sys.path.insert(0, spec["cwd"])
    namespace = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": _NoIPython}
    notes: list[str] = []
    sink = _Discard()
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
    answer = namespace.get(ex.name, missing)
    with redirect_stdout(sink), redirect_stderr(sink):
        yours = tools["outcomes_of"](ex, answer, timeout=case_timeout)
        cost = tools["measure_cost"](ex, answer, timeout=case_timeout) if ex.cost else {}
    tools["save"]({"yours": yours, "cost": cost, "defined": answer is not missing, "notes": notes}, out_path)


def _fork_each(exercises: list, spec: dict, tools: dict, out_dir: str) -> None:
    """One forked child per exercise, all at once; a child past ``spec["limit"]`` is killed.
    This process runs no learner code: it only forks, waits and reports overruns."""
    deadline = time.monotonic() + float(spec["limit"])
    children = {}
    for ex in exercises:
        pid = os.fork()
        if pid == 0:  # the child: fresh copy of this process, learner code allowed from here on
            code = 0
            try:
                _check_one(ex, spec, tools, os.path.join(out_dir, f"{ex.id}.pt"))
            except BaseException:
                code = 1
            os._exit(code)
        children[pid] = ex
    while children:
        for pid in list(children):
            done, _status = os.waitpid(pid, os.WNOHANG)
            if done:
                del children[pid]
        if children and time.monotonic() > deadline:
            for pid, ex in children.items():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                tools["save"]({"failure": f"timeout: checking ran past {spec['limit']:g} s"},
                              os.path.join(out_dir, f"{ex.id}.pt"))
            children.clear()
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    """``python -m course.grading.worker SPEC.json OUT_DIR``: writes ``OUT_DIR/<id>.pt`` per exercise.

    SPEC holds ``exercises`` (ids), ``cells`` ([index, source] of the code cells), ``cwd``,
    ``cell_timeout`` and ``limit`` (seconds for each exercise's whole check). Where ``fork``
    exists, each exercise is checked in a forked child (one torch import for the notebook,
    still a fresh process per exercise); elsewhere the spec must name one exercise, checked here.
    """
    argv = sys.argv[1:] if argv is None else argv
    spec_path, out_dir = argv
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)

    # 1. Capture everything we rely on before any learner code runs.
    import torch

    from course import checks

    exercises = [copy.deepcopy(checks.get(i)) for i in spec["exercises"]]
    tools = dict(outcomes_of=checks.outcomes_of, measure_cost=checks.measure_cost, missing=checks.MISSING,
                 time_limit=checks._time_limit, timeout_error=checks.CaseTimeout, save=torch.save)
    if hasattr(os, "fork"):
        _fork_each(exercises, spec, tools, out_dir)
    else:
        (ex,) = exercises
        _check_one(ex, spec, tools, os.path.join(out_dir, f"{ex.id}.pt"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
