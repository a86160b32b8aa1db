"""Does `course room` show who is stuck on what, grading only what changed since the last refresh?

The verdicts come from the real grader in its sandbox (the slow test), and the misconception a
cell names is the one torch-run judging in this process gives the same answer (``checks.
grade_answer``, the judge the notebook's own check uses). The layout, cache and watch tests
count sandbox runs through ``collect``'s ``grade`` seam: a recording stand-in that says which
notebooks it was given.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import course
from course import checks
from course.classroom import gradebook, room, room_view
from course.grading import signing

ROOT = Path(__file__).resolve().parents[1]
SOLVED, UNTOUCHED = ROOT / "solutions" / "00_warmup.ipynb", ROOT / "notebooks" / "00_warmup.ipynb"
BACKWARD = "    (x**3).sum().backward()\\n"  # the reference's backward call, in the notebook's JSON
RETURN = "    return x.grad\\n"


def _answer_0_1(body: str):
    """The learner's cube_sum_grad with ``body`` in place of the reference's, defined here."""
    namespace: dict = {}
    exec("import torch\ndef cube_sum_grad(x):\n" + body, namespace)
    return namespace["cube_sum_grad"]


def _notebook(old: str, new: str) -> str:
    text = SOLVED.read_text()
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _home(homes: Path, learner: str, text: str, hub: bool = True) -> Path:
    folder = homes / learner / "autograd-course" if hub else homes / learner
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "00_warmup.ipynb").write_text(text)
    return folder / "00_warmup.ipynb"


class Recorder:
    """``gradebook.grade_sandboxed``'s shape; counts the runs and who they were for."""

    def __init__(self, real=None):
        self.real, self.given = real, []

    def __call__(self, notebooks, timeout, lessons, hide):
        self.given.append(dict(notebooks))
        if self.real:
            return self.real(notebooks, timeout, lessons, hide)
        (name,) = notebooks
        entries = [{"id": "0.1", "status": "passed", "hint": ""}]
        return {"notebooks": [{"path": name, "error": "", "exercises": entries}]}, "bubblewrap"


@pytest.mark.slow
def test_the_grid_names_each_learners_verdict_and_a_refresh_regrades_only_the_changed_notebook(tmp_path):
    checks.load_all()
    ex = checks.get("0.1")
    forgot = "    x = x.detach().requires_grad_()\n    (x**3).sum()\n    return x.grad"
    off_by_one = "    x = x.detach().requires_grad_()\n    (x**3).sum().backward()\n    return x.grad + 1"
    known, unknown = (
        checks.grade_answer(ex, _answer_0_1(forgot)),
        checks.grade_answer(ex, _answer_0_1(off_by_one)),
    )
    catalogue = {w.hint: w.answer.__name__ for w in ex.wrong if callable(w.answer)}
    assert catalogue[known.hint] == "_forgot_backward" and unknown.hint not in catalogue  # the oracle's view

    homes = tmp_path / "homes"
    _home(homes, "ada", SOLVED.read_text())
    _home(homes, "bob", UNTOUCHED.read_text())
    _home(homes, "cy", _notebook(BACKWARD, "    (x**3).sum()\\n"))
    dee = _home(homes, "dee", _notebook(RETURN, "    return x.grad + 1\\n"), hub=False)  # a roster folder
    sandbox = Recorder(gradebook.grade_sandboxed)

    first = room.collect(homes, 0, grade=sandbox, jobs=2)
    grid = {r.learner: {i: str(r.cell(i)) for i, _ in first.exercises} for r in first.rows}
    assert grid == {
        "ada": {"0.1": "passed", "0.2": "passed"},
        "bob": {"0.1": "not attempted", "0.2": "not attempted"},
        "cy": {"0.1": "failed: forgot_backward", "0.2": "passed"},
        "dee": {"0.1": "failed: unrecognised", "0.2": "passed"},
    }
    assert len(sandbox.given) == 3 and (first.graded, first.unchanged) == (
        3,
        1,
    )  # bob's untouched copy: no run
    assert first.isolation <= {"bubblewrap", "none (separate process, private copy, limits)"}
    summary = room_view.summary(first)
    assert summary[0][:3] == (2, "forgot_backward", 1) and summary[0][3] == known.hint
    shown = room_view.text(first, width=120)
    assert "cy        failed: forgot_backward" in shown and f"0.1 forgot_backward: {known.hint}" in shown

    dee.write_text(SOLVED.read_text())  # dee fixes her answer
    sandbox.given.clear()
    second = room.collect(homes, 0, grade=sandbox)
    assert [list(g) for g in sandbox.given] == [["00_warmup.ipynb"]] and sandbox.given[0][
        "00_warmup.ipynb"
    ] == (dee.read_bytes())
    assert (second.graded, second.unchanged) == (1, 3)
    assert room_view.changes(first, second) == ["dee: 0.1 failed: unrecognised -> passed"]
    sandbox.given.clear()
    third = room.collect(homes, 0, grade=sandbox)
    assert sandbox.given == [] and room_view.changes(second, third) == []


def test_hub_homes_and_roster_folders_are_both_read_and_nothing_is_followed_or_trusted(tmp_path):
    homes = tmp_path / "homes"
    _home(homes, "hub-learner", SOLVED.read_text())
    _home(homes, "roster-learner", SOLVED.read_text(), hub=False)
    (homes / "empty").mkdir()
    (homes / "sly").mkdir()
    os.symlink(homes / "hub-learner" / "autograd-course", homes / "sly" / "autograd-course")
    os.symlink(homes / "hub-learner", homes / "alias")  # a symlinked home: not a learner
    (homes / ".hidden").mkdir()
    deep = _home(homes, "zed", "[" * 200_000 + "]" * 200_000)  # no notebook: costs zed's row only
    sandbox = Recorder()

    said = []
    seen = room.collect(
        homes, 0, grade=sandbox, on_graded=lambda done, total, _: said.append(f"{done}/{total}")
    )
    assert [r.learner for r in seen.rows] == ["empty", "hub-learner", "roster-learner", "sly", "zed"]
    assert len(sandbox.given) == 3 and said == ["1/3", "2/3", "3/3"]  # one run per notebook, counted
    assert {"00_warmup.ipynb": deep.read_bytes()} in sandbox.given  # zed's is graded: the grader says why
    rows = {r.learner: r for r in seen.rows}
    assert (
        str(rows["hub-learner"].cell("0.1")) == "passed"
        and str(rows["roster-learner"].cell("0.1")) == "passed"
    )
    assert rows["empty"].note == "no notebook of lesson 00" and "symbolic link" in rows["sly"].note
    assert str(rows["sly"].cell("0.1")) == "not attempted"

    ran = json.loads(SOLVED.read_text())  # the learner ran a cell: new outputs, the same code
    code = next(c for c in ran["cells"] if c["cell_type"] == "code")
    code["execution_count"] = 99
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran again\n"}]
    (homes / "hub-learner" / "autograd-course" / "00_warmup.ipynb").write_text(json.dumps(ran))
    sandbox.given.clear()
    assert str(room.collect(homes, 0, grade=sandbox).rows[1].cell("0.1")) == "passed" and sandbox.given == []

    forged = next((homes / room.CACHE_DIR).glob("*.json"))  # an edited entry is graded again
    entry = json.loads(forged.read_text())
    entry["cells"]["0.1"] = ["failed", "made up", ""]
    forged.write_text(json.dumps(entry))
    sandbox.given.clear()
    again = room.collect(homes, 0, grade=sandbox)
    assert len(sandbox.given) == 1 and {str(r.cell("0.1")) for r in again.rows if r.note == ""} == {"passed"}


def test_a_grading_that_does_not_finish_costs_its_row_and_is_tried_again(tmp_path):
    homes = tmp_path / "homes"
    _home(homes, "ada", SOLVED.read_text())
    calls = []

    def broken(notebooks, timeout, lessons, hide):
        calls.append(1)
        raise RuntimeError("grading did not finish in time")

    for expected_calls in (1, 2):
        seen = room.collect(homes, 0, grade=broken)
        assert len(calls) == expected_calls and "grading did not finish in time" in seen.rows[0].note


def test_the_page_reloads_itself_and_escapes_learner_text():
    cells = {"0.1": room.Cell("failed", "forgot_backward", "<script>")}
    page = room_view.page(room.Room(0, [("0.1", "cube_sum_grad")], [room.Row("<b>x</b>", cells)]), 7)
    assert "<meta http-equiv='refresh' content='7'>" in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page and "<script>" not in page


def test_watch_prints_only_who_changed_and_ends_on_ctrl_c(tmp_path):
    homes, page = tmp_path / "homes", tmp_path / "room.html"
    _home(homes, "ada", UNTOUCHED.read_text())  # untouched copies: no grading, no torch
    # Ctrl-C as a terminal delivers it: a process started from a background job inherits SIGINT
    # ignored (CI's rehearsals were started so, and this test then waited 60 s for nothing), so
    # the watcher is started with Python's own handler put back first.
    args = ["room", str(homes), "--lesson", "0", "--watch", "0.5", "--html", str(page)]
    start = (
        "import runpy, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"sys.argv = ['course', *{args!r}]\n"
        "runpy.run_module('course', run_name='__main__', alter_sys=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", start],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        for _ in range(600):  # the first refresh wrote the page
            if page.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert "content='1'" in page.read_text()
        _home(homes, "bob", UNTOUCHED.read_text())
        for _ in range(600):
            if "bob" in page.read_text() or proc.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    grid, _, later = out.partition("\n\n")
    assert grid.startswith("lesson 00: 1 learner; 0 graded, 1 unchanged")
    assert (
        "bob: joined" in later and "ada" not in later.split("0.1 cube_sum_grad", 1)[1]
    )  # ada did not change


def test_the_gradebook_csv_tells_not_attempted_from_failed(tmp_path, monkeypatch, capsys):
    checks.load_all()
    first, second = checks.all_exercises(0)[:2]
    key = "the instructor's CI secret"
    entries = [
        {
            "id": first.id,
            "name": first.name,
            "status": "failed",
            "points": first.points,
            "score": 0,
            "hint": "",
        },
        {
            "id": second.id,
            "name": second.name,
            "status": "not attempted",
            "points": second.points,
            "score": 0,
        },
    ]
    report = {
        "format": "course-grade/1",
        "course_version": course.__version__,
        "score": 0,
        "max_score": first.points + second.points,
        "learner": "ada",  # a report counts only for the learner it names (issue 44)
        "notebooks": [{"path": "00_warmup.ipynb", "error": "", "exercises": entries}],
    }
    notebook = (ROOT / "notebooks" / "00_warmup.ipynb").read_bytes()  # a report counts beside its notebooks
    report["notebooks"][0]["sha256"] = signing.file_sha256(notebook)
    (tmp_path / "roster" / "ada").mkdir(parents=True)
    (tmp_path / "roster" / "ada" / "00_warmup.ipynb").write_bytes(notebook)
    (tmp_path / "roster" / "ada" / "report.json").write_text(json.dumps(signing.sign(report, key.encode())))
    (tmp_path / "roster" / "eve").mkdir()  # nothing at all
    monkeypatch.setenv("COURSE_GRADE_KEY", key)
    out = tmp_path / "class.csv"
    assert gradebook.main([str(tmp_path / "roster"), "--lessons", "00", "--csv", str(out), "-q"]) == 0
    rows = {r["learner"]: r for r in csv.DictReader(out.open())}
    assert (rows["ada"][first.id], rows["ada"][second.id]) == ("0", "")  # failed: 0; not attempted: empty
    assert (rows["eve"][first.id], rows["eve"][second.id], rows["eve"]["total"]) == ("", "", "0")


def test_usage_errors_are_one_line(tmp_path):
    run = [sys.executable, "-I", "-m", "course", "room"]
    proc = subprocess.run([*run, tmp_path / "nowhere", "--lesson", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "no such folder" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([*run, tmp_path, "--lesson", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "no learner folders" in proc.stderr
    proc = subprocess.run(
        [*run, tmp_path, "--lesson", "0", "--html", tmp_path], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "--html needs a file name" in proc.stderr
    _home(tmp_path / "homes", "ada", UNTOUCHED.read_text())
    proc = subprocess.run([*run, tmp_path / "homes", "--lesson", "42"], capture_output=True, text=True)
    assert (
        proc.returncode == 2
        and "lesson 42 has no exercises" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_an_error_names_its_misconception_a_reveal_shows_and_of_two_notebooks_the_better_counts(tmp_path):
    checks.load_all()
    forgot = next(
        w.hint for w in checks.get("0.1").wrong if getattr(w.answer, "__name__", "") == "_forgot_backward"
    )
    verdicts = {  # what the grader said of each notebook
        "00_warmup.ipynb": [
            {"id": "0.1", "status": "error", "hint": forgot},
            {"id": "0.2", "status": "revealed"},
        ],
        "00_scratch.ipynb": [{"id": "0.1", "status": "passed"}, {"id": "0.2", "status": "not attempted"}],
    }

    def grade(notebooks, timeout, lessons, hide):
        (name,) = notebooks
        return {"notebooks": [{"path": name, "error": "", "exercises": verdicts[name]}]}, "bubblewrap"

    homes = tmp_path / "homes"
    _home(homes, "ada", SOLVED.read_text())
    bob = _home(homes, "bob", SOLVED.read_text())
    shutil.copy(bob, bob.parent / "00_scratch.ipynb")  # bob has a scratch copy too
    ada, bob = room.collect(homes, 0, grade=grade).rows
    assert (str(ada.cell("0.1")), str(ada.cell("0.2"))) == ("error: forgot_backward", "revealed")
    assert ada.cell("0.1").hint == forgot and ada.cell("0.1").stuck and not ada.cell("0.2").stuck
    assert (str(bob.cell("0.1")), str(bob.cell("0.2"))) == ("passed", "revealed")  # the better of two


def test_at_80_columns_two_misconceptions_never_look_alike():
    """Prediction labels share long prefixes; cut to a narrow column they looked alike."""
    names = [("1.1", "bfs_names"), ("1.2", "pre_relu_grad"), ("1.3", "predicted_breaks"), ("1.4", "x")]
    a, b = "predicted exp_add=False, sin_add=True", "predicted exp_add=False, sin_add=False"
    rows = [
        room.Row("ada", {"1.3": room.Cell("failed", a, "hint a"), "1.1": room.Cell("failed", "no_seen_set")}),
        room.Row("bob", {"1.3": room.Cell("failed", b, "hint b")}),
        room.Row("cy", {"1.3": room.Cell("failed", a, "hint a"), "1.1": room.Cell("passed")}),
    ]
    shown = room_view.text(room.Room(1, names, rows), width=80)
    lines = shown.splitlines()
    assert all(len(line) <= 80 for line in lines), shown
    at = lines[2].index("1.3")
    ada, bob, cy = (line[at:].split("  ")[0] for line in lines[3:6])  # 1.3's cell
    assert ada == cy != bob, shown  # the same misconception alike, two different ones not
    assert f"1.3 #1 = {b}" in lines and f"1.3 #2 = {a}" in lines  # the keys, spelled out
    assert "1.3 #2: hint a" in lines  # the most met, by its key
    assert "failed: no_seen_set" in lines[3]  # a column with nothing alike keeps its names
    wide = room_view.text(room.Room(1, names, rows), width=200)
    assert f"failed: {a}" in wide and "#1" not in wide  # room enough: no keys


@pytest.mark.slow
def test_a_warm_grader_gives_the_full_graders_grid_with_one_fresh_sandbox_per_notebook(tmp_path):
    """The live room's grader (warm sandboxes check, the room judges) against the grid the full
    grader gives the same class (the first test above): every notebook in a sandbox of its own,
    ended after it, none left when the grader closes."""
    from course.classroom.room_grader import WarmGrader
    from course.grading.sandbox.warm import ISOLATION, warm_available

    if not warm_available():
        pytest.skip("bubblewrap does not run here: the room grades through grade_sandboxed")
    homes = tmp_path / "homes"
    _home(homes, "ada", SOLVED.read_text())
    _home(homes, "cy", _notebook(BACKWARD, "    (x**3).sum()\\n"))
    _home(homes, "dee", _notebook(RETURN, "    return x.grad + 1\\n"))
    _home(homes, "eve", "{not a notebook")  # the full grader says why, in its own sandbox
    grader = WarmGrader(0, size=1, keep_warm=False)
    taken = []
    take = grader.start() or grader.pool.take
    grader.pool.take = lambda replace=True: taken.append(take(replace)) or taken[-1]
    try:
        seen = room.collect(homes, 0, grade=grader, jobs=2)
    finally:
        grader.close()
    grid = {r.learner: {i: str(r.cell(i)) for i, _ in seen.exercises} for r in seen.rows}
    assert {k: v for k, v in grid.items() if k != "eve"} == {
        "ada": {"0.1": "passed", "0.2": "passed"},
        "cy": {"0.1": "failed: forgot_backward", "0.2": "passed"},
        "dee": {"0.1": "failed: unrecognised", "0.2": "passed"},
    }
    assert "eve" in grid and seen.rows[-1].note  # graded the slow way, and the grader's reason shown
    assert len(taken) == 3 and len({id(s) for s in taken}) == 3  # one sandbox per notebook
    assert all(s.proc.returncode is not None and not s.tmp.exists() for s in taken)  # each ended
    assert grader.pool.servers == [] and ISOLATION in seen.isolation


@pytest.mark.slow
def test_watch_ended_by_sigterm_leaves_no_warm_sandbox_behind(tmp_path):
    """A room stopped by SIGTERM (kill, a CI's timeout) closes its warm sandboxes as Ctrl-C does:
    their folders (``course-warm-*`` in the temporary folder) are gone when it exits."""
    if shutil.which("bwrap") is None:
        pytest.skip("no bubblewrap: the room grades without warm sandboxes")
    homes, scratch = tmp_path / "homes", tmp_path / "tmp"
    scratch.mkdir()
    _home(homes, "ada", UNTOUCHED.read_text())
    room_command = ["room", str(homes), "--lesson", "0", "--watch", "0.5", "-j", "1", "-q"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "course", *room_command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        for _ in range(600):  # a warm sandbox waits for the first save
            if list(scratch.glob("course-warm-*")) or proc.poll() is not None:
                break
            time.sleep(0.1)
        warm = list(scratch.glob("course-warm-*"))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    if not warm:
        pytest.skip(f"no warm sandbox started here (bubblewrap cannot run?): {err[-300:]}")
    assert proc.returncode == 0, err
    assert list(scratch.glob("course-warm-*")) == []
