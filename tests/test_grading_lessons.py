"""Does `course grade` score every lesson's solution 100% and every learner copy 0, as folders?

Split from tests/test_grading.py because these share one module-scoped fixture (every lesson
graded twice, as two folders): the suite's scheduler keeps such a module on one worker, and
the rest of the grader's tests can then spread over the others.
"""

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from test_grading import ROOT, SOLUTIONS, _grade_cli, _stat  # pytest puts tests/ on sys.path

from course import checks

pytestmark = [pytest.mark.notebook]


def _lessons_asked_for(request) -> list[Path]:
    """The solutions whose tests this run selected (``-k 03`` grades lesson 3 alone); every
    lesson when the folder-wide tests run, or when no per-lesson test is selected."""
    here = [item for item in request.session.items if getattr(item, "module", None) is request.module]
    asked = {
        item.callspec.params["solution"]
        for item in here
        if hasattr(item, "callspec") and "solution" in item.callspec.params
    }
    folder_wide = any(hasattr(item, "callspec") and "kind" in item.callspec.params for item in here)
    return SOLUTIONS if folder_wide or not asked else sorted(asked)


@pytest.fixture(scope="module")
def lessons(request, tmp_path_factory):
    """The lessons asked for (every lesson in the full suite): their solutions (one folder) and
    learner copies (another), each scored as a folder with -j 2 (a folder holds one notebook per
    lesson: two copies of one are refused).

    --no-run: the score never depends on the headless run, and nbval already runs every
    solution (strict) and learner copy (lax) in the same pytest session; the full run is
    exercised on the sample lesson and the fixtures below."""
    result = {"by_name": {}, "runs": {}}
    for kind, source in (("solution", ROOT / "solutions"), ("learner", ROOT / "notebooks")):
        folder = tmp_path_factory.mktemp(kind)
        for sol in _lessons_asked_for(request):
            if (source / sol.name).exists():  # a missing learner copy fails its own test below
                shutil.copy2(source / sol.name, folder / sol.name)
        before = {p.name: _stat(p) for p in folder.glob("*.ipynb")}
        report = tmp_path_factory.mktemp("out")
        proc, summary = _grade_cli(
            str(folder),
            "-j",
            "2",
            "--no-run",
            "--json",
            str(report / "grade.json"),
            "--junit",
            str(report / "junit.xml"),
        )
        result["runs"][kind] = dict(
            folder=folder, before=before, proc=proc, summary=summary, junit=report / "junit.xml"
        )
        for nb in summary["notebooks"]:
            result["by_name"][Path(nb["path"]).name.replace(".ipynb", f"_{kind}.ipynb")] = nb
    return result


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_solution_scores_full_marks(lessons, solution):
    nb = lessons["by_name"][solution.name.replace(".ipynb", "_solution.ipynb")]
    assert nb["all_passed"] and nb["score"] == nb["max_score"] > 0, json.dumps(nb["exercises"], indent=1)
    assert {e["id"] for e in nb["exercises"]} == {e.id for e in checks.all_exercises(nb["lesson"])}


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_learner_copy_runs_and_scores_zero_not_attempted(lessons, solution):
    assert (ROOT / "notebooks" / solution.name).exists(), "no learner copy: run `course assign`"
    nb = lessons["by_name"][solution.name.replace(".ipynb", "_learner.ipynb")]
    assert nb["score"] == 0 and nb["max_score"] > 0
    assert {e["status"] for e in nb["exercises"]} == {"not attempted"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["solution", "learner"])
def test_grading_a_folder_prints_a_table_writes_json_and_junit_and_never_writes_notebooks(lessons, kind):
    run = lessons["runs"][kind]
    proc, summary = run["proc"], run["summary"]
    assert proc.returncode == (0 if kind == "solution" else 1)  # the learner copies do not pass
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["notebook", "score", "passed"]
    assert any(line.startswith("total") for line in lines)
    assert lines[-1].startswith("score ") and "graded in" in lines[-1]  # the command's wall time
    assert summary["format"] == "course-grade/1" and summary["tampering"] == [] and summary["killed"] == []
    suites = ET.parse(run["junit"]).getroot().findall("testsuite")
    assert len(suites) == len(summary["notebooks"]) == len(run["before"])
    statuses = [e["status"] for nb in summary["notebooks"] for e in nb["exercises"]]
    assert sum(int(s.get("failures")) for s in suites) == sum(
        s in ("failed", "not attempted") for s in statuses
    )
    assert sum(len(s.findall("testcase")) for s in suites) == len(statuses)
    after = {p.name: _stat(p) for p in run["folder"].glob("*.ipynb")}
    assert after == run["before"]
    assert sorted(p.name for p in run["folder"].iterdir()) == sorted(run["before"])  # nothing added
