"""Does `course grade` judge every exercise's catalogue as the notebook's check() does?

Each known wrong answer and each right answer written differently (``wrong=[...]`` and
``right=[...]`` beside the exercise's check) goes through the grader's own path (the path
``check()`` takes in a notebook is the same outcomes and judge, without the worker): a generated notebook
defines the answer under the exercise's name, the worker process executes the notebook's
definitions and runs the answer on every case, and the grading process judges the outcomes it
loads back. One notebook per lesson per answer set keeps it quick: notebook k holds the k-th
wrong (or right) answer of every exercise of the lesson that has one. All of them are graded
in one grading session, opened the first time a test asks for it.
"""

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course.checks import all_exercises, get
from course.grading.notebook import grade_in_session, read_notebook
from course.grading.session import open_session
from course.house import sources as house_sources
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
def session():
    """One grading session for the module (as one `course grade` run: one fingerprint, one
    checking server, the oracles computed once); each test grades its own answer set in it, so
    `-k 03-` grades lesson 3's sets only."""
    with open_session({lesson.number for lesson in LESSONS}) as opened:
        yield opened
    assert not opened.tampered, opened.tampered


@pytest.mark.parametrize("lesson, field, k", _answer_sets())
def test_the_grader_rejects_each_wrong_answer_with_its_hint_and_accepts_each_right_one(
    lesson, field, k, session, tmp_path
):
    path, wanted = _notebook(lesson, field, k, tmp_path)
    report = grade_in_session(
        session, path, *read_notebook(path, None), timeout=300, cell_timeout=60, run=False
    )  # score only, no kernel
    assert not report.error, report.error
    verdicts = {e["id"]: e for e in report.exercises}
    for ex_id, hint in wanted.items():
        got = verdicts[ex_id]
        if field == "right":
            assert got["status"] == "passed", got["message"]
        else:
            offences = house_sources.wrong_answer_not_told_apart(get(ex_id), k, got)
            assert offences == [], "\n".join(offences) + "\n" + got["message"]
            assert " ".join(hint.split()) in " ".join(got["message"].split())  # shown to the learner, wrapped
    others = set(verdicts) - set(wanted)
    assert all(verdicts[i]["status"] == "not attempted" for i in others)
