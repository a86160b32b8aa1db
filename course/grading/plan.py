"""Which notebooks of a folder ``course grade DIR`` grades, and what it says of the rest.

::

    plan, missing, ignored = plan_folder(Path("autograd-course"), only=None)
    # plan: [(path, text, lesson), ...] one notebook per lesson, in lesson order
    # missing: lessons with no notebook (every exercise counts as not attempted)
    # ignored: [{"path", "reason"}] offered copies, other notebooks, lessons not asked for,
    #          a second notebook of a lesson (JupyterLab's 00_warmup-Copy1.ipynb): the
    #          lesson's own name is graded (names.graded_first), the others listed here
"""

from __future__ import annotations

import re
from pathlib import Path

from course.grading.judging import not_attempted_result
from course.grading.names import graded_first, is_offered_copy
from course.grading.notebook import read_notebook
from course.grading.report import NotebookReport
from course.grading.untrusted import clean_text

__all__ = ["UsageError", "lesson_numbers", "missing_report", "plan_folder"]


class UsageError(Exception):
    """A usage error: exit 2 with this message, before any grading."""


def lesson_numbers() -> list[int]:
    """The lessons that have checks (``course/checks/lessonNN/``, or one module ``lessonNN.py``),
    found without importing them."""
    import course

    folder = Path(course.__file__).resolve().parent / "checks"
    return sorted(
        int(m.group(1))
        for p in folder.glob("lesson*")
        if (m := re.fullmatch(r"lesson(\d\d)(\.py)?", p.name))
        and (p.is_file() or (p / "__init__.py").is_file())
    )


def plan_folder(folder: Path, only: set[int] | None) -> tuple[list, list[int], list[dict]]:
    """(notebooks to grade as (path, text, lesson), lessons with no notebook, ignored files).

    Two notebooks of one lesson (a duplicate, ``00_warmup-Copy1.ipynb``) are not an error: the
    one named as the course names the lesson is graded, the others are ignored, and said so.

    Raises:
        UsageError: ``only`` names a lesson the course does not have.
    """
    course_lessons = lesson_numbers()
    wanted = sorted(only) if only is not None else course_lessons
    unknown = sorted(set(wanted) - set(course_lessons))
    if unknown:
        raise UsageError(f"--lessons: the course has no lesson {', '.join(f'{n:02d}' for n in unknown)}")
    found: dict[int, list] = {}
    ignored = []
    for p in sorted(folder.glob("*.ipynb")):
        if p.name.startswith("."):
            continue
        if is_offered_copy(p.name):
            ignored.append(
                {"path": clean_text(p, 500), "reason": "a copy offered by `course update`, not graded"}
            )
            continue
        text, lesson = read_notebook(p, None)
        if lesson is None:
            ignored.append({"path": clean_text(p, 500), "reason": "not a lesson (name it NN_slug.ipynb)"})
        elif lesson not in wanted:
            why = "not in --lessons" if lesson in course_lessons else f"the course has no lesson {lesson:02d}"
            ignored.append({"path": clean_text(p, 500), "reason": why})
        else:
            found.setdefault(lesson, []).append((p, text, lesson))
    for n, entries in found.items():  # a duplicate never costs the learner the lesson
        if len(entries) > 1:
            by_name = {p.name: (p, text, lesson) for p, text, lesson in entries}
            order = graded_first(list(by_name), _lesson_notebook(n))
            found[n] = [by_name[name] for name in order]
            ignored += [
                {
                    "path": clean_text(by_name[name][0], 500),
                    "reason": f"another notebook of lesson {n:02d}: {order[0]} is graded",
                }
                for name in order[1:]
            ]
    return [found[n][0] for n in sorted(found)], [n for n in wanted if n not in found], ignored


def _lesson_notebook(number: int) -> str:
    from course.lessons import get

    try:
        return get(number).notebook
    except KeyError:
        return ""


def missing_report(session, folder: Path, lesson: int) -> NotebookReport:
    """The report of a lesson with no notebook in the folder: every exercise not attempted."""
    from course import checks

    report = NotebookReport(
        str(folder / f"{lesson:02d}_*.ipynb"),
        lesson,
        note="no notebook for this lesson: every exercise counts as not attempted",
    )
    report.exercises = [not_attempted_result(session, ex) for ex in checks.all_exercises(lesson)]
    return report
