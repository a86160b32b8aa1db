"""How long a learner waits for a check's verdict, cold: the slowest failing and passing check per lesson.

A learner's first check of an exercise runs in a kernel that has run the notebook's imports
(its first cells import torch and the lesson's content) and nothing of the check yet. This
benchmark builds that kernel once per lesson: it runs every ``import`` statement of the
lesson's solution notebook (not counted), then forks one child per answer, so every child
starts from the same state as a fresh kernel and pays everything a first check pays (loading
the lesson's answer keys, the process's first torch calls, the oracle's cases, the known wrong
answers it runs to find the hint). Each child times ``check(id, answer)`` on the reference
solution (passing) or one known wrong answer of the catalogue (failing).

Prints, per lesson, the slowest of each kind: its wall-clock seconds (``s``, what the learner
waits) and the CPU seconds the child used (``cpu s``, every thread: on a machine that other
processes load, about what the wait would be on a quiet one), and the load average before and
after. The issue's target: every verdict within 10 s on a quiet 2-core machine.

    python benchmarks/checks.py                # lessons 0-8, every known wrong answer
    python benchmarks/checks.py 3 8            # lessons 3 and 8
    python benchmarks/checks.py --first 2 3    # only the first 2 wrong answers of each exercise
    python benchmarks/checks.py --exercise 8.3 8   # one exercise
    python benchmarks/checks.py --each 8       # also every answer's seconds and verdict
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def notebook_imports(lesson: int) -> str:
    """Every top-level ``import`` statement of the lesson's solution notebook, in order."""
    (path,) = sorted((ROOT / "solutions").glob(f"{lesson:02d}_*.ipynb"))
    lines = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:  # a cell with a magic: its imports, if any, are not counted
            continue
        lines += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(lines)


def _first_check(exercise_id: str, k: int) -> tuple[float, str]:
    """In this (forked) process: seconds of ``check(exercise_id, answer)`` and its status."""
    from course.checks import check, get

    sink = io.StringIO()
    start, cpu = time.perf_counter(), time.process_time()
    ex = get(exercise_id)  # loading the lesson's answer keys is part of the first check
    answer = ex.solution if k < 0 else ex.wrong[k].answer
    with contextlib.redirect_stdout(sink):
        check(exercise_id, answer)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    head = sink.getvalue().split("\n", 1)[0]
    status = head.split("] ", 1)[1].split(":", 1)[0] if "] " in head else head
    return seconds, cpu, status


def in_child(work, *args):
    """``work(*args)`` in a forked child of this process (which stays as it was); its result,
    sent back as JSON."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = work(*args)
        except BaseException as e:  # report, never hang the benchmark
            result = (float("nan"), float("nan"), f"crashed: {type(e).__name__}: {e}")
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def exercise_answers(lesson: int, first: int | None, only: str | None) -> list[tuple[str, int]]:
    """(id, k) for every exercise of ``lesson``: k = -1 for the solution, else wrong answer k."""
    from course import checks

    found = []
    for ex in checks.all_exercises(lesson):
        if only in (None, ex.id):
            found += [(ex.id, -1)] + [(ex.id, k) for k in range(len(ex.wrong))][:first]
    return found


def lesson_figures(lesson: int, first: int | None, only: str | None, each: bool) -> list[str]:
    """In a kernel that ran the lesson's imports: each answer's first check, in a child of it."""
    exec(compile(notebook_imports(lesson), f"<lesson {lesson} imports>", "exec"), {})
    answers = in_child(exercise_answers, lesson, first, only)  # read in a child: the kernel stays fresh
    failing, passing, lines = (0.0, 0.0, "-"), (0.0, 0.0, "-"), []
    for exercise_id, k in answers:
        seconds, cpu, status = in_child(_first_check, exercise_id, k)
        label = f"{exercise_id} " + ("solution" if k < 0 else f"wrong[{k}]")
        if (k < 0) != (status == "passed"):
            lines.append(f"        ! {label}: {status}")
        elif k < 0:
            passing = max(passing, (seconds, cpu, label))
        else:
            failing = max(failing, (seconds, cpu, label))
        if each:
            lines.append(f"          {label:<20}{seconds:>7.2f}{cpu:>7.2f}  {status}")
    row = f"{lesson:>6}  " + "  ".join(f"{w[2]:<20}{w[0]:>7.2f}{w[1]:>7.2f}" for w in (failing, passing))
    return [row, *lines]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("lessons", nargs="*", type=int, default=list(range(9)))
    parser.add_argument("--first", type=int, default=None, help="only the first N wrong answers")
    parser.add_argument("--exercise", default=None, help="only this exercise (N.M)")
    parser.add_argument("--each", action="store_true", help="print every answer's seconds")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores", flush=True)
    print(
        f"{'lesson':>6}  {'slowest failing check':<20}{'s':>7}{'cpu s':>7}  {'slowest passing':<20}{'s':>7}{'cpu s':>7}"
    )
    for lesson in args.lessons:
        print("\n".join(in_child(lesson_figures, lesson, args.first, args.exercise, args.each)), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
