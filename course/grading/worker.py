"""The grader's checking processes: run a notebook's answers where nothing is decided.

``python -m course.grading.worker --serve N... [--extra-cases PATH SHA256]`` is started once by
``course grade`` (not meant to be run by hand). The order of events is the point of this module:

1. **The checking server starts before any learner code runs.** It imports torch, the checks
   of the lessons it will check and what the checking itself needs (IPython's cell translator,
   ``torch.save``), takes private copies of the functions it will call, pins torch to one
   thread (a fork after a parallel region would hang in the child), prints ``ready`` and
   waits for jobs on stdin, one JSON line per notebook.
2. **One fork per notebook, one fork of it per exercise.** The notebook's process runs no
   learner code: it forks one process per exercise, waits, and kills what runs past the limit.
3. **Each exercise's process runs the notebook's definitions, then the answer.** It executes
   only the notebook's *definitions*: top-level ``import``, ``def``, ``class`` and
   assignments to plain names (``x = ...``, ``a, b = ...``), statement by statement, each
   under a time limit, with stdout and stderr discarded. Everything else (calls such as
   ``check(...)``, ``print``, plotting, loops, attribute or item assignments such as
   ``course.checks.check = ...``, IPython magics) is not run. Then it looks the answer up by
   the exercise's ``name``, runs it on every visible and hidden case with the per-case time
   limit, measures its cost if the exercise is cost-graded, and writes the outcomes (plain
   data: tensors, numbers, strings) with ``torch.save``. One answer's side effects (global
   hooks left installed, grad mode switched off) cannot reach another exercise's check.

NOTE [No autograd before a fork]
    On a CUDA build of torch (every 2.14 wheel of the default index, GPU or not), the first
    backward pass starts autograd's device threads, and from then on a process forked from
    that one refuses to run a backward ("Unable to handle autograd's threading in
    combination with fork-based multiprocessing"; torch/csrc/autograd/engine.cpp,
    ``in_bad_autograd_fork``). So:

    1. the server imports and prepares, and never runs a backward (a test forks it and runs
       one: tests/test_grading.py);
    2. the notebook's process only forks and waits: no learner code runs in it;
    3. learner code (definitions and answer) runs only in a process that forks no further.

    4. an exercise's process first sets torch's thread count (one thread), which rebuilds
       the thread pool a fork leaves unusable; otherwise the device thread of its first
       backward rebuilds it while the main thread may too ("Invalid thread pool!", an
       abort; aten/src/ATen/ParallelOpenMP.cpp, ``set_num_threads``).

    # yes: server -> notebook (waits) -> exercise (definitions, answer, backward)
    # no:  server -> notebook (definitions: ``frames = backward_order_frames(loss)``) -> exercise
    The price: a notebook's definitions run once per exercise instead of once (in parallel;
    lesson 09's take about 5 s each). Importing the learner copies' modules in the server
    first made that 13.0 s instead of 22.7 s for lesson 09 on the CPU build, but on 2.14's
    CUDA build a fork of that server then refused a backward now and then, and 8.3's check
    hung: not done, until we know which import starts what. What is done: the server imports
    the libraries the lessons draw with (matplotlib, ipywidgets; they run no torch code), which
    took lesson 01's definitions from 0.55 s to 0.17 s per exercise.

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
import re
import select
import signal
import sys
import time
from contextlib import redirect_stderr, redirect_stdout

from course.timeouts import time_limit

__all__ = ["DRAWING_LIBRARIES", "definitions", "main"]

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


def _run_definitions(spec: dict) -> tuple[dict, list[tuple[int, str]]]:
    """The notebook's definitions, executed in a fresh namespace.

    Returns:
        (namespace, problems): ``problems`` holds ``(cell index, what went wrong)`` for every
        cell that is not Python and every definition that raised or ran too long; a cell is
        named by the number JupyterLab shows for it (1-based, every cell counted).
    """
    os.chdir(spec["cwd"])  # a private folder holding the notebook alone; it is not on sys.path
    namespace = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": _NoIPython}
    problems: list[tuple[int, str]] = []
    sink = _Discard()
    for index, source in spec["cells"]:
        where = f"cell {index + 1}"
        try:
            statements = definitions(source)
        except SyntaxError as e:
            problems.append(
                (index, f"{where}, line {e.lineno}: {type(e).__name__}: {e.msg} (the cell was skipped)")
            )
            continue
        for stmt in statements:
            line = stmt.body[0].lineno
            try:
                with (
                    redirect_stdout(sink),
                    redirect_stderr(sink),
                    time_limit(float(spec["cell_timeout"]), _DefinitionTimeout),
                ):
                    exec(compile(stmt, f"<cell {index + 1}>", "exec"), namespace)
            except _DefinitionTimeout:
                problems.append(
                    (index, f"{where}, line {line}: a definition ran past {spec['cell_timeout']:g} s")
                )
            except Exception as e:
                problems.append((index, f"{where}, line {line}: {type(e).__name__}: {str(e)[:200]}"))
    return namespace, problems


def _answer_cells(name: str, cells: list) -> set[int]:
    """The cells that define (or try to define) ``name``: where a problem concerns its exercise.

    Example:
        >>> sorted(_answer_cells("f", [[0, "def f(x):\\n  return x +"], [3, "g = f"], [5, "f: int = 2"]]))
        [0, 5]
    """
    pattern = re.compile(
        rf"^\s*(?:(?:async\s+)?def|class)\s+{re.escape(name)}\b|^\s*{re.escape(name)}\s*(?::[^=]*)?=(?!=)",
        re.MULTILINE,
    )
    return {index for index, source in cells if pattern.search(source)}


def _run_answer(ex, spec: dict, tools: dict, namespace: dict, problems: list, out_path: str) -> None:
    """One exercise: its answer on every case, outcomes saved to ``out_path``.

    Only the problems of the answer's own cells are reported with it; an answer that is not
    defined because its cell is not Python, or raised, is reported as that problem (a failure),
    never as "not attempted"."""
    mine = _answer_cells(ex.name, spec["cells"])
    notes = [text for index, text in problems if index in mine]
    answer = namespace.get(ex.name, tools["missing"])
    if answer is tools["missing"] and notes:
        tools["save"]({"failure": f"{ex.name} is not defined: " + "; ".join(notes[:3])}, out_path)
        return
    case_timeout = min(float(spec["cell_timeout"]), float(ex.timeout))
    sink = _Discard()
    with redirect_stdout(sink), redirect_stderr(sink):
        yours = tools["outcomes_of"](ex, answer, timeout=case_timeout)
        cost = tools["measure_cost"](ex, answer, timeout=case_timeout) if ex.cost else {}
    tools["save"](
        {"yours": yours, "cost": cost, "defined": answer is not tools["missing"], "notes": notes}, out_path
    )


def _silence_standard_streams() -> None:
    """A checking process must not read the server's jobs nor write into its replies."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)


def _check_notebook(spec: dict, tools: dict) -> None:
    """Steps 2 and 3: a fork per exercise (definitions, then the answer), killed past ``limit``.

    This process, the notebook's own, runs no learner code: it only forks and waits (see
    NOTE [No autograd before a fork])."""
    fork, exit_, kill, waitpid, monotonic, sleep = (
        tools[k] for k in ("fork", "exit", "kill", "waitpid", "monotonic", "sleep")
    )
    exercises = [tools["exercises"][i] for i in spec["exercises"]]
    deadline = monotonic() + float(spec["limit"])
    children = {}
    for ex in exercises:
        pid = fork()
        if pid == 0:  # the exercise's own process: the notebook's definitions, then its answer
            code = 0
            try:
                tools["set_num_threads"](1)  # rebuilds torch's thread pool now, while one thread runs (NOTE)
                namespace, problems = _run_definitions(spec)
                _run_answer(ex, spec, tools, namespace, problems, os.path.join(spec["out"], f"{ex.id}.pt"))
            except BaseException:
                code = 1
            exit_(code)
        children[pid] = ex
    while children:
        for pid in list(children):
            done, status = waitpid(pid, os.WNOHANG)
            if done:
                _report_silent_end(children.pop(pid), status, spec, tools)
        if children and monotonic() > deadline:
            for pid, ex in children.items():
                kill(pid, signal.SIGKILL)
                waitpid(pid, 0)
                tools["save"](
                    {"failure": f"timeout: checking ran past {spec['limit']:g} s"},
                    os.path.join(spec["out"], f"{ex.id}.pt"),
                )
            children.clear()
        sleep(0.02)


def _report_silent_end(ex, status: int, spec: dict, tools: dict) -> None:
    """An exercise's process that ended without its report (it crashed, or learner code ended
    it): say how it ended, at that exercise."""
    path = os.path.join(spec["out"], f"{ex.id}.pt")
    if os.path.lexists(path):
        return
    how = (
        f"killed by signal {os.WTERMSIG(status)}"
        if os.WIFSIGNALED(status)
        else f"exit status {os.waitstatus_to_exitcode(status)}"
    )
    tools["save"]({"failure": f"the checking process ended without a report ({how})"}, path)


def _add_extra_cases(extra: list | None) -> None:
    """The instructor's extra cases (``[path, sha256]``), added to the registry for good: this
    process checks one grading run, and the grading process loaded the same file."""
    if extra:
        from course.checks.extra import add_to_registry, load_extra_cases

        add_to_registry(load_extra_cases(extra[0], extra[1]))


DRAWING_LIBRARIES = ("matplotlib.pyplot", "ipywidgets")
# torch imports torch._dynamo on the first call of a function wrapped by torch._disable_dynamo
# (torch/_compile.py); lesson 01's check of 1.2 makes one, so every exercise's process paid
# 1.5 s (quiet) to 4 s (loaded) for it. An import, no autograd: the fork rule holds.
TORCH_LAZY_MODULES = ("torch._dynamo",)


def _import_drawing_libraries() -> None:
    """Import the libraries the lessons draw with, once, here instead of in every exercise.

    A notebook's definitions include its drawings (``fig = draw_autograd_graph(loss)`` is an
    assignment), so every exercise's process imported matplotlib again: 0.4 s of its 0.55 s of
    definitions in lesson 01. These libraries run no torch code, so the server still runs no
    autograd before it forks (NOTE [No autograd before a fork]); the course's own modules and
    the learner copies' other imports stay out (see that NOTE). One that is not installed is
    left to the exercise's process, which fails there as the notebook would. The modules torch
    itself imports late (``TORCH_LAZY_MODULES``) are imported here too, for the same reason.
    """
    import importlib

    for name in (*DRAWING_LIBRARIES, *TORCH_LAZY_MODULES):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _prepare(lessons: list[int], extra: list | None = None) -> dict:
    """Step 1: import and capture everything the checking uses, before any learner code."""
    import torch
    from IPython.core.inputtransformer2 import TransformerManager  # noqa: F401 (definitions() uses it)

    from course import checks

    _add_extra_cases(extra)
    for lesson in lessons:
        checks.all_exercises(lesson)  # imports course/checks/lessonNN/
    _import_drawing_libraries()
    torch.set_num_threads(1)  # a fork after an OpenMP parallel region hangs in the child
    torch.save({"warm": [torch.zeros(1)]}, io.BytesIO())  # the pickler's modules, loaded now
    exercises = {
        ex.id: copy.deepcopy(ex) for n in lessons for ex in checks.all_exercises(n)
    }  # private copies
    return dict(
        exercises=exercises,
        outcomes_of=checks.outcomes_of,
        measure_cost=checks.measure_cost,
        missing=checks.MISSING,
        save=torch.save,
        set_num_threads=torch.set_num_threads,
        fork=os.fork,
        exit=os._exit,
        kill=os.kill,
        waitpid=os.waitpid,
        monotonic=time.monotonic,
        sleep=time.sleep,
    )


def _reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve(lessons: list[int], extra: list | None = None) -> int:
    """The checking server for ``lessons``: one JSON job per stdin line, one reply per job.

    A job: ``{"job", "exercises" (ids), "cells" ([index, source] of the code cells), "cwd",
    "cell_timeout", "limit", "out"}``. The reply ``{"job", "exit"}`` comes when the notebook's
    fork has ended; its outcomes are the files ``OUT/<id>.pt``. A fork still running
    ``2 * limit + 30`` s after its job arrived is killed (``"exit": "killed"``). End of stdin:
    finish the jobs in flight, then exit. ``extra``: ``[path, sha256]`` of the instructor's
    extra cases, added before anything else (:mod:`course.checks.extra`).
    """
    tools = _prepare(lessons, extra)
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
                _reply(
                    {"job": job, "exit": status if status == "killed" else os.waitstatus_to_exitcode(status)}
                )
    return 0


def _check_alone(spec_path: str, out_dir: str) -> int:
    """Where there is no ``fork``: one exercise (the spec names one), checked in this process."""
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    import torch

    from course import checks

    _add_extra_cases(spec.get("extra"))
    (ex,) = [copy.deepcopy(checks.get(i)) for i in spec["exercises"]]
    tools = dict(
        outcomes_of=checks.outcomes_of,
        measure_cost=checks.measure_cost,
        missing=checks.MISSING,
        save=torch.save,
    )
    namespace, notes = _run_definitions(spec)
    _run_answer(ex, spec, tools, namespace, notes, os.path.join(out_dir, f"{ex.id}.pt"))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``--serve N...`` (the checking server for lessons N...) or ``SPEC.json OUT_DIR`` (one
    exercise, where there is no fork)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        lessons, extra = argv[1:], None
        if "--extra-cases" in lessons:  # --serve N... --extra-cases PATH SHA256
            at = lessons.index("--extra-cases")
            lessons, extra = lessons[:at], lessons[at + 1 : at + 3]
        return serve([int(n) for n in lessons], extra)
    return _check_alone(*argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
