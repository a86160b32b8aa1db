"""Does graded homework work end to end: CI's points for GitHub Classroom, signed reports that
say which commit was graded and when, a class collected with its late work, a regrade?

The rehearsal (one module fixture, the costly part): two learners' git repositories in
``tmp_path``, each with lesson 00 committed (ada: solved, before the deadline; bob: one
exercise answered, after it). The grading step of docs/classroom-autograding.yml runs in each,
as written, with ``$GITHUB_OUTPUT`` pointing at a file; with the instructor's key in its
environment it signs its report as the instructor's workflow (docs/ci-grading-example.yml,
same ``course grade``) does. Bob's is graded by a **buggy copy of the course** (a patched
copy of the package on ``PYTHONPATH`` of that subprocess: exercise 0.2's oracle runs one
backward pass instead of two, so the right answer fails); the fix is this checkout's course,
with which ``course regrade`` grades bob again. Bob then commits newer work (0.1 solved): the
regrade must grade the commit his report names, not the newer file.

Independent oracles: git itself (``git rev-parse``) for commits, the dates we commit with for
times, torch for exercise 0.2's right answer, the registry's points for the scores.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import course
from course import checks
from course.classroom import collect
from course.grading import github_classroom, provenance, signing
from course.grading.files import grader_fingerprint

ROOT = Path(__file__).resolve().parents[1]
KEY = "the instructor's CI secret"
DEADLINE = "2026-12-01T00:00:00Z"
ON_TIME, LATE, LATER = "2026-11-30T20:00:00Z", "2026-12-01T12:00:00Z", "2026-12-02T09:00:00Z"
FOLDER = "autograd-course"  # the template's folder of notebooks (the workflow's NOTEBOOKS)


def _git(repo: Path, *args: str, when: str | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if when:
        env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
    done = subprocess.run(
        ["git", "-c", "user.name=Learner", "-c", "user.email=learner@localhost", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, bytes], when: str) -> str:
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "work", when=when)
    return _git(repo, "rev-parse", "HEAD")


def _a_grad_after_two_backwards() -> float:
    """Exercise 0.2's question, asked of torch."""
    a = torch.tensor(2.0, requires_grad=True)
    c = a * 3 + a
    c.backward(retain_graph=True)
    c.backward()
    return float(a.grad)


def _partly_solved() -> bytes:
    """The learner copy of lesson 00 with 0.2 answered (torch's value) and 0.1 left as the stub."""
    nb = json.loads((ROOT / "notebooks/00_warmup.ipynb").read_text())
    (cell,) = [c for c in nb["cells"] if "predicted_a_grad = ..." in "".join(c["source"])]
    cell["source"] = [f"predicted_a_grad = {_a_grad_after_two_backwards()!r}\n"]
    return json.dumps(nb, indent=1).encode()


def _workflow():
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docs/classroom-autograding.yml").read_text())


def _grading_step() -> tuple[dict, dict]:
    """(the job's env, the step with id ``course``) of the Classroom workflow."""
    job = _workflow()["jobs"]["run-autograding-tests"]
    (step,) = [s for s in job["steps"] if s.get("id") == github_classroom.RUNNER_ID]
    return job["env"], step


def _buggy_course(tmp: Path) -> Path:
    """A copy of the package whose exercise 0.2 oracle forgot the second backward pass."""
    shutil.copytree(ROOT / "course", tmp / "course", ignore=shutil.ignore_patterns("__pycache__"))
    lesson = tmp / "course/checks/lesson00/ex0_2_predicted_a_grad.py"
    text = lesson.read_text()
    right = "    c.backward(retain_graph=True)\n    c.backward()\n    return a.grad\n"
    assert text.count(right) == 1
    lesson.write_text(text.replace(right, "    c.backward(retain_graph=True)\n    return a.grad\n"))
    return tmp


def _run_ci_step(repo: Path, extra_env: dict | None = None) -> tuple[str, dict]:
    """Run the workflow's grading step in ``repo``: (its GITHUB_OUTPUT, the report it wrote)."""
    job_env, step = _grading_step()
    output = repo.parent / f"{repo.name}.github_output"
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        **job_env,
        "LESSONS": "00",  # this rehearsal's assignment: lesson 00 only
        "LEARNER": repo.name,  # what ${{ github.event.repository.name }} gives
        "GITHUB_OUTPUT": str(output),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "COURSE_GRADE_KEY": KEY,  # the instructor's run signs (docs/ci-grading-example.yml)
        **(extra_env or {}),
    }
    subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=repo, env=env, check=True, timeout=900, capture_output=True
    )
    return output.read_text(), json.loads((repo / "reports/report.json").read_text())


def _course(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "course", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COURSE_GRADE_KEY": KEY, **(env or {})},
    )


def _csv(path: Path) -> dict[str, dict]:
    with path.open(newline="") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("homework")
    repos, artifacts = tmp / "repos", tmp / "artifacts"
    ada, bob = repos / "autograd-ada", repos / "autograd-bob"
    commits = {}
    for repo, data, when in (
        (ada, (ROOT / "solutions/00_warmup.ipynb").read_bytes(), ON_TIME),
        (bob, _partly_solved(), LATE),
    ):
        repo.mkdir(parents=True)
        _git(repo, "init", "-q")
        commits[repo.name] = _commit(repo, {f"{FOLDER}/00_warmup.ipynb": data}, when)
    ci = {ada.name: _run_ci_step(ada)}
    ci[bob.name] = _run_ci_step(bob, {"PYTHONPATH": str(_buggy_course(tmp / "buggy"))})
    for name, (_, report) in ci.items():  # what `gh run download` gives: a folder per artifact
        (artifacts / f"report-{name}").mkdir(parents=True)
        (artifacts / f"report-{name}/report.json").write_text(json.dumps(report))
    forged = {**ci[ada.name][1], "learner": "autograd-eve", "score": 3}
    (artifacts / "report-eve").mkdir()
    (artifacts / "report-eve/report.json").write_text(
        json.dumps({**forged, "signature": {"alg": "hmac-sha256", "value": "0" * 64}})
    )
    # After CI graded him, bob solves 0.1 too, after the deadline: the regrade must not see it.
    commits["bob-later"] = _commit(
        bob, {f"{FOLDER}/00_warmup.ipynb": (ROOT / "solutions/00_warmup.ipynb").read_bytes()}, LATER
    )
    return {"tmp": tmp, "repos": repos, "artifacts": artifacts, "ci": ci, "commits": commits}


def _decoded(github_output: str) -> dict:
    (line,) = [x for x in github_output.splitlines() if x.startswith("result=")]
    return json.loads(base64.b64decode(line.removeprefix("result="), validate=True))


@pytest.mark.slow
def test_the_ci_step_gives_classroom_one_test_per_exercise_with_its_points(rehearsal):
    lesson0 = checks.all_exercises(0)
    names = [f"{ex.id} {ex.name}" for ex in lesson0]
    fields = {
        "name": str,
        "status": str,
        "score": (int, float),
        "message": str,
        "test_code": str,
        "filename": str,
        "line_no": int,
        "duration": int,
    }
    for output, report in rehearsal["ci"].values():
        result = _decoded(output)
        assert result["version"] == 1 and result["max_score"] == sum(ex.points for ex in lesson0)
        assert [t["name"] for t in result["tests"]] == names
        for test in result["tests"]:
            assert set(test) == set(fields) and all(isinstance(test[k], t) for k, t in fields.items())
            assert test["status"] in {"pass", "fail", "error"}
            shown = "" if test["status"] == "pass" else test["message"]  # the reporter's log prints test_code
            assert test["test_code"] == shown and test["message"].startswith(f"[{test['name']}]")
        assert sum(t["score"] for t in result["tests"]) == report["score"]  # what Classroom adds up
    ada, bob = (_decoded(rehearsal["ci"][n][0]) for n in ("autograd-ada", "autograd-bob"))
    assert ada["status"] == "pass" and [t["score"] for t in ada["tests"]] == [ex.points for ex in lesson0]
    assert bob["status"] == "fail" and [t["status"] for t in bob["tests"]] == ["fail", "fail"]  # the bug


@pytest.mark.slow
def test_the_ci_report_records_the_commit_and_its_time_under_the_signature(rehearsal):
    for learner, (_, report) in rehearsal["ci"].items():
        repo = rehearsal["repos"] / learner
        assert signing.verify(report, KEY.encode()) and report["learner"] == learner
        (nb,) = report["notebooks"]
        when = ON_TIME if learner == "autograd-ada" else LATE
        assert nb["git"] == {
            "head": rehearsal["commits"][learner],
            "head_time": when,
            "commit": rehearsal["commits"][learner],
            "commit_time": when,
            "path": f"{FOLDER}/00_warmup.ipynb",
            "modified": False,
        }
        assert nb["git"]["commit"] == _git(
            repo, "rev-list", "-1", "HEAD~1" if learner == "autograd-bob" else "HEAD"
        )
        assert report["course_version"] == course.__version__
    assert rehearsal["ci"]["autograd-ada"][1]["grader_fingerprint"] == grader_fingerprint()
    assert rehearsal["ci"]["autograd-bob"][1]["grader_fingerprint"] != grader_fingerprint()  # the buggy copy


@pytest.mark.slow
def test_collect_gives_one_row_per_learner_marks_late_work_and_flags_the_old_grader(rehearsal):
    out = rehearsal["tmp"] / "class.csv"
    done = _course("collect", rehearsal["artifacts"], "--deadline", DEADLINE, "--csv", out)
    assert done.returncode == 0, done.stderr
    rows = _csv(out)
    assert sorted(rows) == ["autograd-ada", "autograd-bob", "report-eve/"]  # eve: the artifact's row
    ada, bob, eve = rows["autograd-ada"], rows["autograd-bob"], rows["report-eve/"]
    # Committed on time, but graded now, after the deadline: a commit time is the committer's
    # word, so "unknown" (issue 44; it said "no" before, which a backdated commit also got).
    assert (ada["score"], ada["max_score"], ada["late"], ada["flags"]) == ("3", "3", "unknown", "")
    assert ada["commit"] == rehearsal["commits"]["autograd-ada"] and ada["commit_time"] == ON_TIME
    assert (bob["score"], bob["late"], bob["commit_time"]) == ("0", "yes", LATE)
    assert "graded by another grader" in bob["flags"] and bob["flags"].endswith("regrade")
    assert eve["score"] == "" and "its signature does not check" in eve["flags"]  # the forged one
    assert "autograd-bob" in done.stdout and "yes" in done.stdout


@pytest.mark.slow
def test_regrade_grades_the_recorded_commit_with_the_fixed_check(rehearsal):
    regraded = rehearsal["tmp"] / "regraded"
    done = _course(
        "regrade",
        rehearsal["artifacts"] / "report-autograd-bob",
        "--repos",
        rehearsal["repos"],
        "--out",
        regraded,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "autograd-bob  0/3 -> 1/3  changed" in done.stdout
    new = json.loads((regraded / "autograd-bob/report.json").read_text())
    assert signing.verify(new, KEY.encode()) and new["learner"] == "autograd-bob"
    assert new["grader_fingerprint"] == grader_fingerprint()
    (nb,) = new["notebooks"]
    assert [e["status"] for e in nb["exercises"]] == [
        "not attempted",
        "passed",
    ]  # 0.1: the commit, not the newer file
    assert nb["git"] == rehearsal["ci"]["autograd-bob"][1]["notebooks"][0]["git"]
    assert new["regraded_from"]["score"] == 0
    out = rehearsal["tmp"] / "after.csv"
    assert (
        _course("collect", rehearsal["artifacts"], regraded, "--deadline", DEADLINE, "--csv", out).returncode
        == 0
    )
    bob = _csv(out)["autograd-bob"]
    assert (bob["score"], bob["late"]) == ("1", "yes") and "another grader" not in bob["flags"]


# --- the parts, one at a time ----------------------------------------------------------------


def test_git_record_names_the_last_commit_of_the_file_and_its_time_in_utc(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    first = _commit(repo, {"work/00_warmup.ipynb": b"{}"}, "2026-11-30T23:30:00+02:00")
    head = _commit(repo, {"README.md": b"later"}, "2026-12-01T10:00:00Z")
    assert _git(repo, "rev-parse", "HEAD~1") == first
    record = provenance.git_record(repo / "work/00_warmup.ipynb", b"{}")
    assert record == {
        "head": head,
        "head_time": "2026-12-01T10:00:00Z",
        "commit": first,
        "commit_time": "2026-11-30T21:30:00Z",
        "path": "work/00_warmup.ipynb",
        "modified": False,
    }
    assert provenance.git_record(repo / "work/00_warmup.ipynb", b"{ }")["modified"] is True
    (repo / "work/01_new.ipynb").write_bytes(b"{}")
    untracked = provenance.git_record(repo / "work/01_new.ipynb", b"{}")
    assert (untracked["commit"], untracked["commit_time"], untracked["modified"]) == (None, None, True)
    loose = tmp_path / "loose"
    loose.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # wherever tmp_path lies
    assert provenance.git_record(loose / "00_warmup.ipynb", b"{}") is None  # outside git
    assert provenance.committed_bytes(repo, first, "work/00_warmup.ipynb") == b"{}"
    assert provenance.committed_bytes(repo, "--output=x", "work/00_warmup.ipynb") is None


def _signed_report() -> dict:
    git = {
        "head": "a" * 40,
        "commit": "b" * 40,
        "commit_time": ON_TIME,
        "path": "w/00_warmup.ipynb",
        "modified": False,
    }
    report = {
        "format": "course-grade/1",
        "course_version": course.__version__,
        "score": 1,
        "max_score": 1,
        "learner": "autograd-ada",
        "graded_at": ON_TIME,
        "grader_fingerprint": grader_fingerprint(),
        "notebooks": [
            {
                "path": "w/00_warmup.ipynb",
                "error": "",
                "git": git,
                "exercises": [
                    {"id": "0.2", "name": "predicted_a_grad", "status": "passed", "points": 1, "score": 1}
                ],
            }
        ],
    }
    return signing.sign(report, KEY.encode())


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r["notebooks"][0]["git"].update(commit_time=ON_TIME.replace("20:00", "19:59")),
        lambda r: r["notebooks"][0]["git"].update(commit="c" * 40),
        lambda r: r["notebooks"][0]["git"].update(modified=True),
        lambda r: r.update(learner="autograd-eve"),
        lambda r: r.update(graded_at=LATE),
    ],
    ids=["commit_time", "commit", "modified", "learner", "graded_at"],
)
def test_the_signature_covers_what_was_graded_and_when(edit):
    report = _signed_report()
    assert signing.rejected(report, KEY.encode()) == ""
    edited = json.loads(json.dumps(report))
    edit(edited)
    assert signing.rejected(edited, KEY.encode()) == "its signature does not check"


def test_a_git_record_of_the_wrong_shape_is_not_a_report():
    report = _signed_report()
    report["notebooks"][0]["git"]["commit_time"] = 1764540000
    assert signing.problems(report) == ["notebooks[0].git.commit_time: not a string or null"]
    report["notebooks"][0]["git"] = None  # outside git: allowed
    assert signing.problems(report) == []


def test_lateness_compares_the_last_commit_with_the_deadline():
    deadline = provenance.parse_utc(DEADLINE)
    report = json.loads(json.dumps(_signed_report()))
    git = report["notebooks"][0]["git"]
    assert collect.lateness(report, deadline) == "no"
    git["commit_time"] = "2026-12-01T00:00:01Z"
    assert collect.lateness(report, deadline) == "yes"
    assert (
        collect.lateness(report, provenance.parse_utc("2026-12-01T01:00:00+01:00")) == "yes"
    )  # same instant
    git["modified"] = True  # graded bytes no commit holds: no commit time proves anything
    assert collect.lateness(report, deadline) == "unknown"
    report["notebooks"][0]["git"] = None
    assert collect.lateness(report, deadline) == "unknown"


def test_lateness_takes_heads_commit_and_distrusts_a_commit_time_graded_after_the_deadline():
    deadline = provenance.parse_utc(DEADLINE)
    report = json.loads(json.dumps(_signed_report()))
    assert collect.lateness(report, deadline) == "no"  # committed and graded before the deadline
    report["notebooks"][0]["git"]["head_time"] = LATE  # a helper committed after it
    assert collect.lateness(report, deadline) == "yes"
    report["notebooks"][0]["git"]["head_time"] = ON_TIME
    report["graded_at"] = LATE  # backdated? only the grader's clock proves the work existed
    assert collect.lateness(report, deadline) == "unknown"


def test_collect_refuses_a_deadline_without_a_time_zone_and_runs_without_a_key_refused(
    tmp_path, capsys, monkeypatch
):
    with pytest.raises(SystemExit) as stop:
        collect.main([str(tmp_path), "--deadline", "2026-12-01 00:00"])
    assert stop.value.code == 2 and "has no time zone" in capsys.readouterr().err
    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    assert collect.main([str(tmp_path)]) == 2 and "no instructor key" in capsys.readouterr().err


def test_the_classroom_result_reports_errors_and_tampering_as_errors():
    summary = {
        "all_passed": False,
        "max_score": 2,
        "tampering": ["checks/lesson00/ex0_2_predicted_a_grad.py"],
        "notebooks": [
            {
                "path": "00_warmup.ipynb",
                "error": "void: the course package changed",
                "exercises": [
                    {
                        "id": "0.1",
                        "name": "cube_sum_grad",
                        "status": "error",
                        "points": 2,
                        "score": 0,
                        "message": "m",
                    }
                ],
            }
        ],
    }
    result = github_classroom.runner_result(summary)
    assert result["status"] == "error" and [t["status"] for t in result["tests"]] == ["error"] * 3
    empty = github_classroom.placeholder()
    assert empty["max_score"] == 0 and empty["status"] == "error"  # the reporter posts no points for it


def test_grade_refuses_two_reports_on_stdout(tmp_path, capsys):
    from course.grading import grade

    nb = tmp_path / "00_warmup.ipynb"
    nb.write_text((ROOT / "notebooks/00_warmup.ipynb").read_text())
    assert grade.main([str(nb), "--json", "-", "--classroom", "-"]) == 2
    assert "both want stdout" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["classroom-autograding.yml", "ci-grading-example.yml"])
def test_the_workflows_pin_the_course_version_and_use_real_grade_options(name):
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / "docs" / name).read_text())
    (job,) = workflow["jobs"].values()
    assert job["env"]["COURSE_VERSION"] == course.__version__
    runs = [s.get("run", "") for s in job["steps"]]
    (install,) = [r for r in runs if "autograd_course" in r]
    assert "autograd_course-${COURSE_VERSION}-py3-none-any.whl" in install and "git+" not in install
    assert 'course --version | grep -F "course ${COURSE_VERSION} "' in install  # a wrong wheel fails here
    (grade,) = [r for r in runs if "course grade" in r]
    options = set(re.findall(r"(--[a-z-]+|-j)\b", grade))
    helptext = _course("grade", "--help").stdout
    assert "--learner" in options and all(opt in helptext for opt in options), options
    (checkout,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout")]
    assert checkout["with"]["fetch-depth"] == 0  # the last commit of each notebook needs the history


def test_the_instructors_workflow_grades_in_the_sandbox_and_uploads_only_the_reports():
    yaml = pytest.importorskip("yaml")
    (job,) = yaml.safe_load((ROOT / "docs" / "ci-grading-example.yml").read_text())["jobs"].values()
    (grade,) = [s["run"] for s in job["steps"] if "course grade" in s.get("run", "")]
    # the grader writes the reports outside the sandbox: no bwrap of ours binds a folder read-write
    assert "--sandbox" in grade and "bwrap" not in grade and "--bind" not in grade
    (upload,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["with"]["path"].split() == ["/reports/report.json", "/reports/junit.xml"]


def test_the_classroom_workflow_feeds_the_reporter_what_the_grader_writes():
    job = _workflow()["jobs"]["run-autograding-tests"]
    (reporter,) = [s for s in job["steps"] if "autograding-grading-reporter" in s.get("uses", "")]
    assert reporter["with"]["runners"] == github_classroom.RUNNER_ID
    assert reporter["env"] == {
        f"{github_classroom.RUNNER_ID.upper()}_RESULTS": "${{ steps.course.outputs.result }}"
    }
    _, step = _grading_step()
    assert "--classroom reports/classroom.b64" in step["run"]
    assert 'echo "result=$(cat reports/classroom.b64)" >> "$GITHUB_OUTPUT"' in step["run"]


def test_collect_takes_the_report_graded_last_and_files_ignored_ones_under_their_learner(tmp_path):
    older, newer = _signed_report(), json.loads(json.dumps(_signed_report()))
    newer["graded_at"], newer["score"] = LATE, 0
    newer["notebooks"][0]["exercises"][0].update(status="failed", score=0)
    newer = signing.sign(newer, KEY.encode())
    folder = tmp_path / "report-autograd-ada"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(older))
    (folder / "b.json").write_text(json.dumps(newer))
    (folder / "c.json").write_text(json.dumps({**older, "signature": None}))  # unsigned
    (folder / "notes.json").write_text("[]")  # not a report: skipped, no note
    (row,) = collect.collect([tmp_path], KEY.encode(), provenance.parse_utc(DEADLINE))
    assert (row.learner, row.report["score"], row.source, row.late) == (
        "autograd-ada",
        0,
        str(folder / "b.json"),
        "unknown",  # graded after the deadline (issue 44: "no" before, whatever a commit claimed)
    )
    assert "c.json ignored: its signature does not check" in row.flags
    assert "2 reports: the one graded last is taken" in row.flags


def test_a_score_that_rose_after_the_deadline_run_is_flagged_and_the_missing_are_named(tmp_path, capsys):
    """Two signed reports of one learner: the deadline run's (1 point of 2) and a later run's
    (2 of 2). The row takes the later one and says the score rose after the deadline; a
    learner on the roster with no report gets a row of their own."""
    at_deadline = _signed_report()
    at_deadline["graded_at"], at_deadline["score"], at_deadline["max_score"] = ON_TIME, 1, 2
    first = {"id": "0.1", "name": "cube_sum_grad", "status": "failed", "points": 1, "score": 0}
    at_deadline["notebooks"][0]["exercises"].insert(0, first)
    later = json.loads(json.dumps(at_deadline))
    later["graded_at"], later["score"] = LATER, 2
    later["notebooks"][0]["exercises"][0].update(status="passed", score=1)
    for name, report in (("deadline", at_deadline), ("later", later)):
        (tmp_path / name / "report-autograd-ada").mkdir(parents=True)
        (tmp_path / name / "report-autograd-ada" / "report.json").write_text(
            json.dumps(signing.sign({k: v for k, v in report.items() if k != "signature"}, KEY.encode()))
        )
    roster = tmp_path / "roster.txt"
    roster.write_text("identifier,github_username\nada,ada-gh\neve,eve-gh\n")  # Classroom's export
    key = tmp_path / "key"
    key.write_text(KEY)
    args = [str(tmp_path / "deadline"), str(tmp_path / "later"), "--deadline", DEADLINE]
    assert collect.main([*args, "--expect", str(roster), "--key-file", str(key)]) == 0
    out, err = capsys.readouterr()
    ada, eve = out.splitlines()[1:]
    assert ada.split()[:2] == ["autograd-ada", "2/2"]
    assert f"score rose after the deadline: 1 (graded {ON_TIME}) -> 2" in ada and LATER in ada
    assert "graded" in out.splitlines()[0]  # graded_at is a column of the printed table
    assert eve.split()[:2] == ["eve", "-"] and "missing: no report" in eve
    assert "no report from 1 learner(s): eve" in err
    # graded once, by the deadline: nothing rose
    (row,) = collect.collect([tmp_path / "deadline"], KEY.encode(), provenance.parse_utc(DEADLINE))
    assert not [f for f in row.flags if "rose" in f]


def test_extensions_late_penalties_weights_and_the_lms_export(tmp_path, capsys):
    """The instructor's policy without a fork of the course: bob's commit a day late costs him
    25%; ada's extension makes the same lateness on time; 0.1 weighs twice its points."""
    reports = tmp_path / "reports"
    for learner in ("autograd-ada", "autograd-bob"):
        report = _signed_report()
        report.pop("signature")
        report["learner"] = learner
        report["notebooks"][0]["git"]["commit_time"] = LATE  # 12 hours after the deadline
        report["notebooks"][0]["exercises"].insert(
            0, {"id": "0.1", "name": "cube_sum_grad", "status": "passed", "points": 1, "score": 1}
        )
        report["score"] = report["max_score"] = 2
        (reports / learner).mkdir(parents=True)
        (reports / learner / "report.json").write_text(json.dumps(signing.sign(report, KEY.encode())))
    (tmp_path / "ext.csv").write_text("learner,deadline\nada,2026-12-03T00:00:00Z\n")
    (tmp_path / "w.csv").write_text("exercise,weight\n0.1,2\n")
    (tmp_path / "key").write_text(KEY)
    args = [str(reports), "--deadline", DEADLINE, "--key-file", str(tmp_path / "key")]
    policy = [
        "--extensions",
        str(tmp_path / "ext.csv"),
        "--weights",
        str(tmp_path / "w.csv"),
        "--late-penalty",
        "0.25",
    ]
    assert collect.main([*args, *policy, "--lms-csv", str(tmp_path / "lms.csv")]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["autograd-ada"].split()[2] == "no" and "final 3/3" in rows["autograd-ada"]
    assert (
        rows["autograd-bob"].split()[2] == "yes"
        and "final 2.25/3, 1 day(s) late: -25%" in rows["autograd-bob"]
    )
    assert (tmp_path / "lms.csv").read_text().splitlines() == [
        "learner,points,max",
        "autograd-ada,3,3",
        "autograd-bob,2.25,3",
    ]
    (tmp_path / "w.csv").write_text("exercise,weight\n9.9,1\n")
    assert collect.main([*args, "--weights", str(tmp_path / "w.csv")]) == 0
    assert "no final score: weights for exercises the report does not have: 9.9" in capsys.readouterr().out
    (tmp_path / "w.csv").write_text("0.1,-1\n")
    assert collect.main([*args, "--weights", str(tmp_path / "w.csv")]) == 2
    assert "w.csv:1: expected exercise,weight" in capsys.readouterr().err
