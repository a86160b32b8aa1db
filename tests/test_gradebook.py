"""Does `course gradebook` report a class: scores per learner, pass rates and misconceptions?

Two rosters: one made of `course grade --json` reports beside the notebooks they graded (what
CI jobs upload, with each learner's checkout; nothing is graded, so it is fast), and one of
real notebooks graded by `course grade` (a solved learner, an untouched one, one with a known
wrong answer, one with no notebooks).
"""

from __future__ import annotations

import copy
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import course
from course import checks
from course.grading import signing

ROOT = Path(__file__).resolve().parents[1]
KEY = "the instructor's CI secret"
NOTEBOOK = (ROOT / "notebooks" / "00_warmup.ipynb").read_bytes()  # what the reports below graded


def _entry(ex, status, hint=""):
    score = ex.points if status == "passed" else 0
    return {"id": ex.id, "name": ex.name, "status": status, "points": ex.points, "score": score, "hint": hint}


def _report(entries, key=KEY, learner="ada"):
    """A report as ``course grade --json --learner`` in CI makes it: totals, course version, signed."""
    report = {
        "format": "course-grade/1",
        "course_version": course.__version__,
        "learner": learner,
        "score": sum(e["score"] for e in entries),
        "max_score": sum(e["points"] for e in entries),
        "notebooks": [
            {
                "path": "00_warmup.ipynb",
                "sha256": signing.file_sha256(NOTEBOOK),
                "error": "",
                "exercises": entries,
            }
        ],
    }
    return signing.sign(report, key.encode()) if key else report


def _hand_in(folder: Path, report_text: str) -> None:
    """A learner's folder as CI leaves it: the report, and the notebook it graded."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(report_text)
    (folder / "00_warmup.ipynb").write_bytes(NOTEBOOK)


def _run(*args, cwd=ROOT, env=None):
    env = {**os.environ, "COURSE_GRADE_KEY": KEY, **(env or {})}
    return subprocess.run(
        [sys.executable, "-I", "-m", "course", "gradebook", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=900,
        env=env,
    )


def test_a_roster_of_ci_reports_gives_scores_rates_and_misconceptions(tmp_path):
    checks.load_all()
    lesson0 = checks.all_exercises(0)
    first, second = lesson0[0], lesson0[1]
    common, rare = first.wrong[0].hint, first.wrong[1].hint
    roster = tmp_path / "roster"
    learners = {
        "ada": [_entry(first, "passed"), _entry(second, "passed")],
        "bob": [_entry(first, "failed", common), _entry(second, "not attempted")],
        "cy": [_entry(first, "failed", common), _entry(second, "failed", "some other hint")],
        "dee": [_entry(first, "error", rare)],
    }
    for name, entries in learners.items():
        _hand_in(roster / name, json.dumps(_report(entries, learner=name)))
    (roster / "eve").mkdir()  # no notebooks, no report
    out_csv, out_json, out_html = tmp_path / "class.csv", tmp_path / "class.json", tmp_path / "class.html"

    proc = _run(roster, "--lessons", "00", "--csv", out_csv, "--json", out_json, "--html", out_html, "-q")
    assert proc.returncode == 0, proc.stderr

    rows = list(csv.DictReader(out_csv.open()))
    assert [r["learner"] for r in rows] == ["ada", "bob", "cy", "dee", "eve"]
    assert list(rows[0])[:3] == ["learner", first.id, second.id]
    assert rows[0][first.id] == str(first.points) and rows[0]["total"] == str(first.points + second.points)
    assert (
        rows[4]["total"] == "0"
        and rows[4]["note"] == "no lesson notebook in eve/ nor eve/autograd-course/ (and no report)"
    )
    max_points = sum(ex.points for ex in lesson0)
    assert {r["max"] for r in rows} == {str(max_points)}

    report = json.loads(out_json.read_text())
    by_id = {e["id"]: e for e in report["exercises"]}
    e1 = by_id[first.id]
    assert (e1["passed"], e1["failed"], e1["error"], e1["not_attempted"]) == (1, 2, 1, 1)
    assert e1["pass_rate"] == pytest.approx(1 / 5)
    assert e1["misconceptions"] == [{"hint": common, "learners": 2}, {"hint": rare, "learners": 1}]
    e2 = by_id[second.id]
    assert e2["misconceptions"] == [] and e2["unrecognised_wrong"] == 1 and e2["not_attempted"] == 3
    assert f"2 x {common}" in proc.stdout  # most common first, on stdout too
    assert proc.stdout.index(f"2 x {common}") < proc.stdout.index(f"1 x {rare}")
    page = out_html.read_text()
    assert "data:image/png;base64," in page and "Misconceptions the class met" in page


def test_usage_errors_are_one_line_not_tracebacks(tmp_path):
    proc = _run(tmp_path / "nowhere")
    assert proc.returncode == 2 and "no such roster folder" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "r").mkdir()
    proc = _run(tmp_path / "r")
    assert proc.returncode == 2 and "no learner folders" in proc.stderr
    proc = _run(tmp_path / "r", "--csv", tmp_path / "missing" / "x.csv")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    (tmp_path / "r" / "ada").mkdir()
    proc = _run(tmp_path / "r", "--lessons", "99")  # as `course grade --lessons 99` (issue 44)
    assert proc.returncode == 2 and "the course has no lesson 99" in proc.stderr and not proc.stdout


@pytest.mark.slow
def test_a_roster_of_notebooks_is_graded_and_cached(tmp_path):
    solution = ROOT / "solutions" / "00_warmup.ipynb"
    roster = tmp_path / "roster"
    for name in ("solved", "untouched", "wrong", "broken"):
        (roster / name).mkdir(parents=True)
    shutil.copy(solution, roster / "solved" / "00_warmup.ipynb")
    shutil.copy(ROOT / "notebooks" / "00_warmup.ipynb", roster / "untouched" / "00_warmup.ipynb")
    text = solution.read_text()
    forgot = "    (x**3).sum().backward()\\n"
    assert forgot in text  # the reference's backward call, in the notebook's JSON
    (roster / "wrong" / "00_warmup.ipynb").write_text(text.replace(forgot, "    (x**3).sum()\\n", 1))
    (roster / "broken" / "00_warmup.ipynb").write_text("{ not a notebook")
    (roster / "empty").mkdir()

    ex = checks.get("0.1")
    namespace: dict = {}
    exec(
        "import torch\ndef f(x):\n    x = x.detach().requires_grad_()\n    (x**3).sum()\n    return x.grad",
        namespace,
    )
    expected_hint = checks.grade_answer(ex, namespace["f"]).hint  # what the grader will say

    out_json = tmp_path / "class.json"
    proc = _run(roster, "--lessons", "00", "--json", out_json, "-j", "2")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out_json.read_text())
    scores = {x["learner"]: x["total"] for x in report["learners"]}
    max_points = report["learners"][0]["max"]
    assert scores["solved"] == max_points and scores["untouched"] == 0 and scores["empty"] == 0
    assert 0 < scores["wrong"] < max_points and scores["broken"] == 0
    notes = {x["learner"]: x["note"] for x in report["learners"]}
    assert (
        notes["empty"].startswith("no lesson notebook in empty/") and notes["broken"]
    )  # a reason, not a crash
    e1 = next(e for e in report["exercises"] if e["id"] == "0.1")
    assert e1["passed"] == 1 and e1["not_attempted"] >= 2
    assert e1["misconceptions"] == [{"hint": expected_hint, "learners": 1}]

    again = _run(roster, "--lessons", "00", "--json", out_json)  # nothing changed: all cached
    assert again.returncode == 0 and "graded " not in again.stderr
    cached = json.loads(out_json.read_text())
    first = {x["isolation"] for x in report["learners"] if x["learner"] != "empty"}
    assert len(first) == 1 and first <= {"bubblewrap", "none (separate process, private copy, limits)"}
    assert {x["isolation"] for x in cached["learners"] if x["learner"] != "empty"} == {"cached"}
    for x in report["learners"] + cached["learners"]:
        x.pop("isolation")
    assert cached == report
    # Issue 44: a cache entry is for its owner's eyes only, and is never a learner's grade.
    entries = [p for p in (roster / ".course-gradebook").iterdir() if p.suffix == ".json"]
    assert entries and {p.stat().st_mode & 0o777 for p in entries} == {0o600}
    assert (roster / ".course-gradebook").stat().st_mode & 0o077 == 0
    shutil.copy(entries[0], roster / "empty" / "report.json")  # planted where a CI report would be
    again = _run(roster, "--lessons", "00", "--json", out_json, "-q")
    notes = {x["learner"]: x["note"] for x in json.loads(out_json.read_text())["learners"]}
    assert "another purpose (cache)" in notes["empty"], notes["empty"]
    collected = subprocess.run(
        [sys.executable, "-I", "-m", "course", "collect", roster / "empty"],
        capture_output=True,
        text=True,
        env={**os.environ, "COURSE_GRADE_KEY": KEY},
    )
    assert "another purpose (cache)" in collected.stdout and " 2/" not in collected.stdout, collected.stdout


def test_only_signed_well_formed_reports_count_and_a_bad_one_costs_only_its_row(tmp_path):
    checks.load_all()
    first, second = checks.all_exercises(0)[:2]
    honest = [_entry(first, "passed"), _entry(second, "passed")]
    roster = tmp_path / "roster"
    forged_score = _report([_entry(first, "failed"), _entry(second, "failed")])
    forged_score["notebooks"][0]["exercises"] = copy.deepcopy(honest)  # edited after signing: well formed,
    forged_score["score"] = first.points + second.points  # totals that add up
    stale = copy.deepcopy(_report(honest, learner="stale"))  # signed, for another notebook than the folder's
    stale["notebooks"][0]["sha256"] = "0" * 64
    stale = signing.sign(stale, KEY.encode())
    bad = {
        "ada": json.dumps(_report(honest)),
        "unsigned": json.dumps(_report(honest, key=None, learner="unsigned")),
        "other-key": json.dumps(_report(honest, key="a guess", learner="other-key")),
        "edited": json.dumps({**forged_score, "learner": "edited"}),
        "big": json.dumps(signing.sign({**_report(honest, key=None), "score": 1002}, KEY.encode())),
        "negative": json.dumps(signing.sign(_report([{**honest[0], "score": -50}], key=None), KEY.encode())),
        "nan": json.dumps(_report([{**honest[0], "score": float("nan")}], key=None)),
        "infinity": '{"format": "course-grade/1", "score": Infinity, "max_score": 3, "notebooks": []}',
        "deep": '{"format": "course-grade/1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "string": json.dumps({**_report(honest, key=None), "notebooks": "all"}),
        "nulls": json.dumps({**_report(honest, key=None), "score": None, "max_score": None}),
        "stale": json.dumps(stale),
        '=HYPERLINK("x")': json.dumps(_report(honest, key=None)),
    }
    for name, text in bad.items():
        (roster / name).mkdir(parents=True)
        (roster / name / "report.json").write_text(text)
    shutil.copy(ROOT / "notebooks" / "00_warmup.ipynb", roster / "stale" / "00_warmup.ipynb")
    (roster / "ada" / "00_warmup.ipynb").write_bytes(NOTEBOOK)  # the honest report, beside what it graded
    out_csv, out_json = tmp_path / "class.csv", tmp_path / "class.json"
    proc = _run(
        roster, "--lessons", "00", "--csv", out_csv, "--json", out_json, "-q", env={"PATH": "/nonexistent"}
    )  # the stale learner's notebook is graded, without bubblewrap
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(out_json.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    totals = {x["learner"]: x["total"] for x in report["learners"]}
    assert totals.pop("ada") == first.points + second.points, [
        x for x in report["learners"] if x["learner"] == "ada"
    ]
    assert set(totals.values()) == {0}, totals  # every other row: 0, and every row is there
    notes = {x["learner"]: x["note"] for x in report["learners"]}
    assert "signature does not check" in notes["other-key"] and "signature does not check" in notes["edited"]
    assert "signature does not check" in notes["unsigned"] and "changed since it was graded" in notes["stale"]
    for name in ("big", "negative", "nan", "infinity", "deep", "string", "nulls"):
        assert "ignored" in notes[name], (name, notes[name])
    assert "WARNING: bubblewrap is not available" in proc.stderr  # said loudly
    rows = {r["learner"]: r for r in csv.DictReader(out_csv.open())}
    assert '\'=HYPERLINK("x")' in rows  # shown as text by a spreadsheet, not run


def test_an_output_that_cannot_be_written_is_an_error_after_the_table(tmp_path):
    roster = tmp_path / "roster"
    (roster / "eve").mkdir(parents=True)
    proc = _run(roster, "--json", tmp_path)
    assert proc.returncode == 2 and "is a folder" in proc.stderr
    if Path("/dev/full").exists():
        proc = _run(roster, "--lessons", "00", "--json", "/dev/full")
        assert proc.returncode == 1 and "cannot write /dev/full" in proc.stderr and "eve" in proc.stdout
        assert "Traceback" not in proc.stderr


_HOSTILE = """
import os, pathlib
def _attack():
    roster = pathlib.Path({roster!r})
    for target in (roster / "ada" / "report.json", roster / ".course-gradebook" / "poison.json",
                   pathlib.Path({escape!r})):
        try:
            target.write_text({forged!r})
        except OSError:
            pass
    for where in ("/tmp", "."):  # fill every temporary file system it can reach
        try:
            with open(os.path.join(where, "filler"), "wb") as f:
                for _ in range(4096):
                    f.write(b"0" * (1 << 20))
        except OSError:
            pass
    return sorted(p for p in os.listdir("/proc") if p.isdigit())
_seen = _attack()
"""


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)
def test_one_hostile_learner_changes_no_other_learners_grade(tmp_path):
    import nbformat

    roster = tmp_path / "roster"
    solved, untouched = ROOT / "solutions" / "00_warmup.ipynb", ROOT / "notebooks" / "00_warmup.ipynb"
    for name, source in (("ada", solved), ("bob", untouched), ("course", solved), ("mallory", untouched)):
        (roster / name).mkdir(parents=True)
        shutil.copy(source, roster / name / "00_warmup.ipynb")
    forged = json.dumps(_report([], key=None))
    nb = nbformat.read(untouched, as_version=4)
    nb.cells.append(
        nbformat.v4.new_code_cell(
            _HOSTILE.format(roster=str(roster), escape=str(tmp_path / "escaped"), forged=forged)
        )
    )
    nbformat.write(nb, roster / "mallory" / "00_warmup.ipynb")
    out_json = tmp_path / "class.json"
    full = sum(ex.points for ex in checks.all_exercises(0))
    for attempt in ("first run", "cached run"):
        proc = _run(roster, "--lessons", "00", "--json", out_json, cwd=roster)  # from inside the roster, too
        assert proc.returncode == 0, proc.stderr
        learners = {x["learner"]: x for x in json.loads(out_json.read_text())["learners"]}
        totals = {name: x["total"] for name, x in learners.items()}
        assert totals == {"ada": full, "bob": 0, "course": full, "mallory": 0}, (attempt, totals)
        assert not (tmp_path / "escaped").exists() and not (roster / "ada" / "report.json").exists()
        assert not (roster / ".course-gradebook" / "poison.json").exists()
    assert {x["isolation"] for x in learners.values()} == {"cached"}


def _one_learner(tmp_path: Path) -> Path:
    roster = tmp_path / "roster"
    (roster / "ada").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "00_warmup.ipynb", roster / "ada" / "00_warmup.ipynb")
    return roster


def test_a_grader_that_fails_costs_its_row_and_the_note_says_what_it_said_last(tmp_path, monkeypatch):
    from course.classroom import gradebook, learner_grades

    said = "the grader fell over: no such thing"
    fails = [sys.executable, "-c", f"import sys; print('noise', file=sys.stderr); sys.exit({said!r})"]
    monkeypatch.setattr(learner_grades, "python_command", lambda *args: fails)
    (learner,) = gradebook.collect(_one_learner(tmp_path), {0})
    assert learner.exercises == {} and learner.note == f"not graded: grading did not finish (exit 1): {said}"


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)
def test_a_sandbox_that_cannot_start_the_grader_costs_the_row_with_the_reason(tmp_path, monkeypatch):
    from course.classroom import gradebook
    from course.grading.sandbox import sandbox_available

    if not sandbox_available():
        pytest.skip("bubblewrap cannot make namespaces here")
    gone = tmp_path / "gone" / "bin" / "python"  # a venv the sandbox hides, or one removed
    monkeypatch.setattr(sys, "executable", str(gone))
    (learner,) = gradebook.collect(_one_learner(tmp_path), {0})
    assert learner.exercises == {}, learner.exercises
    assert learner.note.startswith("not graded: the sandbox cannot start"), learner.note
    assert "gone/bin/python" in learner.note


def test_the_classroom_templates_folder_is_found_and_an_empty_folder_is_named(tmp_path):
    """A clone of the Classroom template keeps the notebooks in autograd-course/ (issue 48:
    the gradebook looked one folder up and scored everyone 0, exit 0)."""
    from course.classroom.gradebook import learner_notebooks, notebook_folder

    clone = tmp_path / "autograd-ada"
    (clone / "autograd-course").mkdir(parents=True)
    (clone / "README.md").write_text("the template's readme")
    shutil.copy(ROOT / "notebooks" / "00_warmup.ipynb", clone / "autograd-course" / "00_warmup.ipynb")
    assert notebook_folder(clone) == clone / "autograd-course"
    assert list(learner_notebooks(clone, {0}, [])) == ["00_warmup.ipynb"]
    shutil.copy(ROOT / "notebooks" / "00_warmup.ipynb", clone / "00_warmup.ipynb")
    assert notebook_folder(clone) == clone  # notebooks of its own: the folder itself
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "autograd-course").symlink_to(clone / "autograd-course")
    assert notebook_folder(tmp_path / "linked") == tmp_path / "linked"  # a link is never followed


def test_a_report_alone_is_not_taken_and_its_note_says_what_to_put_beside_it(tmp_path):
    """Issue 44: a report binds the notebooks it graded; without them in the folder it proves
    nothing (a classmate's, renamed for this folder, would count)."""
    checks.load_all()
    first, second = checks.all_exercises(0)[:2]
    roster = tmp_path / "roster"
    (roster / "ada").mkdir(parents=True)
    report = _report([_entry(first, "passed"), _entry(second, "passed")], learner="ada")
    (roster / "ada" / "report.json").write_text(json.dumps(report))
    out_json = tmp_path / "class.json"
    proc = _run(roster, "--lessons", "00", "--json", out_json, "-q")
    (row,) = json.loads(out_json.read_text())["learners"]
    assert row["total"] == 0 and proc.returncode == 1, proc.stdout  # nothing found is not a score
    assert row["note"] == (
        "report.json ignored: 00_warmup.ipynb is not in the folder: put the notebooks it graded beside it; "
        "no lesson notebook in ada/ nor ada/autograd-course/"
    )
    (roster / "ada" / "00_warmup.ipynb").write_bytes(NOTEBOOK)  # the fix the note names
    proc = _run(roster, "--lessons", "00", "--json", out_json, "-q")
    (row,) = json.loads(out_json.read_text())["learners"]
    assert proc.returncode == 0 and row["total"] == first.points + second.points and row["note"] == ""


def test_a_roster_names_the_missing_and_nothing_found_is_not_a_score(tmp_path):
    checks.load_all()
    first, second = checks.all_exercises(0)[:2]
    roster = tmp_path / "roster"
    _hand_in(  # signed for the repository's name, as the CI example's --learner autograd-<login> does
        roster / "autograd-ada",
        json.dumps(
            _report([_entry(first, "failed"), _entry(second, "not attempted")], learner="autograd-ada")
        ),
    )
    (roster / "autograd-dee").mkdir()  # nothing in it
    expect = tmp_path / "roster.txt"
    expect.write_text("# the class\nada\ndee\neve\n")
    out_json = tmp_path / "class.json"
    proc = _run(roster, "--lessons", "00", "--json", out_json, "--expect", expect, "-q")
    assert proc.returncode == 0, proc.stderr
    rows = {x["learner"]: x for x in json.loads(out_json.read_text())["learners"]}
    assert sorted(rows) == ["autograd-ada", "autograd-dee", "eve"]
    assert rows["eve"]["note"] == "missing: no folder eve/ in the roster"
    assert rows["autograd-dee"]["note"].startswith("no lesson notebook in autograd-dee/")
    # JSON as the CSV: null where not attempted, 0 where attempted and failed
    assert (rows["autograd-ada"]["scores"][first.id], rows["autograd-ada"]["scores"][second.id]) == (0, None)
    assert "nothing to grade for 2 of 3 learner(s): autograd-dee, eve" in proc.stderr
    assert "  eve                  -  (missing" in proc.stdout
    (roster / "autograd-ada" / "report.json").unlink()
    (roster / "autograd-ada" / "00_warmup.ipynb").unlink()
    nothing = _run(roster, "--lessons", "00", "-q")
    assert nothing.returncode == 1, nothing.stdout  # a roster where nothing was found is not a 0 for all
