"""Grading one notebook: run it (the learner's "Run All"), check and judge its answers, in a
session (:mod:`course.grading.session`) passed explicitly.

::

    report = grade_notebook(Path("03_saved_tensors.ipynb"))        # a session of its own
    with open_session({3}) as session:
        report = grade_in_session(session, path, text, 3, timeout=300, cell_timeout=60)

The file is only ever read. The kernel run and the checking go side by side; the kernel run
reports the cells that raised or timed out and never decides the score. A notebook graded
while the ``course`` package changed is void (tampering).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from course.grading import signing
from course.grading.cells import code_cells
from course.grading.files import changed_files, package_digest
from course.grading.isolation import child_env
from course.grading.judging import check_and_judge, error_result, one_line
from course.grading.names import lesson_number
from course.grading.report import NotebookReport
from course.grading.session import open_session
from course.grading.untrusted import Untrusted, clean_text, read_regular

__all__ = ["grade_in_session", "grade_notebook", "lesson_of", "read_notebook", "unreadable_report"]

_EXERCISE_ID = re.compile(r"""(?:check\(\s*["']|exercise )(\d+)\.\d+""")


def lesson_of(path: Path, sources: list[str]) -> int | None:
    """The lesson of a notebook: from its name (``NN_slug.ipynb``), else from the exercise ids
    its cells mention, when they name one lesson only."""
    if lesson_number(path.name) is not None:
        return lesson_number(path.name)
    found = {int(x) for src in sources for x in _EXERCISE_ID.findall(src)}
    return found.pop() if len(found) == 1 else None


def read_notebook(path: Path, lesson: int | None) -> tuple[str | BaseException, int | None]:
    """The notebook's text (or why it cannot be read) and its lesson (None if unknown)."""
    try:
        text: str | BaseException = read_regular(path).decode("utf-8")
        sources = [src for _, src in code_cells(text)]
    except Exception as e:
        text, sources = e, []
    return text, lesson if lesson is not None else lesson_of(path, sources)


def has_exercises(lesson: int) -> bool:
    from course import checks

    try:
        return bool(checks.all_exercises(lesson))
    except Exception:
        return False


def grade_notebook(
    path: Path,
    timeout: float = 300,
    cell_timeout: float = 60,
    lesson: int | None = None,
    jobs: int | None = None,
    progress=None,
    run: bool = True,
) -> NotebookReport:
    """Grade one notebook in a session of its own. Never writes to ``path``; never raises for
    a bad notebook. It sets up the session (fingerprint, oracles, checking server) for this
    lesson and ends every process the notebook left behind before returning.

    Args:
        path: the learner's notebook.
        timeout: seconds for the whole notebook run (and, separately, for checking its answers).
        cell_timeout: seconds per cell.
        lesson: the lesson number, when the file name does not start with it (``NN_``).
        jobs: worker processes at once where there is no ``fork`` (default: the CPU count).
        progress: ``progress(text)`` is called with one-line updates (stderr in the CLI).
        run: run the notebook in a kernel too (False: score only; ``report.run`` stays empty).

    Returns:
        A :class:`NotebookReport`.
    """
    path = Path(path)
    text, lesson = read_notebook(path, lesson)
    with open_session({lesson} if lesson is not None and has_exercises(lesson) else set()) as session:
        report = grade_in_session(
            session,
            path,
            text,
            lesson,
            timeout=timeout,
            cell_timeout=cell_timeout,
            jobs=jobs,
            progress=progress,
            run=run,
        )
    if session.tampered:
        void(report, session.tampered)
    return report


def void(report: NotebookReport, changed: list[str]) -> None:
    """Tampering: the course package changed while this notebook was graded; no score counts."""
    files = ", ".join(changed[:5]) + (", ..." if len(changed) > 5 else "")
    report.error = f"void: the course package changed while this notebook was graded (tampering): {files}"
    for e in report.exercises:
        e.update(
            status="error",
            score=0,
            message=f"[{e['id']} {e['name']}] error: void, the course package "
            "changed while this notebook was graded",
        )


def grade_in_session(
    session,
    path: Path,
    text: str | BaseException,
    lesson: int | None,
    timeout: float,
    cell_timeout: float,
    jobs: int | None = None,
    progress=None,
    run: bool = True,
) -> NotebookReport:
    """Grade one notebook inside ``session``; voids it if the package changed meanwhile."""
    before = package_digest()
    start = time.monotonic()
    report = NotebookReport(clean_text(path, 500), lesson)
    with contextlib.suppress(OSError, Untrusted):  # the bytes graded, readable or not as a notebook
        report.sha256 = signing.file_sha256(read_regular(path))
    try:
        _fill_report(
            session, report, path, text, timeout, cell_timeout, jobs, progress or (lambda text: None), run
        )
    except Exception as e:  # never lose the other notebooks' results
        report.error = f"the grader failed on this notebook: {one_line(e)}"
    _keep_every_exercise(report)
    if session.sequential:
        report.killed = session.end_leftovers()
    changed = changed_files(before, package_digest())
    if changed:
        void(report, changed)
    report.seconds = round(time.monotonic() - start, 2)
    return report


def _keep_every_exercise(report: NotebookReport) -> None:
    """A notebook the grader failed on keeps every exercise of its lesson in the maximum, as
    an ``error`` scored 0 (a failure must never shrink what the score is out of)."""
    from course import checks

    if report.lesson is None or not has_exercises(report.lesson):
        return
    have = {e.get("id") for e in report.exercises}
    why = report.error or "the grader has no result for this exercise"
    report.exercises += [
        error_result(ex, why) for ex in checks.all_exercises(report.lesson) if ex.id not in have
    ]


def unreadable_report(path: Path, why: BaseException, lesson: int | None) -> NotebookReport:
    """The report of a notebook that cannot be read (``why``): every exercise of its lesson an
    ``error`` scored 0. No learner code runs for it, so it is made outside any sandbox."""
    report = NotebookReport(clean_text(path, 500), lesson)
    _unreadable(report, why)
    return report


def _unreadable(report: NotebookReport, why: BaseException) -> None:
    from course import checks

    report.error = f"cannot read the notebook: {one_line(why)}"
    if report.lesson is not None and has_exercises(report.lesson):
        report.exercises = [
            error_result(ex, "the notebook cannot be read") for ex in checks.all_exercises(report.lesson)
        ]


def _fill_report(
    session, report: NotebookReport, path: Path, text, timeout, cell_timeout, jobs, say, run
) -> None:
    """The kernel run and the verdicts of one notebook, into ``report``."""
    from course import checks

    lesson = report.lesson
    if isinstance(text, BaseException):
        _unreadable(report, text)
        return
    if lesson is None:
        report.error = "cannot tell which lesson this is: name it NN_slug.ipynb or pass --lesson N"
        return
    exercises = checks.all_exercises(lesson) if has_exercises(lesson) else []
    if not exercises:
        report.error = f"lesson {lesson} has no registered exercises"
        return
    cells = code_cells(text)
    say(
        f"{path.name}: "
        + (f"running {len(cells)} code cells, " if run else "")
        + f"checking {len(exercises)} exercises"
    )
    cwd = _private_folder(session, path, text)
    record = session.tmp / "tmp" / f"reveals-{secrets.token_hex(8)}"  # check() appends the ids it reveals
    ran: Future = Future()
    with ThreadPoolExecutor(max_workers=1) as pool:
        checking = pool.submit(
            check_and_judge,
            session,
            exercises,
            cells,
            cwd,
            cell_timeout,
            timeout,
            jobs or os.cpu_count() or 2,
            (lambda: ran.result() and checks.reveals_recorded(record)) if run else None,
        )
        try:
            if run:
                env = {**child_env(session.tmp / "tmp"), checks.REVEAL_RECORD: str(record)}
                report.run = run_in_kernel(text, cwd, cell_timeout, timeout, env)
                say(f"{path.name}: notebook run done, waiting for the checks")
        finally:
            ran.set_result(True)
        report.exercises = checking.result()


def _private_folder(session, path: Path, text: str) -> Path:
    """Where the notebook's code runs: a fresh folder of the session holding the notebook
    alone, never the learner's checkout (a ``helper.py`` beside the notebook is not the
    graded work: no signature binds it, and it is never imported)."""
    folder = Path(tempfile.mkdtemp(prefix="notebook-", dir=session.tmp / "tmp"))
    (folder / clean_text(path.name, 200).replace("/", "_")).write_text(text, encoding="utf-8")
    return folder


def run_in_kernel(text: str, cwd: Path, cell_timeout: float, timeout: float, env: dict) -> dict:
    """The learner's "Run All": what raised, what timed out (never the score)."""
    try:
        import nbformat

        from course.grading.kernel import run_notebook

        with warnings.catch_warnings():  # a notebook without cell ids is fine to grade
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
        run = run_notebook(nb, cwd, cell_timeout=cell_timeout, total_timeout=timeout, env=env)
    except Exception as e:  # the kernel would not start, for example
        return {"failure": one_line(e)}
    return {
        "code_cells": len(run.cells),
        "seconds": round(run.seconds, 2),
        "errors": [{"cell": c.index, "error": clean_text(c.error)} for c in run.cells if c.status == "error"],
        "timeouts": [
            {"cell": c.index, "error": clean_text(c.error)} for c in run.cells if c.status == "timeout"
        ],
        "skipped": sum(c.status == "skipped" for c in run.cells),
        "total_timed_out": run.total_timed_out,
        "kernel_died": run.kernel_died,
    }
