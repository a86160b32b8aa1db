"""Does `course grade` score what the learner's definitions do, and nothing else?

- the sample lesson's solution scores 100% and its learner copy runs top to bottom (stubs
  raise only in raises-exception cells) and scores 0, "not attempted" (every lesson, graded
  as folders: tests/test_grading_lessons.py);
- a notebook that monkeypatches the checker and prints "passed" scores as if it had not;
- deleted, duplicated, reordered and retyped cells, exceptions, an infinite loop, a huge
  output and warnings on stderr do not stop a right answer from scoring;
- infinite loops (in a cell, in an answer, everywhere) end at the timeouts and say so;
- the learner's notebook is never written (bytes and mtime unchanged);
- learner code runs in bubblewrap by default wherever it runs; elsewhere the grade says, in
  one line, that it ran without isolation and how to get it; ``--sandbox`` requires it.
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from course import checks
from course.grading.grade import exit_code
from course.grading.judging import check_and_judge
from course.grading.kernel import run_notebook
from course.grading.notebook import lesson_of
from course.grading.session import open_session
from course.grading.worker import definitions

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grading"
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))

pytestmark = [pytest.mark.notebook]


def _check_one(ex, cells: list, cwd: Path, cell_timeout: float, limit: float) -> dict:
    """Check and judge one exercise alone, in a grading session of its own."""
    with open_session({ex.lesson}) as session:
        return check_and_judge(session, [ex], cells, cwd, cell_timeout, limit)[0]


def _stat(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


_SNAPSHOT: list[Path] = []


def _snapshot() -> Path:
    """A private copy of the course package, made once: the grader voids a grade when the
    package changes while it grades (tampering), and a checkout may be edited meanwhile."""
    if not _SNAPSHOT:
        where = Path(tempfile.mkdtemp(prefix="course-snapshot-"))
        atexit.register(shutil.rmtree, where, True)
        shutil.copytree(ROOT / "course", where / "course", ignore=shutil.ignore_patterns("__pycache__"))
        _SNAPSHOT.append(where)
    return _SNAPSHOT[0]


def _grade_cli(*args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``python -m course grade ARGS --no-sandbox`` on the snapshot of the package; (process,
    --json report). Without a sandbox: the snapshot is the grader's (PYTHONPATH), while the
    notebook's kernel imports the installed ``course``, which a sandbox binding the grader's
    package does not show (the default, in bubblewrap: the tests at the end of this file)."""
    out = Path(args[args.index("--json") + 1])
    env = {**os.environ, "PYTHONPATH": str(_snapshot())}
    proc = subprocess.run(
        [sys.executable, "-m", "course", "grade", *args, "--no-sandbox"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=out.parent,
    )
    return proc, json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_the_sample_lesson_runs_headless_and_scores_all_or_nothing(folder, tmp_path):
    path = ROOT / folder / "00_warmup.ipynb"
    before = _stat(path)
    proc, summary = _grade_cli(str(path), "--cell-timeout", "120", "--json", str(tmp_path / "g.json"))
    assert _stat(path) == before
    (report,) = summary["notebooks"]
    assert report["run"]["timeouts"] == [] and report["run"]["skipped"] == 0
    assert report["error"] == "" and summary["killed"] == [] and summary["tampering"] == []
    statuses = {e["status"] for e in report["exercises"]}
    if folder == "solutions":
        assert statuses == {"passed"} and report["score"] == report["max_score"] == 3
        assert report["run"]["errors"] == [] and proc.returncode == 0
    else:
        assert statuses == {"not attempted"} and report["score"] == 0
        learner = nbformat.read(path, as_version=4)
        for error in report["run"]["errors"]:  # only stubs raise, in cells tagged for it
            assert "NotImplementedError: exercise" in error["error"]
            assert "raises-exception" in learner.cells[error["cell"]].metadata.get("tags", [])


@pytest.mark.slow
def test_a_notebook_that_monkeypatches_the_checker_scores_as_if_it_had_not(tmp_path):
    path = DATA / "00_cheat.ipynb"
    before = _stat(path)
    proc, summary = _grade_cli(str(path), "--json", str(tmp_path / "g.json"), "--cell-timeout", "30")
    assert _stat(path) == before
    assert proc.returncode == 1
    (nb,) = summary["notebooks"]
    assert nb["score"] == 0
    by_id = {e["id"]: e for e in nb["exercises"]}
    ex1, ex2 = checks.get("0.1"), checks.get("0.2")
    # Judged exactly like the same wrong answers without any patching:
    assert by_id["0.1"]["status"] == "failed" and by_id["0.1"]["hint"] == ex1.wrong[0].hint
    assert by_id["0.2"]["status"] == "failed" and by_id["0.2"]["hint"] == ex2.wrong[0].hint
    assert by_id["0.1"]["message"] == checks.grade_answer(ex1, ex1.wrong[0].answer).message


@pytest.mark.slow
def test_a_prediction_whose_answer_was_asked_for_is_reported_as_revealed_not_earned(tmp_path):
    nb = nbformat.read(ROOT / "solutions" / "00_warmup.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell('check("0.2", reveal=True)'))
    path = tmp_path / "00_warmup.ipynb"
    nbformat.write(nb, path)
    proc, summary = _grade_cli(str(path), "--no-run", "--json", str(tmp_path / "g.json"))
    (report,) = summary["notebooks"]
    by_id = {e["id"]: e for e in report["exercises"]}
    assert by_id["0.2"]["status"] == "revealed" and by_id["0.2"]["revealed"] is True
    assert by_id["0.2"]["score"] == 0  # the right prediction, shown on request: no points
    assert by_id["0.1"]["status"] == "passed" and by_id["0.1"]["revealed"] is False
    assert report["score"] == report["max_score"] - by_id["0.2"]["points"]
    assert proc.returncode == 1


@pytest.mark.slow
def test_right_answers_score_despite_a_messy_notebook(tmp_path):
    path = DATA / "00_messy.ipynb"
    before = _stat(path)
    _, summary = _grade_cli(
        str(path),
        "--timeout",
        "300",
        "--cell-timeout",
        "15",  # generous: CI machines are slow
        "--json",
        str(tmp_path / "g.json"),
    )
    assert _stat(path) == before
    (report,) = summary["notebooks"]
    assert report["all_passed"] and report["score"] == report["max_score"] == 3
    run = report["run"]
    assert [t["cell"] for t in run["timeouts"]] == [4]  # the top-level `while True`
    assert "timed out after 15 s" in run["timeouts"][0]["error"]
    assert {e["cell"] for e in run["errors"]} == {5, 8}  # the ValueError, the retyped markdown
    assert len(json.dumps(report)) < 20_000  # the huge output was not kept


def test_an_answer_that_never_returns_is_reported_as_timed_out(tmp_path):
    cells = [[0, "import torch\ndef cube_sum_grad(x):\n    while True:\n        pass"]]
    result = _check_one(checks.get("0.1"), cells, tmp_path, cell_timeout=2, limit=120)
    assert result["status"] == "error" and result["timed_out"]
    assert "did not finish within 2 s" in result["message"]


def test_a_definition_that_never_finishes_is_skipped_and_noted(tmp_path):
    cells = [
        [0, "import time\nforever = [time.sleep(1) for _ in iter(int, 1)]"],
        [1, "predicted_a_grad = 8.0"],
    ]
    result = _check_one(checks.get("0.2"), cells, tmp_path, cell_timeout=2, limit=120)
    assert result["status"] == "passed"


_CUBE_SUM_GRAD = (
    "def cube_sum_grad(x):\n    x = x.detach().requires_grad_()\n"
    "    (x**3).sum().backward()\n    return x.grad"
)
# A definition that runs a backward with lesson 04's simulated GPU loaded (a fake CUDA tensor):
# on a CUDA build of torch this starts autograd's device threads in the process that runs it.
_BACKWARD_AT_TOP_LEVEL = (
    "import torch\nimport course.checks.lesson04\n"
    "warm = (torch.ones(2, requires_grad=True) * 2).sum().backward()"
)


def _fork_then_backward(setup: str) -> str:
    """Run ``setup`` in a fresh interpreter, fork, run a backward in the child as an exercise's
    process does (torch's thread count set first: worker.py's NOTE, point 4): what it says.
    "refused" is torch's RuntimeError; any other end of the child is reported as it is."""
    program = (
        f"import os, torch\n{setup}\npid = os.fork()\nif pid == 0:\n    try:\n"
        "        torch.set_num_threads(1)\n"
        "        (torch.ones(2, requires_grad=True) * 2).sum().backward()\n        os._exit(0)\n"
        "    except RuntimeError:\n        os._exit(3)\n"
        "code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
        "print({0: 'ok', 3: 'refused'}.get(code, f'ended with {code}'))"
    )
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=ROOT
    ).stdout.strip()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_torch_refuses_a_backward_in_a_fork_of_a_process_that_ran_one_on_a_cuda_build():
    """The fact NOTE [No autograd before a fork] (course/grading/worker.py) designs around,
    asked of torch itself: on a CUDA build the fork refuses, on a CPU build it does not."""
    import torch

    setup = "import course.checks.lesson04\n(torch.ones(2, requires_grad=True) * 2).sum().backward()"
    assert _fork_then_backward(setup) == ("refused" if torch.version.cuda else "ok")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_the_checking_server_runs_no_backward_before_it_forks():
    setup = (
        "from course.grading.worker import _prepare\nfrom course.lessons import LESSONS\n"
        "_prepare([lesson.number for lesson in LESSONS])"
    )
    assert _fork_then_backward(setup) == "ok"


def test_the_checking_server_imports_the_drawing_libraries_before_it_forks():
    """Every exercise's process runs the notebook's drawings again; it finds matplotlib and
    ipywidgets imported already (worker._import_drawing_libraries)."""
    program = (
        "import sys\nfrom course.grading.worker import DRAWING_LIBRARIES, _prepare\n_prepare([1])\n"
        "print([name for name in DRAWING_LIBRARIES if name not in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


def test_a_definition_that_runs_a_backward_leaves_every_exercise_checkable(tmp_path):
    """Learner code runs only in a process that forks no further (worker.py's NOTE), so a
    top-level backward cannot stop the next exercise's backward (torch 2.14's CUDA wheel)."""
    cells = [[0, _BACKWARD_AT_TOP_LEVEL], [1, _CUBE_SUM_GRAD], [2, "predicted_a_grad = 8.0"]]
    for exercise in ("0.1", "0.2"):
        result = _check_one(checks.get(exercise), cells, tmp_path, cell_timeout=60, limit=300)
        assert result["status"] == "passed", result["message"]


def test_the_total_timeout_stops_a_notebook_of_endless_cells(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("while True:\n    pass") for _ in range(3)]
    )
    run = run_notebook(nb, tmp_path, cell_timeout=2, total_timeout=3)
    assert run.total_timed_out
    assert [c.status for c in run.cells][0] == "timeout" and run.cells[-1].status == "skipped"
    psutil = pytest.importorskip("psutil")
    assert _live_kernels(psutil) == []  # the busy kernel was shut down, not left running


def _live_kernels(psutil) -> list:
    """This process's kernel children that still run. A zombie has ended (only its exit status
    waits to be collected), and a child may end while we look at it: neither is running."""
    live = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "ipykernel_launcher" in " ".join(p.cmdline()):
                live.append(p)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return live


def test_the_worker_runs_only_definitions():
    kept = [
        m.body[0]
        for m in definitions(
            "import torch\nfrom course import checks\nchecks.check = print\nsetattr(checks, 'x', 1)\n"
            "print('passed')\nx: int = 3\na, [b, c] = 1, [2, 3]\nd[0] = 1\nfor i in range(3): pass\n"
            "@staticmethod\ndef f(): pass\nclass K: pass\n!ls\n%time y = 2"
        )
    ]
    assert [type(s).__name__ for s in kept] == [
        "Import",
        "ImportFrom",
        "AnnAssign",
        "Assign",
        "FunctionDef",
        "ClassDef",
    ]


def test_the_lesson_comes_from_the_file_name_or_the_stubs():
    assert lesson_of(Path("03_saved_tensors.ipynb"), []) == 3
    assert lesson_of(Path("mine.ipynb"), ['raise NotImplementedError("exercise 4.2")', 'check("4.1")']) == 4
    assert lesson_of(Path("mine.ipynb"), ['check("4.1")', 'check("5.1")']) is None


@pytest.mark.slow
def test_an_unreadable_notebook_is_an_error_not_a_crash(tmp_path, capsys):
    from course.grading.grade import main

    bad = tmp_path / "00_broken.ipynb"
    bad.write_text("{ not json")
    proc, summary = _grade_cli(str(bad), "--json", str(tmp_path / "g.json"), "-q")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (nb,) = summary["notebooks"]
    assert nb["error"].startswith("cannot read the notebook")
    assert nb["max_score"] == 3 and {e["status"] for e in nb["exercises"]} == {"error"}  # counts 0 of 3
    assert main([str(tmp_path / "missing.ipynb")]) == 2


def test_min_score_relaxes_the_exit_status():
    summary = {"all_passed": False, "fraction": 0.5}
    assert exit_code(summary) == 1
    assert exit_code(summary, 0.5) == 0 and exit_code(summary, 0.6) == 1
    assert exit_code({"all_passed": True, "fraction": 1.0}) == 0


def _lesson0_notebook(tmp_path: Path, answer_0_1: str, answer_0_2: str = "predicted_a_grad = 8.0") -> Path:
    """A lesson-0 notebook laid out as a learner's: markdown, imports, then the two answers."""
    cells = [
        nbformat.v4.new_markdown_cell("# Warm-up"),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_markdown_cell("## Exercise 0.1"),
        nbformat.v4.new_code_cell(answer_0_1),
        nbformat.v4.new_code_cell('check("0.1")'),
        nbformat.v4.new_code_cell(answer_0_2),
    ]
    path = tmp_path / "00_mine.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def _by_id(report) -> dict:
    return {e["id"]: e for e in report.exercises}


@pytest.mark.parametrize(
    "answer, what",
    [
        ("def cube_sum_grad(x):\n    x = x.detach().requires_grad_(\n    return x.grad", "SyntaxError"),
        ("import math\ncube_sum_grad = math.sqrt(-1)", "ValueError: math domain error"),
    ],
)
def test_an_answer_cell_that_fails_is_reported_at_its_exercise_as_what_it_is(tmp_path, answer, what):
    """Issue 35, item 4: at that exercise, as what it is, with the cell number JupyterLab
    shows (the 4th cell: markdown counts), never as "not attempted"; not under the others."""
    from course.grading.grade import grade_notebook

    report = grade_notebook(_lesson0_notebook(tmp_path, answer), run=False)
    mine, other = _by_id(report)["0.1"], _by_id(report)["0.2"]
    assert mine["status"] == "error" and what in mine["message"] and "cell 4, line " in mine["message"]
    assert "not attempted" not in mine["message"] and "NotImplementedError" not in mine["message"]
    assert other["status"] == "passed" and "cell 4" not in other["message"]


def test_a_syntax_error_names_its_line_in_the_cell(tmp_path):
    from course.grading.grade import grade_notebook

    report = grade_notebook(
        _lesson0_notebook(tmp_path, _CUBE_SUM_GRAD, "x = 1\npredicted_a_grad = (8.0"), run=False
    )
    wrong = _by_id(report)["0.2"]
    assert wrong["status"] == "error" and "cell 6, line 2: SyntaxError" in wrong["message"], wrong["message"]
    assert _by_id(report)["0.1"]["status"] == "passed"


def test_a_problem_in_an_unrelated_cell_is_not_repeated_under_a_wrong_answer(tmp_path):
    from course.grading.grade import grade_notebook

    wrong = "def cube_sum_grad(x):\n    return x * 0"
    report = grade_notebook(
        _lesson0_notebook(tmp_path, wrong, "oops = undefined_name\npredicted_a_grad = 8.0"), run=False
    )
    assert _by_id(report)["0.1"]["status"] == "failed"
    assert "undefined_name" not in _by_id(report)["0.1"]["message"]


@pytest.mark.parametrize(
    "name, lesson",
    [
        ("03_saved_tensors.ipynb", 3),
        ("03_saved_tensors.updated.ipynb", None),
        ("03_saved_tensors.updated-2.ipynb", None),
        ("03_x.updated_notes.ipynb", 3),
        (".03_x.ipynb", None),
    ],
)
def test_grade_and_gradebook_agree_on_which_notebook_is_which_lesson(tmp_path, name, lesson):
    """One fact, one home (course.grading.names): ``course grade``'s folder plan and
    ``course gradebook``'s notebook list take and skip the same files (issue 28, section 3)."""
    from course.classroom import gradebook
    from course.grading.plan import plan_folder

    (tmp_path / name).write_text(
        json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    plan, _, _ = plan_folder(tmp_path, None)
    assert [n for _, _, n in plan] == ([lesson] if lesson is not None else [])
    assert list(gradebook.learner_notebooks(tmp_path, None, [])) == ([name] if lesson is not None else [])


def _without_proc(*command: str) -> subprocess.CompletedProcess:
    """``command`` under bubblewrap with an empty /proc (a platform without it, as macOS has none)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap (bwrap) is not installed: cannot hide /proc")
    wrap = [bwrap, "--bind", "/", "/", "--dev", "/dev", "--tmpfs", "/proc"]
    probe = subprocess.run(
        [*wrap, sys.executable, "-c", "import os; print(os.listdir('/proc'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip(f"bubblewrap cannot make a sandbox here: {probe.stderr.strip()[:200]}")
    assert probe.stdout.strip() == "[]"  # /proc is hidden indeed
    env = {**os.environ, "PYTHONPATH": str(_snapshot())}
    return subprocess.run([*wrap, *command], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


@pytest.mark.slow
def test_course_grade_and_course_progress_work_without_proc(tmp_path):
    """Issue 28, section 5: grading works wherever the lessons run (psutil, no /proc reads)."""
    out = tmp_path / "g.json"
    proc = _without_proc(
        sys.executable,
        "-m",
        "course",
        "grade",
        str(ROOT / "solutions" / "00_warmup.ipynb"),
        "--no-run",
        "-q",
        "--no-sandbox",  # the supervision's path: psutil, where there is no /proc to read
        "--json",
        str(out),
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(out.read_text())["all_passed"]
    folder = tmp_path / "mine"
    proc = _without_proc(sys.executable, "-m", "course", "start", str(folder))
    assert proc.returncode == 0, proc.stderr
    proc = _without_proc(sys.executable, "-m", "course", "progress", str(folder))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "0 of " in proc.stdout and "not attempted" in proc.stdout


# --- where learner code runs: bubblewrap by default, the fallback said in one line ---------------

# A definition that writes beside the notebook: the host's folder, which the sandbox never binds.
_ESCAPE = "from pathlib import Path\n_mark = Path({where!r}).write_text('reached')\n"


def _marking_00(tmp_path: Path) -> tuple[Path, Path]:
    """(the solved 00 with a definition that marks ``tmp_path/mark``, that mark's path)."""
    mark = tmp_path / "mark"
    nb = nbformat.read(ROOT / "solutions" / "00_warmup.ipynb", as_version=4)
    nb.cells.insert(1, nbformat.v4.new_code_cell(_ESCAPE.format(where=str(mark))))
    path = tmp_path / "00_warmup.ipynb"
    nbformat.write(nb, path)
    return path, mark


def _grade_with_path(path: Path, *args: str, bin_path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COURSE_GRADE_KEY": ""} | ({"PATH": bin_path} if bin_path is not None else {})
    command = [sys.executable, "-I", "-m", "course", "grade", str(path), "--no-run", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=path.parent)


def _path_without_bwrap(tmp_path: Path, broken: bool = False) -> str:
    """A PATH with git alone (the report records commits): bubblewrap is not installed there;
    ``broken``: a ``bwrap`` that fails as it does where namespaces cannot be made (a container)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    if shutil.which("git"):
        (folder / "git").symlink_to(shutil.which("git"))
    if broken:
        (folder / "bwrap").write_text(
            "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
        )
        (folder / "bwrap").chmod(0o755)
    return str(folder)


_WHY_NOT = {False: "bubblewrap is not installed", True: "bubblewrap cannot make namespaces here"}


@pytest.mark.slow
def test_plain_course_grade_runs_learner_code_in_bubblewrap_where_it_runs(tmp_path):
    from course.grading.sandbox import why_no_sandbox

    if why_no_sandbox():
        pytest.skip(f"bubblewrap cannot run here: {why_no_sandbox()}")
    path, mark = _marking_00(tmp_path)
    proc = _grade_with_path(path, "--json", str(tmp_path / "g.json"), "-q")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    summary = json.loads((tmp_path / "g.json").read_text())
    assert summary["isolation"] == "bubblewrap" and summary["score"] == 3
    assert not mark.exists()  # the notebook's folder is not in the sandbox
    proc = _grade_with_path(path, "--json", str(tmp_path / "g.json"), "-q", "--no-sandbox")
    assert proc.returncode == 0 and mark.read_text() == "reached"  # opted out: it runs as we do
    assert json.loads((tmp_path / "g.json").read_text())["isolation"] == "none (supervision)"


@pytest.mark.slow
@pytest.mark.parametrize("broken", [False, True], ids=["absent", "no-namespaces"])
def test_without_bubblewrap_course_grade_says_so_in_one_line_and_grades(tmp_path, broken):
    path, _ = _marking_00(tmp_path)
    proc = _grade_with_path(
        path, "--json", str(tmp_path / "g.json"), "-q", bin_path=_path_without_bwrap(tmp_path, broken)
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "WITHOUT isolation" in line and _WHY_NOT[broken] in line
    assert ("--privileged" if broken else "apt-get install bubblewrap") in line  # how to get it
    summary = json.loads((tmp_path / "g.json").read_text())
    assert summary["isolation"] == "none (supervision)" and summary["score"] == 3


@pytest.mark.parametrize("broken", [False, True], ids=["absent", "no-namespaces"])
def test_grade_sandbox_requires_bubblewrap_and_runs_nothing_without_it(tmp_path, broken):
    path, mark = _marking_00(tmp_path)
    proc = _grade_with_path(path, "--sandbox", "-q", bin_path=_path_without_bwrap(tmp_path, broken))
    assert proc.returncode == 2 and not mark.exists(), proc.stderr
    assert proc.stderr.splitlines() == [
        f"course grade: --sandbox: {_WHY_NOT[broken]}; learner code was not run (docs/grading.md)"
    ]
    proc = _grade_with_path(path, "--sandbox", "--no-sandbox")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
