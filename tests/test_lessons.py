"""Does every lesson in course.lessons exist in all three forms, and are generated docs current?"""

from pathlib import Path

import pytest

from course import guide
from course.checks import all_exercises, load_all
from course.house import notebooks as house_notebooks
from course.house import sources as house_sources
from course.lessons import LESSONS, get

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_lesson_has_solution_learner_copy_and_checks(lesson):
    load_all()
    offences = house_sources.missing_forms(lesson, ROOT, len(all_exercises(lesson.number)))
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_each_exercise_of_a_lesson_package_has_a_module_of_its_own(lesson):
    package = ROOT / "course" / "checks" / f"lesson{lesson.number:02d}"
    offences = house_sources.exercise_module_offences(package, ROOT)
    assert offences == [], "\n".join(offences)


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
    offences = guide.stale()
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_the_time_a_lesson_announces_is_the_time_the_overview_lists(lesson):
    offences = house_notebooks.minutes_disagree(Path("solutions") / lesson.notebook, lesson, root=ROOT)
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_no_learner_copy_writes_down_a_prediction_s_answer(lesson):
    """A prediction is not given away: no code the learner can read before answering holds the
    right answer as a literal (e.g. an assert right after the exercise). Checked for answers
    that are containers of two or more items; a lone number is too common to tell."""
    offences = house_notebooks.predictions_written_down(
        Path("notebooks") / lesson.notebook, all_exercises(lesson.number), root=ROOT
    )
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_every_answer_and_its_helpers_are_defined_at_the_top_level_of_a_cell(lesson):
    """The grader runs a notebook's top-level definitions only: an answer (or a helper it reads)
    defined inside a ``with`` or ``if`` block is undefined when it is checked."""
    names = [ex.name for ex in all_exercises(lesson.number)]
    offences = house_notebooks.not_at_top_level(Path("solutions") / lesson.notebook, names, root=ROOT)
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_no_stored_output_holds_what_changes_from_run_to_run(lesson):
    """Addresses, this machine's paths and timestamps: nbval_sanitize.cfg would mask them, but
    the learner reads them, and a mask hides a repr that should have been deterministic."""
    offences = house_notebooks.unstable_outputs(Path("solutions") / lesson.notebook, root=ROOT)
    assert offences == [], "\n".join(offences)


def test_every_lesson_has_a_pytest_marker_that_selects_its_notebooks_and_tests(request):
    """``pytest -m lessonNN`` comes from the registry (conftest.py), never from a hand-typed list:
    a new lesson gets its marker, and the marker reaches its notebooks and its own test file."""
    import re

    import conftest  # the repository's own, which pytest has loaded (rootdir is on sys.path)

    root = Path(__file__).resolve().parents[1]
    assert not re.search(r'"lesson\d+:', (root / "pyproject.toml").read_text()), (
        "pyproject.toml types a lesson marker by hand; conftest.py derives them from course.lessons: delete the line"
    )
    markers = conftest.lesson_markers()
    assert list(markers) == [f"lesson{lesson.number:02d}" for lesson in LESSONS]
    registered = {line.split(":", 1)[0] for line in request.config.getini("markers")}
    assert set(markers) <= registered, "conftest.py did not register every lesson's marker"
    for lesson in LESSONS:
        marker = f"lesson{lesson.number:02d}"
        for path in (
            f"solutions/{lesson.notebook}",
            f"notebooks/{lesson.notebook}",
            f"tests/test_{marker}.py",
        ):
            assert conftest.lesson_of_path(path) == marker, path
    for path in ("tests/test_hooks.py", "tests/data/lesson.ipynb", "solutions/README.md"):
        assert conftest.lesson_of_path(path) is None, path


def test_the_end_to_end_marker_holds_the_learner_copies_and_slow_machinery_only():
    """``-m e2e`` (conftest.py, a CI step of its own) takes the learner copies' Run All and the
    slow tests of the machinery; the lessons' own tests, the checks' and strict nbval of the
    solutions stay in the README's command."""
    import conftest

    assert conftest.is_end_to_end("notebooks/03_saved_tensors.ipynb", slow=False)
    for module in ("grading_boundary", "catalogue_grade", "gradebook", "room", "homework", "wheel"):
        assert conftest.is_end_to_end(f"tests/test_{module}.py", slow=True), module
        assert not conftest.is_end_to_end(f"tests/test_{module}.py", slow=False), module
    for path in ("solutions/03_saved_tensors.ipynb", "tests/test_mutants.py", "tests/test_lesson03.py"):
        assert not conftest.is_end_to_end(path, slow=True), path
    assert "e2e" in conftest.OPT_IN


def test_each_opt_in_step_still_finds_its_tests(pytestconfig):
    """`-m stress` and `-m guides` find their tests: an item of another opt-in marker is not
    also given ``e2e`` (a stress test is slow and lives in a grader module; as e2e as well, no
    single `-m` would name both markers and CI's stress step would find nothing, exit 5)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    for marker, least in (("stress", 1), ("guides", 1)):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                marker,
                "tests",
            ],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout
        collected = [line for line in out.splitlines() if "::" in line]
        assert len(collected) >= least, f"-m {marker} collects nothing:\n{out[-2000:]}"
