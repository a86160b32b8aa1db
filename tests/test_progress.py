"""Does `course progress` show each exercise's status, and grade only what changed?"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from course import cli
from course.grading import files
from course.learner import progress, workspace
from course.learner.progress import Row
from course.lessons import LESSONS, registered_exercises

STUB = "raise NotImplementedError('exercise {}')"


def write_lesson(folder: Path, name: str, *exercises: str) -> None:
    cells = [nbformat.v4.new_markdown_cell(f"# {name}")]
    cells += [nbformat.v4.new_code_cell(f"# exercise {ex}\n" + STUB.format(ex)) for ex in exercises]
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / name)


def answer(path: Path, exercise: str, code: str) -> None:
    """The learner replaces an exercise's stub with ``code``."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.source.startswith(f"# exercise {exercise}\n"):
            cell.source = f"# exercise {exercise}\n{code}"
    nbformat.write(nb, path)


class FakeGrader:
    """Grades by reading the cells: the stub is not attempted, ``answer = 42`` passes."""

    def __init__(self):
        self.graded: list[str] = []

    def __call__(self, path: Path, lesson: str) -> list[tuple[str, str, str]]:
        assert lesson.startswith(path.name[:2]) or path.name == "mine.ipynb"
        self.graded.append(path.name)
        results = []
        for cell in nbformat.read(path, as_version=4).cells:
            match = re.match(r"# exercise (\S+)\n(.*)", cell.source, re.S)
            if cell.cell_type != "code" or not match:
                continue
            ex, body = match.groups()
            if "NotImplementedError" in body:
                results.append((ex, "not attempted", ""))
            elif body.strip() == "answer = 42":
                results.append((ex, "passed", ""))
            else:
                results.append((ex, "failed", f"yours: {body.strip()}, expected: answer = 42\nhint: 42"))
        return results


@pytest.fixture
def root(tmp_path: Path) -> Path:
    src = tmp_path / "notebooks"
    write_lesson(src, "00_warmup.ipynb")
    write_lesson(src, "01_graph.ipynb", "1.1", "1.2")
    write_lesson(src, "02_hooks.ipynb", "2.1")
    workspace.start(tmp_path / "mine", source=src)
    return tmp_path / "mine"


@pytest.fixture
def grade() -> FakeGrader:
    return FakeGrader()


def collect(root: Path, grade: FakeGrader, **kwargs) -> list[Row]:
    return progress.collect(root, grade_fn=grade, grader_id="fake 1", **kwargs)


def test_the_table_lists_every_exercise_with_its_status(root, grade):
    answer(root / "01_graph.ipynb", "1.1", "answer = 42")
    answer(root / "01_graph.ipynb", "1.2", "answer = 41")
    assert progress.table(collect(root, grade), "mine") == "\n".join(
        [
            "mine: 1 of 3 exercises passed, 1 failed, 1 not attempted",
            "",
            "lesson            exercise  status         note",
            "00_warmup.ipynb   -         no exercises",
            "01_graph.ipynb    1.1       passed",
            "                  1.2       failed         yours: answer = 41, expected: answer = 42",
            "02_hooks.ipynb    2.1       not attempted",
        ]
    )


def test_a_second_run_grades_nothing(root, grade):
    first = collect(root, grade)
    assert sorted(grade.graded) == ["00_warmup.ipynb", "01_graph.ipynb", "02_hooks.ipynb"]
    grade.graded.clear()
    assert collect(root, grade) == first
    assert grade.graded == []
    cache = json.loads((root / progress.CACHE).read_text())
    assert cache["grader"] == "fake 1" and len(cache["results"]) == 3


def test_a_run_that_grades_nothing_writes_nothing(root, grade, monkeypatch, capsys):
    collect(root, grade)
    monkeypatch.setattr(progress, "write_atomically", lambda path, data: pytest.fail(f"wrote {path}"))
    collect(root, grade)
    assert capsys.readouterr().err == ""


def test_an_edited_notebook_is_graded_again_and_only_it(root, grade):
    collect(root, grade)
    grade.graded.clear()
    answer(root / "02_hooks.ipynb", "2.1", "answer = 42")
    rows = collect(root, grade)
    assert grade.graded == ["02_hooks.ipynb"]
    assert Row("02_hooks.ipynb", "02_hooks.ipynb", "2.1", "passed") in rows


def test_running_cells_or_writing_markdown_does_not_regrade(root, grade):
    collect(root, grade)
    grade.graded.clear()
    nb = nbformat.read(root / "01_graph.ipynb", as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    nb.cells[1].execution_count = 1
    nb.cells.append(nbformat.v4.new_markdown_cell("my notes"))
    nbformat.write(nb, root / "01_graph.ipynb")
    collect(root, grade)
    assert grade.graded == []


def test_a_new_grader_discards_the_cache(root, grade):
    collect(root, grade)
    grade.graded.clear()
    progress.collect(root, grade_fn=grade, grader_id="fake 2")
    assert len(grade.graded) == 3


def test_no_cache_grades_everything_again(root, grade):
    collect(root, grade)
    grade.graded.clear()
    collect(root, grade, use_cache=False)
    assert len(grade.graded) == 3


def test_a_damaged_cache_is_ignored(root, grade):
    collect(root, grade)
    (root / progress.CACHE).write_text("{ damaged")
    grade.graded.clear()
    assert [r.status for r in collect(root, grade)] == [
        "no exercises",
        "not attempted",
        "not attempted",
        "not attempted",
    ]
    assert len(grade.graded) == 3


def test_a_grader_crash_is_one_row_and_is_not_cached(root, grade):
    def crashing(path, lesson):
        if path.name == "01_graph.ipynb":
            raise RuntimeError("kernel died")
        return grade(path, lesson)

    rows = progress.collect(root, grade_fn=crashing, grader_id="fake 1")
    assert (
        Row("01_graph.ipynb", "01_graph.ipynb", "-", "error", "the grader failed: RuntimeError: kernel died")
        in rows
    )
    assert "some lessons could not be graded" in progress.table(rows)
    grade.graded.clear()
    collect(root, grade)
    assert grade.graded == ["01_graph.ipynb"]


def test_an_answer_that_raised_is_a_verdict_and_is_cached(root, grade):
    def raising_answer(path, lesson):
        grade.graded.append(path.name)
        return [("2.1", "error", "yours raised ZeroDivisionError")] if lesson == "02_hooks.ipynb" else []

    progress.collect(root, grade_fn=raising_answer, grader_id="fake 1")
    grade.graded.clear()
    rows = progress.collect(root, grade_fn=raising_answer, grader_id="fake 1")
    assert (
        grade.graded == []
        and Row("02_hooks.ipynb", "02_hooks.ipynb", "2.1", "error", "yours raised ZeroDivisionError") in rows
    )


def test_a_grader_with_an_unknown_status_is_a_bug_we_report(root):
    with pytest.raises(ValueError, match="'ok'"):
        progress.collect(root, grade_fn=lambda path, lesson: [("1.1", "ok", "")], grader_id="bad")


def test_deleted_and_renamed_lessons(root, grade):
    collect(root, grade)
    grade.graded.clear()
    os.replace(root / "01_graph.ipynb", root / "mine.ipynb")
    (root / "02_hooks.ipynb").unlink()
    rows = collect(root, grade)
    assert grade.graded == []  # the renamed notebook's code is unchanged: cached
    text = progress.table(rows)
    assert "01_graph.ipynb (mine.ipynb)   1.1" in text
    assert f"deleted; `course update {root} --restore 02_hooks.ipynb` brings it back" in text


def test_a_folder_of_notebooks_without_a_manifest_is_graded_too(tmp_path, grade):
    write_lesson(tmp_path, "03_saved_tensors.ipynb", "3.1")
    write_lesson(tmp_path, "03_saved_tensors.updated.ipynb", "3.1")  # an offered copy: not a lesson
    assert collect(tmp_path, grade) == [
        Row("03_saved_tensors.ipynb", "03_saved_tensors.ipynb", "3.1", "not attempted")
    ]


def test_a_read_only_folder_still_gets_its_table(root, grade, monkeypatch, capsys):
    def read_only(path, data):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(progress, "write_atomically", read_only)
    monkeypatch.setattr(progress, "default_grader", lambda: grade)
    assert progress.main([str(root)]) == 0
    captured = capsys.readouterr()
    assert "0 of 3 exercises passed, 3 not attempted" in captured.out
    assert "could not save the cache" in captured.err and "grading 01_graph.ipynb ..." in captured.err


def test_the_course_command_prints_the_table(root, grade, monkeypatch, capsys):
    monkeypatch.setattr(progress, "default_grader", lambda: grade)
    assert cli.main(["progress", str(root)]) == 0
    assert capsys.readouterr().out.startswith(f"{root}: 0 of 3 exercises passed")


def test_a_failed_exercise_points_at_the_full_report(root, grade, monkeypatch, capsys):
    answer(root / "02_hooks.ipynb", "2.1", "answer = 1" + " + 1" * 40)
    monkeypatch.setattr(progress, "default_grader", lambda: grade)
    assert progress.main([str(root)]) == 0
    out = capsys.readouterr().out
    assert f"course grade {root / '02_hooks.ipynb'}" in out
    [row] = [line for line in out.splitlines() if "2.1" in line]
    assert row.endswith("...") and len(row.split("failed", 1)[1].strip()) == 72  # one line, cut


def test_a_grader_result_becomes_a_short_note():
    message = (
        "[0.1 cube_sum_grad] failed: 0/4 cases\n  case:     cube_sum_grad(...)\n  hint:     use autograd"
    )
    assert (
        progress.result_note({"status": "failed", "message": message, "hint": "use autograd"})
        == "0/4 cases; hint: use autograd"
    )
    assert (
        progress.result_note(
            {"status": "error", "message": "[0.1 f] error: timeout: ran past 10 s", "hint": ""}
        )
        == "timeout: ran past 10 s"
    )
    assert (
        progress.result_note({"status": "passed", "message": "[0.1 f] passed: 4/4 cases", "hint": ""}) == ""
    )


def test_progress_on_a_missing_folder_says_how_to_start(tmp_path, capsys):
    assert progress.main([str(tmp_path / "nope")]) == 1
    assert "course start" in capsys.readouterr().err


def test_progress_on_a_notebook_names_its_folder_and_course_grade(tmp_path, capsys):
    """`course progress FILE.ipynb` suggested `course start FILE.ipynb` (issue 48)."""
    (tmp_path / "00_warmup.ipynb").write_text("{}")
    assert progress.main([str(tmp_path / "00_warmup.ipynb")]) == 1
    err = capsys.readouterr().err
    assert f"`course progress {tmp_path}`" in err and f"`course grade {tmp_path / '00_warmup.ipynb'}`" in err
    assert "course start" not in err


def test_the_grader_fingerprint_names_the_course_version():
    import course

    assert files.grader_fingerprint().startswith(f"course {course.__version__} sha256:")


@pytest.mark.notebook
@pytest.mark.slow
def test_the_real_grader_end_to_end(tmp_path):
    """A fixture notebook for lesson 0 (exercises taken from the check registry): the first
    function exercise answered with its reference solution, the rest left as stubs."""
    grading = pytest.importorskip(
        "course.grading.grade", reason="the grader (course/grading/grade.py) is not installed"
    )
    import inspect

    from course import checks

    checks.load_all()
    exercises = checks.all_exercises(0)
    solved = next(ex for ex in exercises if ex.kind == "function")
    cells = [
        "import torch",
        inspect.getsource(solved.solution) + f"\n{solved.name} = {solved.solution.__name__}",
    ]
    cells += [f"raise NotImplementedError('exercise {ex.id}')" for ex in exercises if ex is not solved]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbformat.write(nb, tmp_path / "mine.ipynb")  # renamed: the grader is told it is lesson 0
    calls = []

    def spy(path, lesson):
        calls.append(path.name)
        return progress.default_grader()(path, lesson)

    (tmp_path / ".course").mkdir()
    (tmp_path / ".course" / "manifest.json").write_text(
        json.dumps(
            {
                "format": 1,
                "source": "",
                "lessons": {"00_warmup.ipynb": {"file": "mine.ipynb", "shipped": "x"}},
            }
        )
    )
    rows = progress.collect(tmp_path, grade_fn=spy, grader_id=files.grader_fingerprint())
    assert {r.exercise.split()[0]: r.status for r in rows} == {
        ex.id: "passed" if ex is solved else "not attempted" for ex in exercises
    }
    assert progress.collect(tmp_path, grade_fn=spy, grader_id=files.grader_fingerprint()) == rows
    assert calls == ["mine.ipynb"]  # the second run came from the cache
    assert grading.grade_notebook  # the API we adapt to


# --- untouched notebooks are not run (issue 17) -----------------------------------------------------


def test_the_exercises_read_without_importing_are_the_registered_ones():
    from course import checks

    checks.load_all()
    for lesson in LESSONS:
        number = lesson.number
        assert registered_exercises(number) == [(ex.id, ex.name) for ex in checks.all_exercises(number)]


class Untouched(FakeGrader):
    """A grader that, like the default one, answers untouched notebooks without grading."""

    def untouched(self, path, lesson, pristine):
        if pristine is None or not progress.edits_nothing(path, pristine):
            return None
        return [(ex, "not attempted", "") for ex, _, _ in FakeGrader()(pristine, lesson)]


def test_untouched_notebooks_are_not_graded_and_an_edited_one_is(root):
    grade = Untouched()
    rows = collect(root, grade)
    assert grade.graded == [] and [r.status for r in rows] == ["no exercises"] + ["not attempted"] * 3
    assert not (root / progress.CACHE).exists()  # nothing graded, nothing written
    answer(root / "01_graph.ipynb", "1.1", "answer = 42")
    rows = collect(root, grade)
    assert (
        grade.graded == ["01_graph.ipynb"]
        and Row("01_graph.ipynb", "01_graph.ipynb", "1.1", "passed") in rows
    )


def fresh_course_folder(tmp_path: Path) -> Path:
    """`course start` of the real course's learner copies, as a learner gets them (from a
    snapshot of notebooks/, so a lesson regenerated meanwhile cannot change the test)."""
    import shutil

    shutil.copytree(workspace.find_source(), tmp_path / "lessons")
    assert cli.main(["start", str(tmp_path / "mine"), "--source", str(tmp_path / "lessons")]) == 0
    return tmp_path / "mine"


def test_a_fresh_copy_of_the_course_is_all_not_attempted_without_running_anything(
    tmp_path, monkeypatch, capsys
):
    root = fresh_course_folder(tmp_path)
    import course.grading.grade as grading

    monkeypatch.setattr(grading, "grade_notebook", lambda *a, **k: pytest.fail("ran a notebook"))
    capsys.readouterr()
    assert progress.main([str(root)]) == 0
    out, err = capsys.readouterr()
    total = sum(len(registered_exercises(lesson.number)) for lesson in LESSONS)
    assert out.startswith(f"{root}: 0 of {total} exercises passed, {total} not attempted\n")
    assert "grading" not in err


def test_deleting_moving_or_repeating_stub_cells_is_still_untouched(tmp_path, monkeypatch):
    root = fresh_course_folder(tmp_path)
    nb = nbformat.read(root / "01_autograd_graph.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    nb.cells = [
        code[-1],
        *code[1:-1],
        nbformat.v4.new_code_cell(code[-1].source),
    ]  # moved, repeated, one deleted
    nb.cells.append(nbformat.v4.new_markdown_cell("my notes"))
    nbformat.write(nb, root / "01_autograd_graph.ipynb")
    graded = []
    grader = progress.default_grader()
    spy = lambda path, lesson: graded.append(lesson) or []  # noqa: E731
    spy.untouched = grader.untouched
    rows = progress.collect(root, grade_fn=spy, grader_id="spy")
    assert graded == [] and {r.status for r in rows} == {"not attempted"}
    nb.cells.insert(0, nbformat.v4.new_code_cell("def bfs_names(t):\n    return []"))  # an answer
    nbformat.write(nb, root / "01_autograd_graph.ipynb")
    progress.collect(root, grade_fn=spy, grader_id="spy")
    assert graded == ["01_autograd_graph.ipynb"]


def test_a_notebook_the_grader_could_not_grade_is_tried_again(root, grade):
    def voided(path, lesson):
        grade.graded.append(path.name)
        return [("-", "error", "void: the course package changed while grading")]

    progress.collect(root, grade_fn=voided, grader_id="fake 1")
    grade.graded.clear()
    collect(root, grade)
    assert sorted(grade.graded) == ["00_warmup.ipynb", "01_graph.ipynb", "02_hooks.ipynb"]


def test_progress_says_when_an_update_is_waiting(tmp_path, monkeypatch, capsys):
    """Issue 35, item 6: after `course update` kept an edited lesson and offered the new
    version beside it, `course progress` says so (and names both files)."""
    import types

    root = fresh_course_folder(tmp_path)
    mine, shipped = root / "01_autograd_graph.ipynb", tmp_path / "lessons" / "01_autograd_graph.ipynb"
    for path, line in ((mine, "my_note = 1"), (shipped, "new_in_this_version = 2")):
        nb = nbformat.read(path, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(line))
        nbformat.write(nb, path)
    assert cli.main(["update", str(root), "--source", str(tmp_path / "lessons")]) == 0
    import course.grading.grade as grading

    monkeypatch.setattr(
        grading, "grade_notebook", lambda *a, **k: types.SimpleNamespace(error="", exercises=[])
    )
    capsys.readouterr()
    assert progress.main([str(root)]) == 0
    out = capsys.readouterr().out
    assert (
        "an update is waiting: updated-01_autograd_graph.ipynb is the new version of 01_autograd_graph.ipynb"
    ) in out
    (root / "updated-01_autograd_graph.ipynb").unlink()  # the learner kept theirs
    assert progress.main([str(root)]) == 0
    assert "update is waiting" not in capsys.readouterr().out
