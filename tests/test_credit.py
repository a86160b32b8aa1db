"""Partial credit, the learner's feedback file and the instructor's extra cases (issue 36, 6-7).

- Does an exercise that opts in (``partial=True``) score points x cases passed / cases, and an
  all-or-nothing one 0, with the notebook's message unchanged? Does a prediction never get any?
- Does the feedback file give each exercise's verdict, the misconception met with its hint, or
  the first failing case, and never a line of a reference solution nor a prediction's truth?
- Does ``--extra-cases FILE.py`` fail an answer that fits only the shipped cases (and does it
  pass without the file)? Does the report record their count and the file's sha256, not the
  cases? Does each mistake in the file get a message that names the fix?

The oracle is torch throughout: an exercise's expected outcomes are what torch (or the course's
reference, checked against torch in the lesson's tests) computes on each case.
"""

import hashlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course import checks
from course.checks import Exercise, case, grade_answer, judge, wrong
from course.checks.extra import ExtraCasesError, applied, extra_cases, load_extra_cases
from course.checks.outcomes import show
from course.grading.feedback import feedback_markdown, fields
from course.grading.grade import main as grade_main

ROOT = Path(__file__).resolve().parents[1]


def _sines(n: int, partial: bool, points: int = 2) -> Exercise:
    """An exercise whose oracle is torch.sin, on ``n`` independent cases (tensors of 1..n items)."""
    return Exercise(
        id="99.1",
        name="my_sin",
        title="sin, elementwise",
        solution=torch.sin,
        cases=[case(torch.linspace(0, 1, k + 1)) for k in range(n)],
        wrong=[wrong(torch.cos, "sin, not cos")],
        points=points,
        partial=partial,
    )


def _wrong_on(bad: set[int]):
    """sin, except on the cases whose tensor has k + 1 items for k in ``bad`` (then sin + 1)."""
    return lambda x: torch.sin(x) + (1 if x.numel() - 1 in bad else 0)


# --- partial credit ---------------------------------------------------------------------------


def test_three_of_four_cases_score_three_quarters_when_partial_and_nothing_otherwise():
    answer = _wrong_on({2})
    partial = grade_answer(_sines(4, partial=True), answer)
    whole = grade_answer(_sines(4, partial=False), answer)
    assert (partial.status, partial.cases_passed, partial.cases_total) == ("failed", 3, 4)
    assert partial.score == 1.5 and partial.partial
    assert whole.score == 0 and not whole.partial
    assert partial.message == whole.message  # the notebook says failed, with the first failing case
    assert partial.message.splitlines()[:2] == [
        "[99.1 my_sin] failed: 3/4 cases",
        "  case:     my_sin(tensor([0.0000, 0.5000, 1.0000]))",
    ]


@settings(max_examples=25)
@given(n=st.integers(1, 6), points=st.integers(1, 4), data=st.data())
def test_partial_credit_is_points_times_the_share_of_cases_passed(n, points, data):
    bad = data.draw(st.sets(st.integers(0, n - 1)))
    result = grade_answer(_sines(n, partial=True, points=points), _wrong_on(bad))
    assert result.cases_passed == n - len(bad)
    if bad:
        assert result.score == round(points * (n - len(bad)) / n, 4) and result.status == "failed"
    else:
        assert result.score == points and result.status == "passed" and not result.partial


def test_a_prediction_never_gets_partial_credit():
    with pytest.raises(ValueError, match="a prediction is right or wrong as a whole; remove partial=True"):
        Exercise(id="99.2", name="p", title="t", solution=1, kind="predict", oracle=lambda: 1,
                 wrong=[wrong(2, "no")], partial=True)  # fmt: skip
    with pytest.raises(ValueError, match="partial credit counts cases, a budget judges cost too"):
        Exercise(id="99.3", name="f", title="t", solution=abs, cases=[case(1)], wrong=[wrong(str, "no")],
                 cost=lambda f, x: {"calls": 1}, budget={"calls": 1}, partial=True)  # fmt: skip
    for ex in checks.all_exercises():
        if ex.kind == "predict":  # a wrong prediction of 2.3 (2 points) scores 0, not a share
            result = judge(ex, [{"kind": "value", "value": "surely not"}], checks.expected_outcomes(ex))
            assert (result.status, result.score, result.partial) == ("failed", 0, False)
            break


def test_the_exercises_that_opt_in_are_function_exercises_with_several_cases():
    opted = [ex for ex in checks.all_exercises() if ex.partial]
    assert [ex.id for ex in opted] == ["3.3", "8.1"]  # the report to the lead says why these
    assert all(ex.kind == "function" and not ex.budget and len(ex.all_cases) > 4 for ex in opted)


# --- the feedback file ------------------------------------------------------------------------


def _solution_lines(ex) -> list[str]:
    """The code lines of a function exercise's reference solution (not its docstring)."""
    try:
        source = inspect.getsource(ex.solution)
    except (TypeError, OSError):
        return []
    lines = [line.strip() for line in source.splitlines()]
    return [x for x in lines if len(x) >= 16 and not x.startswith(("#", '"', "'", "def ", "class "))]


def _graded_lessons(lessons=(0, 1, 3)) -> list[tuple]:
    """(exercise, its entry in a report) for each known wrong answer of ``lessons``, each
    prediction revealed, and one unrecognised wrong answer per function exercise."""
    entries = []
    for n in lessons:
        for ex in checks.all_exercises(n):
            for w in ex.wrong:
                entries.append((ex, grade_answer(ex, w.answer).to_json()))
            if ex.kind == "predict":
                entries.append((ex, grade_answer(ex, ex.solution, revealed=True).to_json()))
            else:
                entries.append((ex, grade_answer(ex, lambda *a, **k: "nothing like it").to_json()))
    return entries


@pytest.fixture(scope="module")
def graded():
    return _graded_lessons()


def test_the_feedback_gives_each_verdict_and_the_misconception_met_with_its_hint(graded):
    for ex, entry in graded:
        text = feedback_markdown(
            {"path": f"hw/{ex.lesson:02d}_x.ipynb", "lesson": ex.lesson, "exercises": [entry]}
        )
        assert f"| {ex.id} {ex.name} | {entry['status']} | {entry['score']:g}/{ex.points:g} |" in text
        if entry["hint"] in {w.hint for w in ex.wrong}:
            assert "**Misconception met:** " + entry["hint"] in text
        elif entry["status"] in ("failed", "error") and ex.kind == "function":  # unrecognised
            assert "matches none of the known misconceptions" in text
            case_line = dict(fields(entry["message"]))["case"]
            assert "case:" in text and case_line in text and "yours:" in text


def test_the_feedback_never_holds_a_solution_line_nor_a_predictions_truth(graded):
    whole = feedback_markdown(
        {"path": "hw/all.ipynb", "lesson": None, "exercises": [entry for _, entry in graded]}
    )
    solution_lines = {
        line for n in (0, 1, 3) for ex in checks.all_exercises(n) for line in _solution_lines(ex)
    }
    assert solution_lines  # the check has something to look for
    assert not [line for line in solution_lines if line in whole]
    for ex, entry in graded:
        if ex.kind != "predict":
            continue
        truth = show(checks.expected_outcomes(ex)[0])
        if entry["revealed"]:
            assert truth in entry["message"]  # the notebook showed it; the feedback must not
        section = feedback_markdown({"path": "hw/p.ipynb", "lesson": ex.lesson, "exercises": [entry]})
        assert "answer:" not in section
        if len(truth) >= 8:
            assert truth not in section, (ex.id, truth)


def test_partial_credit_shows_in_the_feedback():
    entry = grade_answer(_sines(4, partial=True), _wrong_on({0})).to_json()
    text = feedback_markdown({"path": "hw/99_x.ipynb", "lesson": 99, "exercises": [entry]})
    assert "| 99.1 my_sin | failed | 1.5/2 | 3/4 (partial credit) |" in text
    assert "**failed**: 1.5 of 2 points; 3 of 4 cases passed; partial credit." in text


def test_a_run_that_dies_leaves_no_earlier_feedback_behind(tmp_path, monkeypatch):
    """The feedback file is replaced before any learner code runs, as the --json report is."""
    from course.grading import grade

    notebook = tmp_path / "00_warmup.ipynb"
    notebook.write_bytes((ROOT / "notebooks" / "00_warmup.ipynb").read_bytes())
    feedback = tmp_path / "00.feedback.md"
    feedback.write_text("# an earlier run: every exercise passed\n")

    def dies(*args, **kwargs):
        raise RuntimeError("the machine went away")

    monkeypatch.setattr(grade, "open_session", dies)
    with pytest.raises(RuntimeError, match="went away"):
        grade_main([str(notebook), "--feedback", str(feedback), "-q", "--no-sandbox"])  # patched here
    assert (
        feedback.read_text() == "# Feedback on 00\\_warmup.ipynb\n\nGrading did not finish: no verdict yet.\n"
    )


# --- extra cases: the file and its errors -----------------------------------------------------


def _file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "extra_cases.py"
    path.write_text("import torch\nfrom course.checks import case, extra_cases\n" + body)
    return path


def test_an_extra_cases_file_adds_hidden_cases_for_the_run_only(tmp_path):
    path = _file(tmp_path, 'extra_cases("3.3", case([torch.ones(3)]), case([], label="mine"))\n')
    extra = load_extra_cases(path)
    shipped = checks.get("3.3")
    assert extra.record() == {
        "count": 2,
        "exercises": {"3.3": 2},
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    with applied(extra):
        ex = checks.get("3.3")
        assert ex.hidden[: len(shipped.hidden)] == shipped.hidden
        assert [c.label for c in ex.hidden[len(shipped.hidden) :]] == ["instructor's extra case 1", "mine"]
        assert checks.expected_outcomes(ex)[-2:] == [
            {"kind": "value", "value": 12},
            {"kind": "value", "value": 0},
        ]
    assert checks.get("3.3") is shipped


@pytest.mark.parametrize(
    "body, message",
    [
        (
            'extra_cases("3.9", case(1))\n',
            "the course has no exercise '3.9'; lesson 3 has 3.1, 3.2, 3.3, 3.4, 3.5",
        ),
        (
            'extra_cases("3.1", case(1))\n',
            "3.1 (predicted_calls) is a prediction: it has one answer and no cases",
        ),
        (
            'extra_cases("3.3", [torch.ones(2)])\n',
            "list is not a case; give each one as case(arguments..., label='...')",
        ),
        ('extra_cases("3.3")\n', "give at least one case(...) after the id"),
        ("x = 1\n", 'defines no extra cases: call extra_cases("N.M", case(...)) in it'),
        ("1 / 0\n", "raised ZeroDivisionError: division by zero"),
    ],
)
def test_each_mistake_in_the_file_names_its_fix(tmp_path, capsys, body, message):
    path = _file(tmp_path, body)
    with pytest.raises(ExtraCasesError) as caught:
        load_extra_cases(path)
    assert message in str(caught.value) and str(path) in str(caught.value)
    notebook = tmp_path / "03_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    assert grade_main([str(notebook), "--extra-cases", str(path), "-q"]) == 2  # before any grading
    assert f"course grade: --extra-cases: {path}" in capsys.readouterr().err


def test_extra_cases_outside_a_file_and_a_file_that_changed_are_refused(tmp_path):
    with pytest.raises(ExtraCasesError, match="belongs in an instructor's extra-cases file"):
        extra_cases("3.3", case([]))
    path = _file(tmp_path, 'extra_cases("3.3", case([]))\n')
    with pytest.raises(ExtraCasesError, match="changed while grading started"):
        load_extra_cases(path, sha256="0" * 64)


# --- extra cases and feedback through `course grade` ------------------------------------------

_OVERFIT = """def storage_bytes(tensors):
    if len(tensors) == 1:  # fits every shipped case of 3.3, none of which holds one tensor
        return 0
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())
"""


def _grade(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "course", "grade", *args, "--no-run", "-q", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    return proc, json.loads(out.read_text())


@pytest.mark.slow
def test_an_answer_fitting_only_the_shipped_cases_fails_an_extra_case_and_the_report_says_so(tmp_path):
    homework = tmp_path / "homework"
    homework.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(_OVERFIT)]
    nbformat.write(nb, homework / "03_saved_tensors.ipynb")
    path = _file(tmp_path, 'extra_cases("3.3", case([torch.ones(3)]))\n')

    proc, graded = _grade(
        tmp_path,
        str(homework / "03_saved_tensors.ipynb"),
        "--extra-cases",
        str(path),
        "--feedback",
        str(tmp_path / "fb.md"),
    )
    (ex,) = [e for e in graded["notebooks"][0]["exercises"] if e["id"] == "3.3"]
    assert (ex["status"], ex["cases_passed"], ex["cases_total"], ex["partial"]) == ("failed", 7, 8, True)
    assert ex["score"] == 1.75  # 3.3 grants partial credit: 2 points x 7/8
    assert graded["extra_cases"] == {
        "count": 1,
        "exercises": {"3.3": 1},
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    assert "torch.ones(3)" not in json.dumps(graded)  # the cases themselves stay with the instructor
    # Issue 44: an extra case is passed/failed only (its label, yours and expected were shown)
    assert "case:     one of your instructor's extra cases (not shown)" in ex["message"]
    assert "yours:" not in ex["message"] and "expected:" not in ex["message"]
    assert "failed         1.75/2    7/8 cases, partial credit" in proc.stdout
    assert "graded with 1 extra case(s) (1 for 3.3) from a file with sha256" in proc.stdout
    text = (tmp_path / "fb.md").read_text()
    assert "| 3.3 storage_bytes | failed | 1.75/2 | 7/8 (partial credit) |" in text
    assert "1 extra hidden case(s) your instructor holds" in text
    assert "one of your instructor's extra cases (not shown)" in text
    assert "instructor's extra case 1" not in text and "expected: 12" not in text

    feedback = tmp_path / "feedback"  # without the file, the same answer passes; a folder's feedback
    proc, plain = _grade(tmp_path, str(homework), "--lessons", "03", "--feedback", str(feedback))
    (ex,) = [e for e in plain["notebooks"][0]["exercises"] if e["id"] == "3.3"]
    assert (ex["status"], ex["score"], ex["cases_total"], plain["extra_cases"]) == ("passed", 2, 7, None)
    assert [p.name for p in feedback.iterdir()] == ["03_saved_tensors.feedback.md"]
    assert (
        "| 3.3 storage_bytes | passed | 2/2 | 7/7 |"
        in (feedback / "03_saved_tensors.feedback.md").read_text()
    )


def test_the_gradebook_refuses_a_bad_extra_cases_file_before_grading_anyone(tmp_path, capsys):
    from course.classroom.gradebook import main as gradebook_main

    (tmp_path / "roster" / "ada").mkdir(parents=True)
    path = _file(tmp_path, 'extra_cases("3.1", case(1))\n')
    assert gradebook_main([str(tmp_path / "roster"), "--extra-cases", str(path), "-q"]) == 2
    assert "course gradebook: --extra-cases: " in capsys.readouterr().err


@pytest.mark.slow
def test_the_gradebook_grades_every_learner_with_the_extra_cases(tmp_path):
    learner = tmp_path / "roster" / "ada"
    learner.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(_OVERFIT)]
    nbformat.write(nb, learner / "03_saved_tensors.ipynb")
    path = _file(tmp_path, 'extra_cases("3.3", case([torch.ones(3)]))\n')
    proc = subprocess.run(
        [sys.executable, "-m", "course", "gradebook", str(tmp_path / "roster"), "--lessons", "03", "-q",
         "--extra-cases", str(path), "--csv", str(tmp_path / "class.csv")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = (tmp_path / "class.csv").read_text().splitlines()
    # 3.3: 7 of 8 cases; 3.1 and 3.2 not attempted (an empty cell, not 0)
    assert rows[0].startswith("learner,3.1,3.2,3.3,") and rows[1].startswith("ada,,,1.75,")


@pytest.mark.slow
def test_a_reveal_however_spelled_earns_no_credit_and_a_truthy_flag_reveals_nothing(tmp_path):
    """Issue 46: the grader learns of a reveal from what ran in its kernel (check() writes the
    id down), not from the source's spelling; only ``reveal is True`` reveals."""
    from course.grading.notebook import grade_notebook

    nb = nbformat.read(ROOT / "solutions" / "00_warmup.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell('show = True\ncheck("0.2", **{"reveal": show})'))
    nb.cells.append(nbformat.v4.new_code_cell('check("0.1", reveal=1)'))  # a function: nothing to reveal
    path = tmp_path / "00_warmup.ipynb"
    nbformat.write(nb, path)
    by_id = {e["id"]: e for e in grade_notebook(path, timeout=240, cell_timeout=120).exercises}
    assert by_id["0.2"]["status"] == "revealed" and by_id["0.2"]["score"] == 0
    assert by_id["0.1"]["status"] == "passed"
    truthy = nbformat.read(ROOT / "solutions" / "00_warmup.ipynb", as_version=4)
    truthy.cells.append(nbformat.v4.new_code_cell('check("0.2", reveal="yes")'))  # shows nothing
    nbformat.write(truthy, path)
    by_id = {e["id"]: e for e in grade_notebook(path, timeout=240, cell_timeout=120).exercises}
    assert by_id["0.2"]["status"] == "passed"
