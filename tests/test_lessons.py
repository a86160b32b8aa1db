"""Does every lesson in course.lessons exist in all three forms, and are generated docs current?"""

from pathlib import Path

import pytest

from course import guide
from course.checks import all_exercises, load_all
from course.lessons import LESSONS, get

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_lesson_has_solution_learner_copy_and_checks(lesson):
    assert (ROOT / "solutions" / lesson.notebook).exists()
    assert (ROOT / "notebooks" / lesson.notebook).exists()
    load_all()
    assert all_exercises(lesson.number), f"no exercises registered for lesson {lesson.number}"
    for path in lesson.reads:
        assert (ROOT / path).exists(), path


def test_lessons_are_numbered_in_order_and_prerequisites_come_first():
    assert [lesson.number for lesson in LESSONS] == list(range(len(LESSONS)))
    for lesson in LESSONS:
        assert all(n < lesson.number for n in lesson.needs)


def test_unknown_lesson_names_the_ones_that_exist():
    with pytest.raises(KeyError, match="lessons are"):
        get(42)


def test_every_lesson_notebook_is_listed():
    listed = {lesson.notebook for lesson in LESSONS}
    assert {p.name for p in (ROOT / "solutions").glob("*.ipynb")} == listed


def test_generated_overview_and_exercise_table_are_current():
    assert guide.stale() == [], "run: python -m course.guide"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_the_time_a_lesson_announces_is_the_time_the_overview_lists(lesson):
    import re

    import nbformat

    opening = nbformat.read(ROOT / "solutions" / lesson.notebook, as_version=4).cells[0].source
    stated = re.findall(r"[Aa]bout (\d+(?:-\d+)? minutes)", opening)
    assert stated in ([], [lesson.time_text]), (stated, lesson.time_text)


def _literals(source: str):
    """Every container literal in a code cell that Python can evaluate on its own."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Dict, ast.Set)):
            try:
                yield ast.literal_eval(node)
            except ValueError:
                continue


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_no_learner_copy_writes_down_a_prediction_s_answer(lesson):
    """A prediction is not given away: no code the learner can read before answering holds the
    right answer as a literal (e.g. an assert right after the exercise). Checked for answers
    that are containers of two or more items; a lone number is too common to tell."""
    import nbformat

    predictions = [
        ex
        for ex in all_exercises(lesson.number)
        if ex.kind == "predict" and isinstance(ex.solution, (tuple, list, dict)) and len(ex.solution) >= 2
    ]
    learner = nbformat.read(ROOT / "notebooks" / lesson.notebook, as_version=4)
    for cell in learner.cells:
        if cell.cell_type != "code":
            continue
        for literal in _literals(cell.source):
            for ex in predictions:
                assert literal != ex.solution, f"exercise {ex.id}'s answer is written in: {cell.source[:200]}"


def test_every_lesson_has_a_pytest_marker_that_selects_its_notebooks_and_tests():
    """``pytest -m lessonNN`` comes from the registry (conftest.py), never from a hand-typed list:
    a new lesson gets its marker, and the marker reaches its notebooks and its own test file."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    import re

    assert not re.search(r'"lesson\d+:', (root / "pyproject.toml").read_text()), (
        "pyproject.toml types a lesson marker by hand; conftest.py derives them from course.lessons: delete the line"
    )
    newest = LESSONS[-1]
    marker = f"lesson{newest.number:02d}"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-m",
            marker,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    files = {line.split("::", 1)[0] for line in run.stdout.splitlines() if "::" in line}
    expected = {f"solutions/{newest.notebook}", f"notebooks/{newest.notebook}"}
    own_tests = root / "tests" / f"test_lesson{newest.number:02d}.py"
    if own_tests.exists():
        expected.add(f"tests/{own_tests.name}")
    assert expected <= files, f"`pytest -m {marker}` missed {sorted(expected - files)}"
