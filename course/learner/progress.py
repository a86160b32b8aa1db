"""`course progress`: a table of your lessons and exercises, and where each stands.

``course progress DIR`` grades every lesson notebook in your course folder (the grader runs
the notebook headless and then the checks, in a fresh process) and prints one row per
exercise::

    $ course progress autograd-course
    autograd-course: 1 of 3 exercises passed, 1 failed, 1 not attempted

    lesson                            exercise              status         note
    00_warmup.ipynb                   0.1 cube_sum_grad     passed
                                      0.2 predicted_a_grad  failed         0/1 cases; hint: ...
    01_graph.ipynb (my_graph.ipynb)   1.1 grad_fn_names     not attempted
    02_hooks.ipynb                    -                     missing        deleted; `course update ...

    every case, yours against expected, and the hint: course grade autograd-course/00_warmup.ipynb

Grading takes seconds per notebook, so results are cached in ``DIR/.course/progress-cache.json``
keyed by the lesson and the hash of its notebook's *code* cells (``workspace.cells_hash(path,
("code",))``, so a renamed notebook keeps its results), under the grader's own fingerprint
(course version and the source of the grader and checks)::

    {"format": 1, "grader": "course 0.1.0 sha256:...",
     "results": {"01_graph.ipynb sha256:<code hash>": [["1.1", "passed", ""], ["1.2", "failed", "..."]]}}

NOTE [Untouched notebooks are not run]
    A fresh copy must answer in a second, not after running nine notebooks. So before grading,
    the default grader compares the notebook's code cells with the course's learner copy of
    the lesson (``workspace.pristine``), by content: if every code cell is one of the learner
    copy's (none edited; some may be deleted, moved or repeated), every answer is still its
    stub, and each exercise is "not attempted" without running anything. The exercises are
    read from ``course/checks/lessonNN/`` without importing it (``lessons.registered_exercises``),
    so such a run never imports torch. Only a notebook whose code was edited is graded.

A second run with nothing edited grades nothing; editing a code cell re-grades that notebook
only; running cells or writing markdown does not. An ``error`` verdict (your answer raised or
timed out) is cached like any other; a grader that crashes, or fails the whole notebook (a
kernel that died, a grade voided), is shown as ``error`` and not cached, so the next run
tries again. ``--no-cache`` grades everything again.

The grader is any ``grade_fn(path, lesson) -> [(exercise, status, note), ...]`` (``lesson`` is
the lesson's file name, ``01_graph.ipynb``, whatever the learner renamed the notebook to) with
status one of ``passed``, ``failed``, ``not attempted``, ``error``, ``revealed`` (a prediction
whose answer the learner asked to see). By default it is
``course.grading.grade.grade_notebook``, adapted by :func:`default_grader`; ``course grade FILE``
shows the full report of one notebook (every case, yours against expected, the hint).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from course import lessons as course_lessons
from course.grading.cells import code_cells
from course.grading.files import grader_fingerprint, write_atomically
from course.learner import workspace

__all__ = [
    "CACHE",
    "Row",
    "collect",
    "default_grader",
    "edits_nothing",
    "main",
    "table",
    "untouched_results",
]

CACHE = Path(".course") / "progress-cache.json"
STATUSES = ("passed", "failed", "not attempted", "error", "revealed")
Result = tuple[str, str, str]  # (exercise_id, status, message)
GradeFn = Callable[[Path, str], Sequence[Result]]


@dataclass(frozen=True)
class Row:
    """One line of the table. ``exercise`` is ``"-"`` for a lesson-level row (no exercises,
    a missing notebook, a grader error)."""

    lesson: str
    file: str | None
    exercise: str
    status: str
    message: str = ""


def collect(
    root: str | Path,
    grade_fn: GradeFn | None = None,
    grader_id: str | None = None,
    use_cache: bool = True,
    on_grade: Callable[[str], None] | None = None,
) -> list[Row]:
    """Grade every lesson in ``root`` (from the cache where the code is unchanged).

    Args:
        root: a course folder (``course start``), or any folder of ``NN_slug.ipynb`` files.
        grade_fn: grades one notebook (see the module docstring); default ``default_grader()``.
        grader_id: fingerprint stored with the cache; a different one discards it. Defaults
            to the default grader's fingerprint (course version and grader source).
        use_cache: read the cache (results are written back either way).
        on_grade: called with each file name just before it is graded (not when cached).
            A ``grade_fn`` with an ``untouched(path, lesson, pristine)`` attribute (the
            default's) answers untouched notebooks without grading them (NOTE [Untouched
            notebooks are not run]); those answers are not cached.
    Returns:
        The rows, in lesson order.
    Raises:
        workspace.WorkspaceError: the default grader is not installed.

    >>> import nbformat, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> nbformat.write(nbformat.v4.new_notebook(), d / "01_graph.ipynb")
    >>> collect(d, grade_fn=lambda path, lesson: [("1.1", "passed", "")], grader_id="demo")
    [Row(lesson='01_graph.ipynb', file='01_graph.ipynb', exercise='1.1', status='passed', message='')]
    """
    root = Path(root)
    if grade_fn is None:
        grade_fn = default_grader()
    grader_id = grader_id or grader_fingerprint()
    cached = _load_cache(root, grader_id) if use_cache else {}
    untouched = getattr(grade_fn, "untouched", None)
    fresh, rows = {}, []
    for lesson, path in workspace.locate(root):
        if path is None:
            rows.append(
                Row(
                    lesson,
                    None,
                    "-",
                    "missing",
                    f"deleted; `course update {workspace.shell_quoted(root)} --restore {lesson}` brings it back",
                )
            )
            continue
        rel = path.relative_to(root).as_posix()
        key = f"{lesson} {workspace.cells_hash(path, ('code',))}"
        results = cached.get(key)
        if results is None and untouched is not None:
            shortcut = untouched(path, lesson, workspace.pristine(root, lesson))
            results = None if shortcut is None else [list(r) for r in shortcut]
        elif results is not None:
            fresh[key] = results
        if results is None:
            if on_grade:
                on_grade(rel)
            results, crashed = _grade(grade_fn, path, lesson)
            if not crashed and not any(ex == "-" and status == "error" for ex, status, _ in results):
                fresh[key] = results  # a verdict on this code (even "error": your answer raised)
        rows += [Row(lesson, rel, ex, status, msg) for ex, status, msg in results] or [
            Row(lesson, rel, "-", "no exercises")
        ]
    if fresh != cached:  # a run that graded nothing writes nothing
        _save_cache(root, grader_id, fresh)
    return rows


def _grade(grade_fn: GradeFn, path: Path, lesson: str) -> tuple[list[list[str]], bool]:
    """The results as JSON-ready lists, and whether the grader itself crashed."""
    try:
        results = [[str(ex), str(status), str(msg or "")] for ex, status, msg in grade_fn(path, lesson)]
    except Exception as exc:  # a grader crash is one row, not the end of the table
        return [["-", "error", f"the grader failed: {type(exc).__name__}: {exc}"]], True
    for ex, status, _ in results:
        if status not in STATUSES:
            raise ValueError(f"grade_fn returned status {status!r} for {ex}; expected one of {STATUSES}")
    return results, False


def _load_cache(root: Path, grader_id: str) -> dict[str, list[list[str]]]:
    try:
        data = json.loads((root / CACHE).read_text())
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: grade again
    if not isinstance(data, dict) or data.get("format") != 1 or data.get("grader") != grader_id:
        return {}
    return data.get("results", {})


def _save_cache(root: Path, grader_id: str, results: dict) -> None:
    data = {"format": 1, "grader": grader_id, "results": results}
    try:
        write_atomically(root / CACHE, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    except OSError as exc:  # a read-only folder still gets its table, just no cache
        print(
            f"course progress: could not save the cache in {root / CACHE} ({exc}); the next run grades again",
            file=sys.stderr,
        )


def table(rows: Sequence[Row], title: str = "") -> str:
    """The progress table: a summary line, then one row per exercise.

    >>> print(table([Row("01_graph.ipynb", "mine.ipynb", "1.1", "passed"),
    ...              Row("01_graph.ipynb", "mine.ipynb", "1.2", "failed", "yours: 2, expected 3")], "w"))
    w: 1 of 2 exercises passed, 1 failed
    <BLANKLINE>
    lesson                        exercise  status         note
    01_graph.ipynb (mine.ipynb)   1.1       passed
                                  1.2       failed         yours: 2, expected 3
    """
    counts = Counter(r.status for r in rows if r.exercise != "-")
    total = sum(counts.values())
    summary = f"{counts['passed']} of {total} exercises passed"
    summary += "".join(f", {counts[s]} {s}" for s in STATUSES[1:] if counts[s])
    if any(r.exercise == "-" and r.status in ("error", "missing") for r in rows):
        summary += "; some lessons could not be graded (see below)"
    names = [r.lesson if r.file in (None, r.lesson) else f"{r.lesson} ({r.file})" for r in rows]
    width = max([len("lesson"), *map(len, names)]) + 3
    ex_width = max([len("exercise"), *(len(r.exercise) for r in rows)]) + 2
    lines = [
        f"{title}: {summary}" if title else summary,
        "",
        f"{'lesson':<{width}}{'exercise':<{ex_width}}{'status':<15}note",
    ]
    previous = None
    for name, r in zip(names, rows):
        shown = name if name != previous else ""
        note = r.message.strip().splitlines()[0] if r.message.strip() else ""
        if r.exercise != "-" and len(note) > 72:  # lesson rows say what to do: never cut
            note = note[:69] + "..."
        lines.append(f"{shown:<{width}}{r.exercise:<{ex_width}}{r.status:<15}{note}".rstrip())
        previous = name
    return "\n".join(lines)


# --- the default grader --------------------------------------------------------------------


def default_grader() -> GradeFn:
    """``course.grading.grade.grade_notebook`` as a ``grade_fn``: one row per exercise of the lesson.

    The lesson number comes from the lesson's name (so a renamed notebook is graded as the
    lesson it is); a lesson without registered exercises gives no rows; a notebook the grader
    cannot grade at all gives one ``error`` row with the grader's reason.

    Raises:
        workspace.WorkspaceError: ``course.grading.grade`` cannot be imported.
    """

    if importlib.util.find_spec("course.grading.grade") is None:  # found, not imported: a run from
        raise workspace.WorkspaceError(  # the cache never imports torch
            "the grader (course.grading.grade) is not installed.\n"
            "Fix: pip install the full course (pip install -e . in a checkout)."
        )

    def grade(path: Path, lesson: str) -> list[Result]:
        from course import checks
        from course.grading import grade as grading

        number = int(lesson[:2])
        checks.load_all()
        if not checks.all_exercises(number):
            return []
        report = grading.grade_notebook(path, lesson=number)
        if report.error:
            return [("-", "error", report.error)]
        return [(f"{e['id']} {e['name']}", e["status"], result_note(e)) for e in report.exercises]

    grade.untouched = untouched_results
    return grade


def untouched_results(path: Path, lesson: str, pristine: Path | None) -> list[Result] | None:
    """Every exercise "not attempted" if no code cell of ``path`` differs from the learner
    copy ``pristine``, else ``None`` (grade it). NOTE [Untouched notebooks are not run].

    >>> import nbformat, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> stub = nbformat.v4.new_code_cell("raise NotImplementedError('exercise 0.1')")
    >>> nbformat.write(nbformat.v4.new_notebook(cells=[stub]), d / "00_warmup.ipynb")
    >>> untouched_results(d / "00_warmup.ipynb", "00_warmup.ipynb", d / "00_warmup.ipynb")[0]
    ('0.1 cube_sum_grad', 'not attempted', '')
    """
    if pristine is None or not edits_nothing(path, pristine):
        return None
    exercises = course_lessons.registered_exercises(int(lesson[:2]))
    return [(f"{ex_id} {name}", "not attempted", "") for ex_id, name in exercises]


def edits_nothing(mine: Path | bytes, shipped: Path | bytes | None) -> bool:
    """True when every code cell of the notebook ``mine`` (its path or its bytes) is one of the
    learner copy ``shipped``'s: the learner wrote nothing yet. False when either is unreadable
    (the grader then says why)."""

    def sources(notebook: Path | bytes | None) -> set[str] | None:
        try:
            data = notebook if isinstance(notebook, bytes) else Path(notebook).read_bytes()
            return {text for _, text in code_cells(data)}
        except (OSError, TypeError, ValueError):
            return None

    mine_, shipped_ = sources(mine), sources(shipped) if shipped is not None else None
    return mine_ is not None and shipped_ is not None and mine_ <= shipped_


def result_note(e: dict) -> str:
    """``1/4 cases; hint: ...`` from a grader result (the full message is ``course grade``'s)."""
    if e["status"] in ("passed", "not attempted"):
        return ""
    first = e["message"].splitlines()[0].split("] ", 1)[-1]  # "[1.1 name] failed: 1/4 cases"
    first = first.split(": ", 1)[-1] if first.startswith(e["status"]) else first
    return f"{first}; hint: {e['hint']}" if e.get("hint") else first


def main(argv: list[str] | None = None) -> int:
    """``course progress [DIR] [--no-cache]``."""
    parser = argparse.ArgumentParser(
        prog="course progress", description="a table of your exercises and their status"
    )
    parser.add_argument(
        "dir",
        nargs="?",
        default=workspace.DEFAULT_DIR,
        help=f"your course folder (default: {workspace.DEFAULT_DIR})",
    )
    parser.add_argument("--no-cache", action="store_true", help="grade every notebook again")
    args = parser.parse_args(argv)
    root = Path(args.dir)
    if root.is_file():  # a notebook: its folder holds the progress, `course grade` scores the file
        folder = workspace.shell_quoted(root.parent)
        print(
            f"course progress: {root} is a file; progress is per course folder.\n"
            f"Fix: `course progress {folder}` for your folder's table, or "
            f"`course grade {workspace.shell_quoted(root)}` to score this notebook alone.",
            file=sys.stderr,
        )
        return 1
    if not root.is_dir():
        print(
            f"course progress: {root} is not a folder.\nFix: `course start {workspace.shell_quoted(root)}` "
            "creates it, or name your course folder.",
            file=sys.stderr,
        )
        return 1
    try:
        rows = collect(
            root,
            use_cache=not args.no_cache,
            on_grade=lambda name: print(f"grading {name} ...", file=sys.stderr, flush=True),
        )
    except workspace.WorkspaceError as exc:
        print(f"course progress: {exc}", file=sys.stderr)
        return 1
    if not rows:
        print(
            f"{root} holds no lesson notebooks (NN_slug.ipynb).\n"
            f"Fix: `course start {workspace.shell_quoted(root)}` copies them in."
        )
        return 1
    print(table(rows, str(root)))
    for mine, offered in workspace.waiting_updates(root):
        print(
            f"\nan update is waiting: {offered} is the new version of {mine} (yours, edited, is kept); "
            "compare them and keep the one you want"
        )
    unwell = sorted({r.file for r in rows if r.file and r.status in ("failed", "error")})
    if unwell:
        print(
            "\nevery case, yours against expected, and the hint: "
            + "; ".join(f"course grade {workspace.shell_quoted(root / f)}" for f in unwell)
        )
    return 0
