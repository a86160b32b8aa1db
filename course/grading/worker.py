"""The grader's checking processes: run a notebook's answers where nothing is decided.

``python -m course.grading.worker --serve N...`` is started once by ``course grade`` (not meant to
be run by hand). The order of events is the point of this module:

1. **The checking server starts before any learner code runs.** It imports torch, the checks
   of the lessons it will check and what the checking itself needs (IPython's cell translator,
   ``torch.save``), takes private copies of the functions it will call, pins torch to one
   thread (a fork after a parallel region would hang in the child), prints ``ready`` and
   waits for jobs on stdin, one JSON line per notebook.
2. **One fork per notebook runs its definitions once.** The child executes only the
   notebook's *definitions*: top-level ``import``, ``def``, ``class`` and assignments to
   plain names (``x = ...``, ``a, b = ...``), statement by statement, each under a time
   limit, with stdout and stderr discarded. Everything else (calls such as ``check(...)``,
   ``print``, plotting, loops, attribute or item assignments such as
   ``course.checks.check = ...``, IPython magics) is not run.
3. **One fork of that child per exercise runs the answer.** Each looks the answer up by the
   exercise's ``name``, runs it on every visible and hidden case with the per-case time
   limit, measures its cost if the exercise is cost-graded, and writes the outcomes (plain
   data: tensors, numbers, strings) with ``torch.save``. The forks start from the state the
   definitions left, so one answer's side effects (global hooks left installed, grad mode
   switched off) cannot reach another exercise's check, and a large global is built once and
   shared (copy-on-write) instead of once per exercise.

The server never decides pass or fail: the grading process, which runs no learner code,
loads the outcomes with ``torch.load(weights_only=True)`` and compares them with the
oracle's. Whatever learner code does in here (patch the checks, patch torch, print
"passed", rewrite files of the course package) can only change the outcomes reported for
that notebook's own answers: the server imported everything before any learner code ran.

Where ``os.fork`` does not exist, ``python -m course.grading.worker SPEC.json OUT_DIR``
checks one exercise in a fresh process instead (steps 2 and 3 in one process).

Ending what learner code started is :mod:`course.grading.processes`' job.
"""

from __future__ import annotations

import ast
import builtins
import copy
import io
import json
import os
import select
import signal
import sys
import time
from contextlib import redirect_stderr, redirect_stdout

from course.timeouts import time_limit

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


class _DefinitionTimeout(BaseException):
    """A definition ran past the cell timeout (a BaseException: ``except Exception`` in
    learner code cannot swallow it)."""


def _run_definitions(spec: dict) -> tuple[dict, list[str]]:
    """Step 2: the notebook's definitions, executed in a fresh namespace; (namespace, notes)."""
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
                with redirect_stdout(sink), redirect_stderr(sink), time_limit(float(spec["cell_timeout"]), _DefinitionTimeout):
                    exec(compile(stmt, f"<cell {index}>", "exec"), namespace)
            except _DefinitionTimeout:
                notes.append(f"cell {index}: a definition ran past {spec['cell_timeout']:g} s")
            except Exception as e:
                notes.append(f"cell {index}: {type(e).__name__}: {str(e)[:200]}")
    return namespace, notes


def _run_answer(ex, spec: dict, tools: dict, namespace: dict, notes: list[str], out_path: str) -> None:
    """Step 3 for one exercise: its answer on every case, outcomes saved to ``out_path``."""
    case_timeout = min(float(spec["cell_timeout"]), float(ex.timeout))
    answer = namespace.get(ex.name, tools["missing"])
    sink = _Discard()
    with redirect_stdout(sink), redirect_stderr(sink):
        yours = tools["outcomes_of"](ex, answer, timeout=case_timeout)
        cost = tools["measure_cost"](ex, answer, timeout=case_timeout) if ex.cost else {}
    tools["save"]({"yours": yours, "cost": cost, "defined": answer is not tools["missing"], "notes": notes}, out_path)


def _silence_standard_streams() -> None:
    """A checking process must not read the server's jobs nor write into its replies."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)


def _check_notebook(spec: dict, tools: dict) -> None:
    """Steps 2 and 3, in the notebook's own fork; a fork per exercise, killed past ``limit``."""
    fork, exit_, kill, waitpid, monotonic, sleep = (tools[k] for k in ("fork", "exit", "kill", "waitpid",
                                                                       "monotonic", "sleep"))
    exercises = [tools["exercises"][i] for i in spec["exercises"]]
    namespace, notes = _run_definitions(spec)
    deadline = monotonic() + float(spec["limit"])
    children = {}
    for ex in exercises:
        pid = fork()
        if pid == 0:  # the exercise's own copy of the notebook's state
            code = 0
            try:
                _run_answer(ex, spec, tools, namespace, notes, os.path.join(spec["out"], f"{ex.id}.pt"))
            except BaseException:
                code = 1
            exit_(code)
        children[pid] = ex
    while children:
        for pid in list(children):
            if waitpid(pid, os.WNOHANG)[0]:
                del children[pid]
        if children and monotonic() > deadline:
            for pid, ex in children.items():
                kill(pid, signal.SIGKILL)
                waitpid(pid, 0)
                tools["save"]({"failure": f"timeout: checking ran past {spec['limit']:g} s"},
                              os.path.join(spec["out"], f"{ex.id}.pt"))
            children.clear()
        sleep(0.02)


def _prepare(lessons: list[int]) -> dict:
    """Step 1: import and capture everything the checking uses, before any learner code."""
    import torch
    from IPython.core.inputtransformer2 import TransformerManager  # noqa: F401 (definitions() uses it)

    from course import checks

    for lesson in lessons:
        checks.all_exercises(lesson)  # imports course/checks/lessonNN.py
    torch.set_num_threads(1)  # a fork after an OpenMP parallel region hangs in the child
    torch.save({"warm": [torch.zeros(1)]}, io.BytesIO())  # the pickler's modules, loaded now
    exercises = {ex.id: copy.deepcopy(ex) for n in lessons for ex in checks.all_exercises(n)}  # private copies
    return dict(exercises=exercises, outcomes_of=checks.outcomes_of, measure_cost=checks.measure_cost,
                missing=checks.MISSING, save=torch.save, fork=os.fork, exit=os._exit, kill=os.kill,
                waitpid=os.waitpid, monotonic=time.monotonic, sleep=time.sleep)


def _reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve(lessons: list[int]) -> int:
    """The checking server for ``lessons``: one JSON job per stdin line, one reply per job.

    A job: ``{"job", "exercises" (ids), "cells" ([index, source] of the code cells), "cwd",
    "cell_timeout", "limit", "out"}``. The reply ``{"job", "exit"}`` comes when the notebook's
    fork has ended; its outcomes are the files ``OUT/<id>.pt``. A fork still running
    ``2 * limit + 30`` s after its job arrived is killed (``"exit": "killed"``). End of stdin:
    finish the jobs in flight, then exit.
    """
    tools = _prepare(lessons)
    _reply({"ready": True})
    running: dict[int, tuple[str, float]] = {}  # pid -> (job, deadline)
    stdin_open, pending = True, b""
    while stdin_open or running:
        if stdin_open and select.select([0], [], [], 0.02 if running else None)[0]:
            chunk = os.read(0, 1 << 20)
            stdin_open, pending = bool(chunk), pending + chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                spec = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    code = 0
                    try:
                        _silence_standard_streams()
                        _check_notebook(spec, tools)
                    except BaseException:
                        code = 1
                    os._exit(code)
                running[pid] = (spec["job"], time.monotonic() + 2 * float(spec["limit"]) + 30)
        elif not stdin_open:
            time.sleep(0.02)
        for pid, (job, deadline) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if not done and time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                done, status = pid, "killed"
            if done:
                del running[pid]
                _reply({"job": job, "exit": status if status == "killed" else os.waitstatus_to_exitcode(status)})
    return 0


def _check_alone(spec_path: str, out_dir: str) -> int:
    """Where there is no ``fork``: one exercise (the spec names one), checked in this process."""
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    import torch

    from course import checks

    (ex,) = [copy.deepcopy(checks.get(i)) for i in spec["exercises"]]
    tools = dict(outcomes_of=checks.outcomes_of, measure_cost=checks.measure_cost, missing=checks.MISSING,
                 save=torch.save)
    namespace, notes = _run_definitions(spec)
    _run_answer(ex, spec, tools, namespace, notes, os.path.join(out_dir, f"{ex.id}.pt"))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``--serve N...`` (the checking server for lessons N...) or ``SPEC.json OUT_DIR`` (one
    exercise, where there is no fork)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        return serve([int(n) for n in argv[1:]])
    return _check_alone(*argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
