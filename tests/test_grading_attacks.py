"""Can a notebook fool or crash ``course grade``? (issue 18, items 1-5)

Each attack runs the real ``python -m course grade`` in a temporary folder, on a COPY of the
``course`` package (``PYTHONPATH`` points at the copy), so an attack that writes to the
package damages the copy, never the checkout.

- a notebook that rewrites the grader's files cannot raise another lesson's score, and its
  own grade is void (tampering is reported, exit 1);
- a process the notebook starts and detaches is ended before the report is written, and the
  report says so; the report on disk is the grader's;
- an answer the comparison chokes on (a ragged list, ``10**400``) is an ``error``, and the
  report is still written, with folders for the reports created, through a closed pipe;
- a folder is graded against the course's lessons: a missing lesson is not attempted, an
  unreadable notebook counts 0 with the reason, offered ``.updated`` copies and non-lessons
  are skipped, a second notebook of one lesson is ignored and listed (the lesson's own name graded);
- ``-j 0`` is a usage error; definitions run once per notebook (a large global is built once
  and shared by the exercises' processes); nbformat's warnings stay off stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree as ET

import nbformat
import pytest

from course import checks
from course.grading import grade
from course.grading.judging import judge_outcomes
from course.grading.plan import plan_folder
from course.grading.session import open_session

ROOT = Path(__file__).resolve().parents[1]
SOLVED_00 = ROOT / "solutions" / "00_warmup.ipynb"
LEARNER_01 = ROOT / "notebooks" / "01_autograd_graph.ipynb"

pytestmark = [pytest.mark.notebook]


def _package_copy(tmp_path: Path) -> Path:
    """A private copy of the course package; returns the folder to put on PYTHONPATH."""
    where = tmp_path / "pkg"
    shutil.copytree(ROOT / "course", where / "course", ignore=shutil.ignore_patterns("__pycache__"))
    return where


def _grade(pkg: Path, *args: str, cwd: Path, shell_pipe: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pkg)}
    cmd = [sys.executable, "-m", "course", "grade", *args]
    if shell_pipe:  # the reader of stdout goes away after one line
        line = " ".join(f"'{c}'" for c in cmd) + " | head -n 1"
        return subprocess.run(
            ["sh", "-c", line], env=env, cwd=cwd, capture_output=True, text=True, timeout=900
        )
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)


def _solved_00_with(cells: list[str], ids: bool = True) -> nbformat.NotebookNode:
    """The solved warm-up with extra code cells at the end (and, with ``ids=False``, no cell ids)."""
    nb = nbformat.read(SOLVED_00, as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(textwrap.dedent(c)) for c in cells]
    if not ids:
        for cell in nb.cells:
            cell.pop("id", None)
    return nb


def _write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")  # json: nbformat would add ids back
    return path


def _points(lesson: int) -> float:
    return sum(ex.points for ex in checks.all_exercises(lesson))


# --- 1. a notebook cannot rewrite the grader --------------------------------------------------

# Appended to the copy's files by a definition of the solved 00 (it runs in the checking
# process, and would run in the kernel too). Imported after it, the first makes every judged
# answer equal to the expected one; the second makes every reported outcome the reference's.
_JUDGE_PATCH = """
import course.checks as _checks
if not hasattr(_checks, "_real_judge"):
    _checks._real_judge = _checks.judge
    _checks.judge = lambda ex, yours, expected, cost=None: _checks._real_judge(ex, expected, expected, cost)
"""
_WORKER_PATCH = """
if "_real_outcomes_of" not in globals():
    _real_outcomes_of = outcomes_of
    def outcomes_of(ex, answer, timeout=None):
        return _real_outcomes_of(ex, ex.solution, timeout)
"""


@pytest.mark.slow
def test_a_notebook_that_rewrites_the_grader_cannot_raise_another_lessons_score(tmp_path):
    pkg = _package_copy(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    attack = f"""
    import course.checks
    from pathlib import Path
    _here = Path(course.checks.__file__).parent
    _a = open(_here / "lesson01" / "__init__.py", "a").write({_JUDGE_PATCH!r})
    _b = open(_here / "__init__.py", "a").write({_WORKER_PATCH!r})
    """
    _write(_solved_00_with([attack]), folder / "00_warmup.ipynb")
    shutil.copy(LEARNER_01, folder / "01_autograd_graph.ipynb")
    proc = _grade(  # supervision alone: in bubblewrap the package is read-only, the attack cannot write
        pkg,
        str(folder),
        "--lessons",
        "00,01",
        "--no-run",
        "--json",
        str(tmp_path / "g.json"),
        "-q",
        "--no-sandbox",
        cwd=tmp_path,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    attacked = pkg / "course" / "checks" / "lesson01" / "__init__.py"
    assert _JUDGE_PATCH.strip() in attacked.read_text()  # the attack ran
    summary = json.loads((tmp_path / "g.json").read_text())
    assert proc.returncode == 1
    assert summary["tampering"] == ["checks/__init__.py", "checks/lesson01/__init__.py"]
    assert "TAMPERING" in proc.stdout
    by_lesson = {nb["lesson"]: nb for nb in summary["notebooks"]}
    unsolved = by_lesson[1]
    assert unsolved["score"] == 0 and unsolved["max_score"] == _points(1)
    assert {e["status"] for e in unsolved["exercises"]} == {"not attempted"}  # judged as it is
    attacker = by_lesson[0]
    assert attacker["error"].startswith("void: the course package changed")
    assert attacker["score"] == 0 and {e["status"] for e in attacker["exercises"]} == {"error"}


# --- 2. nothing the notebook started outlives the grade --------------------------------------


@pytest.mark.slow
def test_a_detached_process_is_ended_before_the_report_is_written(tmp_path):
    pkg = _package_copy(tmp_path)
    marks, report = tmp_path / "marks", tmp_path / "reports" / "g.json"
    marks.mkdir()
    forged = {"all_passed": True, "score": 999}
    forger = (
        f"# FORGER\nimport json, time\nwhile True:\n"
        f"    open({str(report)!r}, 'w').write(json.dumps({forged!r}))\n    time.sleep(0.05)\n"
    )
    spawn = f"""
    import subprocess, sys
    def _spawn(tag):
        p = subprocess.Popen([sys.executable, "-c", {forger!r}, "FORGER"], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open({str(marks)!r} + "/" + tag + "-" + str(p.pid), "w").close()
        return p
    _forger = _spawn("definition")
    """
    answer = """
    def cube_sum_grad(x):
        _spawn("answer")
        x = x.detach().requires_grad_()
        (x**3).sum().backward()
        return x.grad
    """
    path = _write(_solved_00_with([spawn, answer], ids=False), tmp_path / "00_warmup.ipynb")
    # supervision alone (in bubblewrap the report folder is out of reach and the PID namespace
    # ends the forgers: tests/test_grading_boundary.py)
    proc = _grade(pkg, str(path), "--json", str(report), "--cell-timeout", "60", "--no-sandbox", cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "MissingIDFieldWarning" not in proc.stderr
    tags = [p.name.split("-")[0] for p in marks.iterdir()]
    # the kernel, and each of lesson 0's two exercises' checking processes (each runs the definitions)
    assert tags.count("definition") == 3 and "answer" in tags
    for pid in (int(p.name.split("-")[1]) for p in marks.iterdir()):
        cmdline = Path(f"/proc/{pid}/cmdline")
        assert not (cmdline.exists() and b"FORGER" in cmdline.read_bytes()), f"forger {pid} still runs"
    summary = json.loads(report.read_text())  # the grader's report, not the forger's
    assert summary["format"] == "course-grade/1" and summary["score"] == 3
    assert any("FORGER" in line for line in summary["killed"])
    assert "ended" in proc.stdout and "FORGER" in proc.stdout


# --- 3. the judge never raises; the report is always written ----------------------------------


def test_answers_the_comparison_chokes_on_are_errors_and_the_report_is_written(tmp_path):
    pkg = _package_copy(tmp_path)
    folder, counter = tmp_path / "work", tmp_path / "definitions-ran"
    folder.mkdir()
    answers = f"""
    def cube_sum_grad(x):
        return 10**400
    predicted_a_grad = [[1.0], [1.0, 2.0]]
    _big = open({str(counter)!r}, "a").write("x")  # a global built by a definition
    """
    _write(_solved_00_with([answers]), folder / "00_warmup.ipynb")
    out = tmp_path / "not" / "yet"  # the folders are created
    proc = _grade(
        pkg,
        str(folder),
        "--lessons",
        "00",
        "--no-run",
        "--json",
        str(out / "g.json"),
        "--junit",
        str(out / "j.xml"),
        "-q",
        "--no-sandbox",  # the definitions count their runs in a file of ours, out of a sandbox's reach
        cwd=tmp_path,
        shell_pipe=True,
    )
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    (nb,) = json.loads((out / "g.json").read_text())["notebooks"]
    assert nb["score"] == 0 and nb["max_score"] == 3
    for e in nb["exercises"]:
        assert e["status"] in ("failed", "error"), e
        if e["status"] == "error":
            assert "\n" not in e["message"] and "could not compare" in e["message"], e["message"]
    assert ET.parse(out / "j.xml").getroot().find("testsuite").get("tests") == "2"
    # definitions ran once in each exercise's process, and nowhere else (worker.py, NOTE [No
    # autograd before a fork]): two exercises, two writes
    assert counter.read_text() == "xx"


def test_a_comparison_that_raises_makes_an_error_not_a_crash(monkeypatch):
    ex = checks.get("0.1")

    def boom(*args, **kwargs):
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(checks, "judge", boom)
    with open_session({0}) as session:
        result = judge_outcomes(
            session, ex, {"yours": [{"kind": "value", "value": 1}] * len(ex.all_cases)}, 0.5
        )
    assert result["status"] == "error" and result["score"] == 0
    assert result["message"] == (
        "[0.1 cube_sum_grad] error: the grader could not compare this answer "
        "(OverflowError: int too large to convert to float)"
    )


# --- 4. a folder is graded against the course's lessons ---------------------------------------


@pytest.mark.slow
def test_a_folder_counts_missing_and_unreadable_lessons_and_skips_copies(tmp_path):
    pkg = _package_copy(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(SOLVED_00, folder / "00_warmup.ipynb")
    shutil.copy(SOLVED_00, folder / "00_warmup.updated.ipynb")
    shutil.copy(SOLVED_00, folder / "00_warmup.updated-2.ipynb")
    (folder / "01_autograd_graph.ipynb").write_text('{"cells": [')  # truncated
    (folder / "scratch.ipynb").write_text(json.dumps(nbformat.v4.new_notebook()))
    proc = _grade(
        pkg,
        str(folder),
        "--lessons",
        "00,01,02",
        "--no-run",
        "--json",
        str(tmp_path / "g.json"),
        "--junit",
        str(tmp_path / "j.xml"),
        "-q",
        cwd=tmp_path,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1
    summary = json.loads((tmp_path / "g.json").read_text())
    by_lesson = {nb["lesson"]: nb for nb in summary["notebooks"]}
    assert sorted(by_lesson) == [0, 1, 2]
    assert by_lesson[0]["score"] == 3 and by_lesson[0]["all_passed"]
    assert by_lesson[1]["error"].startswith("cannot read the notebook")
    assert by_lesson[1]["score"] == 0 and by_lesson[1]["max_score"] == _points(1) > 0
    assert by_lesson[2]["note"] and {e["status"] for e in by_lesson[2]["exercises"]} == {"not attempted"}
    assert summary["max_score"] == _points(0) + _points(1) + _points(2)
    assert sorted(Path(i["path"]).name for i in summary["ignored"]) == [
        "00_warmup.updated-2.ipynb",
        "00_warmup.updated.ipynb",
        "scratch.ipynb",
    ]
    for suite in ET.parse(tmp_path / "j.xml").getroot().findall("testsuite"):
        assert int(suite.get("tests")) == len(suite.findall("testcase"))


def test_a_second_notebook_of_one_lesson_is_ignored_and_listed_never_a_refused_folder(tmp_path):
    """JupyterLab's "Duplicate" (issue 48): the lesson's own name is graded, the copy is listed
    under `ignored`, and the report is written (a refusal left Classroom with no result)."""
    pkg = _package_copy(tmp_path)
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(SOLVED_00, folder / "00_warmup.ipynb")
    shutil.copy(ROOT / "notebooks" / "00_warmup.ipynb", folder / "00_warmup-Copy1.ipynb")  # untouched
    proc = _grade(
        pkg, str(folder), "--lessons", "00", "--no-run", "--json", str(tmp_path / "g.json"), cwd=tmp_path
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "g.json").read_text())
    assert summary["finished"] and summary["score"] == summary["max_score"] == _points(0)
    assert [Path(nb["path"]).name for nb in summary["notebooks"]] == ["00_warmup.ipynb"]
    assert [(Path(i["path"]).name, i["reason"]) for i in summary["ignored"]] == [
        ("00_warmup-Copy1.ipynb", "another notebook of lesson 00: 00_warmup.ipynb is graded")
    ]
    assert "skipped 00_warmup-Copy1.ipynb: another notebook of lesson 00" in proc.stdout


def test_without_the_lessons_own_name_a_copy_is_graded_after_the_original(tmp_path):
    for name in ("00_mine-Copy1.ipynb", "00_mine.ipynb", "00_mine-Copy2.ipynb"):
        (tmp_path / name).write_text(SOLVED_00.read_text())
    plan, missing, ignored = plan_folder(tmp_path, {0})
    assert [p.name for p, _, _ in plan] == ["00_mine.ipynb"] and missing == []
    assert sorted(Path(i["path"]).name for i in ignored) == ["00_mine-Copy1.ipynb", "00_mine-Copy2.ipynb"]


def test_without_lessons_every_course_lesson_is_expected(tmp_path):
    (tmp_path / "00_warmup.ipynb").write_text(SOLVED_00.read_text())
    plan, missing, ignored = plan_folder(tmp_path, None)
    lessons = sorted({ex.lesson for ex in checks.all_exercises()})
    assert [lesson for _, _, lesson in plan] == [0] and missing == lessons[1:] and ignored == []


# --- 5. usage errors are clean ------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_a_bad_job_count_is_a_usage_error(tmp_path, jobs):
    proc = subprocess.run(
        [sys.executable, "-m", "course", "grade", str(SOLVED_00), "-j", jobs],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "at least 1" in proc.stderr or "expected one argument" in proc.stderr


def test_an_empty_folder_and_an_unknown_lesson_are_usage_errors(tmp_path, capsys):
    assert grade.main([str(tmp_path)]) == 2
    (tmp_path / "00_warmup.ipynb").write_text(SOLVED_00.read_text())
    assert grade.main([str(tmp_path), "--lessons", "99"]) == 2
    err = capsys.readouterr().err
    assert "no lesson notebooks in" in err and "the course has no lesson 99" in err
