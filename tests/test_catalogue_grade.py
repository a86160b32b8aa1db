"""Does `course grade` judge every exercise's catalogue as the notebook's check() does?

tests/test_checks.py runs each known wrong answer and each right answer written differently
(``wrong=[...]`` and ``right=[...]`` beside the exercise's check) through ``grade_answer``,
in one process. Here the same answers go through the grader's own path: a generated notebook
defines the answer under the exercise's name, the worker process executes the notebook's
definitions and runs the answer on every case, and the grading process judges the outcomes it
loads back. One notebook per lesson per answer set keeps it quick: notebook k holds the k-th
wrong (or right) answer of every exercise of the lesson that has one. All of them are graded
in one grading session (as one `course grade` run would: one fingerprint, one checking
server, the oracles computed once), built the first time a test asks for it.
"""

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course.checks import all_exercises
from course.grading import grade
from course.grading.grade import grade_notebook
from course.lessons import LESSONS

pytestmark = pytest.mark.slow


def _answer_sets():
    sets = []
    for lesson in LESSONS:
        exercises = all_exercises(lesson.number)
        for field in ("wrong", "right"):
            for k in range(max((len(getattr(ex, field)) for ex in exercises), default=0)):
                sets.append(pytest.param(lesson.number, field, k, id=f"{lesson.number:02d}-{field}{k}"))
    return sets


def _notebook(lesson: int, field: str, k: int, folder: Path) -> tuple[Path, dict]:
    """A learner notebook whose answers are the k-th ``field`` answers; what each should get."""
    cells = [new_code_cell("from course.checks import get")]
    wanted = {}
    for ex in all_exercises(lesson):
        answers = getattr(ex, field)
        if k < len(answers):
            index = f"{field}[{k}]" + (".answer" if field == "wrong" else "")
            cells.append(new_code_cell(f'{ex.name} = get("{ex.id}").{index}'))
            wanted[ex.id] = answers[k].hint if field == "wrong" else None
    path = folder / f"{lesson:02d}_catalogue_{field}{k}.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    return path, wanted


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{(lesson, field, k): (report, wanted)} for every answer set, graded in one session."""
    folder = tmp_path_factory.mktemp("catalogue")
    sets = [p.values for p in _answer_sets()]
    results = {}
    with grade._session_for({lesson.number for lesson in LESSONS}) as session:
        for lesson, field, k in sets:
            path, wanted = _notebook(lesson, field, k, folder)
            results[lesson, field, k] = grade_notebook(path, run=False), wanted  # score only, no kernel
    assert not session.tampered, session.tampered
    return results


@pytest.mark.parametrize("lesson, field, k", _answer_sets())
def test_the_grader_rejects_each_wrong_answer_with_its_hint_and_accepts_each_right_one(lesson, field, k, graded):
    report, wanted = graded[lesson, field, k]
    assert not report.error, report.error
    verdicts = {e["id"]: e for e in report.exercises}
    for ex_id, hint in wanted.items():
        got = verdicts[ex_id]
        if field == "right":
            assert got["status"] == "passed", got["message"]
        else:
            assert got["status"] in ("failed", "error"), f"{ex_id}: {hint!r} was accepted"
            assert got["hint"] == hint, got["message"]
    others = set(verdicts) - set(wanted)
    assert all(verdicts[i]["status"] == "not attempted" for i in others)
