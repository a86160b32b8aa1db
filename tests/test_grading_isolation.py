"""Can a learner's checkout, files or code game ``course grade``? (issue 33)

Each attack is run against the real command and the test asserts the grade a fair grader
gives (the independent oracle is the notebook itself: an untouched learner copy is "not
attempted" everywhere, the solution passes everywhere, whatever else lies around it).

- a committed ``course/grading/worker.py`` and a ``copy.py`` in the working folder are never
  imported by the grader's processes;
- a report file planted before grading never survives it, even when the grader dies;
- a FIFO, a link to ``/dev/zero`` and a link to the course's own solution are refused, not
  read or followed, and the lesson counts 0 out of its full points;
- a checking server killed by learner code leaves every exercise in the maximum;
- control characters and huge messages from an answer reach neither the terminal nor the
  JUnit XML raw;
- an outcome file that is compressed, over its cap or a FIFO is refused before decoding;
- a process that keeps forking under new PIDs is ended, every time;
- non-finite or non-positive timeouts are usage errors naming the flag;
- the gradebook's bubblewrap sandbox shows the grader's Python (a venv in ``/tmp``, an
  interpreter in a hidden home) and nothing else of the folders it hides.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

import nbformat
import pytest

from course import checks
from course.grading import checker, sandbox, signing
from course.grading.sandbox import binds

ROOT = Path(__file__).resolve().parents[1]
SOLVED_00 = ROOT / "solutions" / "00_warmup.ipynb"
LEARNER_00 = ROOT / "notebooks" / "00_warmup.ipynb"
LEARNER_01 = ROOT / "notebooks" / "01_autograd_graph.ipynb"

pytestmark = [pytest.mark.notebook]


def _course_grade(*args: str, cwd: Path, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """``course grade`` as a learner's CI runs it: the installed command (``python -I``: the
    grader itself never imports from the working folder; the attack is on what it starts)."""
    cmd = [sys.executable, "-I", "-m", "course", "grade", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env=env, **kw)


def _points(lesson: int) -> float:
    return sum(ex.points for ex in checks.all_exercises(lesson))


def _with_cells(source: Path, cells: list[str]) -> str:
    nb = nbformat.read(source, as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(textwrap.dedent(c)) for c in cells]
    return json.dumps(nb)


@pytest.mark.slow
def test_a_course_package_and_copy_py_in_the_working_folder_are_never_imported(tmp_path):
    marker = tmp_path / "imported"
    fake = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\nimport sys\nsys.exit(0)\n"
    for rel in (
        "course/__init__.py",
        "course/grading/__init__.py",
        "course/grading/worker.py",
        "copy.py",
        "json.py",
        "select.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(fake)
    shutil.copy(LEARNER_00, tmp_path / "00_warmup.ipynb")
    proc = _course_grade("00_warmup.ipynb", "--no-run", "--json", "g.json", "-q", cwd=tmp_path)
    assert not marker.exists(), marker.read_text()
    summary = json.loads((tmp_path / "g.json").read_text())
    assert proc.returncode == 1 and summary["score"] == 0 and summary["max_score"] == _points(0)
    # checked for real by the real server: the stubs are "not attempted", not server errors
    assert {e["status"] for e in summary["notebooks"][0]["exercises"]} == {"not attempted"}


@pytest.mark.slow
def test_links_fifos_and_devices_are_refused_and_count_zero_out_of_full_points(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "00_warmup.ipynb").symlink_to(SOLVED_00)  # the course's own solution
    os.mkfifo(folder / "01_autograd_graph.ipynb")  # would block a reader forever
    (folder / "02_hooks.ipynb").symlink_to("/dev/zero")  # would be read until memory runs out
    proc = _course_grade(
        str(folder), "--lessons", "00,01,02", "--no-run", "--json", "g.json", "-q", cwd=tmp_path
    )
    summary = json.loads((tmp_path / "g.json").read_text())
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert summary["score"] == 0 and summary["max_score"] == _points(0) + _points(1) + _points(2)
    errors = {nb["lesson"]: nb["error"] for nb in summary["notebooks"]}
    assert "symbolic link" in errors[0] and "not a regular file" in errors[1] and "symbolic link" in errors[2]


@pytest.mark.slow
def test_a_planted_report_never_survives_a_grade_that_dies(tmp_path):
    forged = {"format": "course-grade/1", "score": 3, "max_score": 3, "all_passed": True, "notebooks": []}
    (tmp_path / "g.json").write_text(json.dumps(forged))
    (tmp_path / "j.xml").write_text("<testsuites/>")
    hang = "import time\n_hang = time.sleep(900)\n"  # a definition that outlasts our patience
    (tmp_path / "00_warmup.ipynb").write_text(_with_cells(LEARNER_00, [hang]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-m",
            "course",
            "grade",
            "00_warmup.ipynb",
            "--no-run",
            "--json",
            "g.json",
            "--junit",
            "j.xml",
            "-q",
            "--cell-timeout",
            "900",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:  # the placeholder replaces the forged file before any learner code runs; then the grader dies
        while '"finished": false' not in (tmp_path / "g.json").read_text() and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["finished"] is False and report["score"] == 0 and not report["all_passed"]
    assert "did not finish" in report["error"]
    junit = ET.parse(tmp_path / "j.xml").getroot()
    assert junit.find("testsuite").get("errors") == "1" and "did not finish" in ET.tostring(
        junit, encoding="unicode"
    )
    assert signing.problems(report)  # not a report a gradebook would count


@pytest.mark.slow
def test_a_killed_checking_server_keeps_every_exercise_in_the_maximum(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    # The learner kills the checking servers of the `course grade` run grading them (found among
    # their ancestors' descendants), never another run's: the suite grades in parallel, and a
    # killer of every server on the machine took other tests' servers down with it.
    killer = """
    import os, psutil
    _grader = next(p for p in psutil.Process().parents() if "grade" in " ".join(p.cmdline()))
    for _p in _grader.children(recursive=True):
        if "course.grading.worker" in " ".join(_p.cmdline()) and _p.pid != os.getpid():
            _p.kill()
    """  # a top-level call: it runs in the headless run (the kernel), not when checking
    (folder / "00_warmup.ipynb").write_text(_with_cells(SOLVED_00, [killer]))
    shutil.copy(LEARNER_01, folder / "01_autograd_graph.ipynb")
    proc = _course_grade(
        str(folder), "--lessons", "00,01", "--json", "g.json", "-q", "--min-score", "0.8", cwd=tmp_path
    )
    summary = json.loads((tmp_path / "g.json").read_text())
    assert summary["max_score"] == _points(0) + _points(1)  # honest: out of 9, never out of 3
    assert summary["score"] <= _points(0) and proc.returncode == 1
    assert all(nb["exercises"] for nb in summary["notebooks"])


@pytest.mark.slow
def test_control_characters_and_huge_messages_are_neutralised(tmp_path):
    answer = (
        'def cube_sum_grad(x):\n    raise ValueError("\\x1b[32mpassed\\x1b[0m\\x00\\x07" + "y" * 5_000_000)\n'
    )
    (tmp_path / "00_warmup.ipynb").write_text(_with_cells(LEARNER_00, [answer]))
    proc = _course_grade("00_warmup.ipynb", "--no-run", "--json", "g.json", "--junit", "j.xml", cwd=tmp_path)
    assert "\x1b" not in proc.stdout and "\x00" not in proc.stdout
    ET.parse(tmp_path / "j.xml")  # valid XML
    assert (tmp_path / "g.json").stat().st_size < 200_000  # a 5 MB message is capped
    entry = json.loads((tmp_path / "g.json").read_text())["notebooks"][0]["exercises"][0]
    assert entry["status"] == "error" and entry["score"] == 0 and "\x1b" not in entry["message"]


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--timeout", "inf"),
        ("--timeout", "nan"),
        ("--cell-timeout", "0"),
        ("--cell-timeout", "-1"),
        ("--min-score", "nan"),
    ],
)
def test_a_limit_that_would_turn_itself_off_is_a_usage_error(tmp_path, flag, value):
    shutil.copy(LEARNER_00, tmp_path / "00_warmup.ipynb")
    proc = _course_grade("00_warmup.ipynb", flag, value, cwd=tmp_path)
    assert proc.returncode == 2 and flag in proc.stderr and "Traceback" not in proc.stderr


# --- outcome files: checked before they are decoded -------------------------------------------


def _outcome_bytes() -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save({"yours": [{"kind": "value", "value": torch.zeros(4)}]}, buffer)
    return buffer.getvalue()


def test_a_plain_outcome_file_is_read(tmp_path):
    (tmp_path / "0.1.pt").write_bytes(_outcome_bytes())
    assert checker.read_outcomes(tmp_path / "0.1.pt")["yours"][0]["kind"] == "value"


def test_a_compressed_outcome_file_is_refused_before_decoding(tmp_path):
    plain = zipfile.ZipFile(io.BytesIO(_outcome_bytes()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as packed:
        for info in plain.infolist():
            packed.writestr(info.filename, plain.read(info))
    (tmp_path / "0.1.pt").write_bytes(buffer.getvalue())
    assert "compressed" in checker.read_outcomes(tmp_path / "0.1.pt")["failure"]


def test_an_outcome_file_over_its_caps_is_refused(tmp_path, monkeypatch):
    (tmp_path / "0.1.pt").write_bytes(_outcome_bytes())
    monkeypatch.setattr(checker, "OUTCOME_UNPACKED_LIMIT", 100)
    assert "unpacks to more than" in checker.read_outcomes(tmp_path / "0.1.pt")["failure"]
    monkeypatch.setattr(checker, "OUTCOME_LIMIT", 100)
    assert "limit" in checker.read_outcomes(tmp_path / "0.1.pt")["failure"]


def test_an_outcome_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "0.1.pt")  # a reader would wait for a writer forever
    assert "not a regular file" in checker.read_outcomes(tmp_path / "0.1.pt")["failure"]


# --- processes: nothing outlives the grade -----------------------------------------------------

_HOPPING = r"""
import os, select, signal, subprocess, sys, time
import psutil
from course.grading.processes import become_subreaper, descendants, end_processes

assert become_subreaper()
trials, crowd = int(sys.argv[1]), int(sys.argv[2])
# A hopper forks, its parent exits, again and again. It also ends by itself after 20 s, so that
# if the grader ever misses one, the test fails without leaving a fork loop behind: on a machine
# whose init reaps nothing, its zombies (one per hop) once filled every PID of the machine and
# every test after it failed. It holds the write end of a pipe and never writes: the read end
# reaches its end only once every process of the hopper is gone, the one proof no scan of the
# process table can give (a scan is what misses a hopper).
hopper = (
    "import os, time\n"
    "end = time.monotonic() + 20\n"
    "while time.monotonic() < end:\n"
    "    if os.fork():\n"
    "        os._exit(0)\n"
    "    time.sleep(0.005)\n"
)
# A crowd of sleepers that are not the grader's to end (like a busy machine's other processes):
# with it, one scan of the whole table takes longer than a hop.
sleepers = subprocess.Popen(
    ["bash", "-c", f"for i in $(seq {crowd}); do sleep 600 & done; wait"], start_new_session=True
)


def sleeping():
    return {p.pid for p in psutil.Process(sleepers.pid).children() if p.name() == "sleep"}


while len(sleeping()) < crowd:
    time.sleep(0.1)
crowded = sleeping()
missed = []
try:
    for trial in range(trials):
        r, w = os.pipe()
        subprocess.Popen([sys.executable, "-c", hopper], start_new_session=True, pass_fds=(w,))
        os.close(w)
        time.sleep(0.2)  # it has hopped dozens of times by now
        end_processes({sleepers.pid})
        ended = select.select([r], [], [], 5)[0] and os.read(r, 1) == b""
        os.close(r)
        if not ended:
            missed.append((trial, sorted(set(descendants()) - crowded - {sleepers.pid})))
    assert sleeping() == crowded, "the crowd was not the grader's to end"
finally:
    try:
        os.killpg(sleepers.pid, signal.SIGKILL)
    except ProcessLookupError:  # no crowd: its shell has already been reaped
        pass
    while descendants():  # nothing of ours outlives this script, whatever happened above
        end_processes()
    while True:  # and every zombie we adopted is reaped here, not left to init
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
assert not missed, missed
print("none left")
"""


@pytest.mark.slow
@pytest.mark.parametrize("crowd", [0, pytest.param(1000, marks=pytest.mark.stress)])
def test_a_process_that_keeps_forking_under_new_pids_is_ended_every_time(crowd):
    # The fallback's supervision (no bubblewrap): with it, the PID namespace ends every hopper
    # (test_grading_boundary.py); the crowded run is a stress test, run by CI with -m stress.
    # 15 hoppers, one after another. Each hop leaves a zombie until the grader reaps it; a hop
    # every 5 ms keeps that to dozens, so the suite's other tests (running beside this one)
    # never find the machine out of process slots (at 1 ms they did: fork raised EAGAIN).
    # CI once found a hopper alive after the grader was done. With 1000 other processes, a
    # scan of the table outlasts a hop: each scan missed the hopper, and it hopped on for 20 s.
    args = [sys.executable, "-c", _HOPPING, "15", str(crowd)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "none left" in proc.stdout, proc.stderr


def test_no_grading_module_reads_proc_by_hand():
    """The process tree comes from psutil (macOS has no /proc): no string constant of a
    course/grading module, docstrings aside, names a file under /proc."""
    import ast

    for path in sorted((ROOT / "course" / "grading").glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                assert not node.value.startswith("/proc/"), (path.name, node.value)  # a file of the table


def test_processes_are_ended_on_a_platform_without_proc_or_subreaper(monkeypatch):
    from course.grading import processes

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(
        os.path, "isdir", lambda p, _real=os.path.isdir: False if str(p).startswith("/proc") else _real(p)
    )
    assert processes.become_subreaper() is False
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert child.pid in processes.descendants()
        killed = processes.end_processes()
        child.wait(timeout=60)  # ended (its status may have been reaped by end_processes already)
        assert child.pid not in processes.descendants()
        assert any(line.startswith(f"pid {child.pid}: ") and "time.sleep(600)" in line for line in killed)
    finally:
        child.kill()
        child.wait()


# --- the gradebook's sandbox: what it shows and what it hides ----------------------------------

_BACKWARD = (
    "import sys, torch; x = torch.arange(1.0, 4.0, requires_grad=True); (x**3).sum().backward(); "
    "print(sys.prefix, x.grad.tolist(), torch.__version__)"
)


def _sandbox_or_skip() -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    if not sandbox.sandbox_available():
        pytest.skip("bubblewrap cannot make namespaces here")


@pytest.mark.slow
def test_a_grader_whose_venv_lives_in_tmp_runs_torch_in_the_sandbox(tmp_path):
    # CI's torch 2.14.1 leg keeps its venv in $TMPDIR, which is /tmp: the sandbox's own /tmp
    # hid it and every learner of a gradebook scored 0. A venv made there, seeing this one's
    # packages, must run the same torch program inside the sandbox as outside (the oracle).
    import site

    _sandbox_or_skip()
    venv = Path(tempfile.mkdtemp(prefix="course-venv-", dir="/tmp"))
    venv.chmod(0o755)  # as `python -m venv` makes it (the sandbox's uid reads what others may read)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        (pure,) = (venv / "lib").glob("python3*/site-packages")
        dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
        (pure / "zz_course_test.pth").write_text(f"import site; list(map(site.addsitedir, {dirs!r}))\n")
        python = str(venv / "bin" / "python")
        script = textwrap.dedent(
            f"""
            import sys
            from pathlib import Path
            from course.grading.sandbox import run_untrusted
            argv = [sys.executable, "-I", "-c", {_BACKWARD!r}]
            run = run_untrusted(lambda folder: argv, Path({str(tmp_path / "in")!r}))
            sys.exit(77) if run.isolation != "bubblewrap" else sys.stdout.write(run.stdout.decode())
            """
        )
        (tmp_path / "in").mkdir()
        outside = subprocess.run([python, "-I", "-c", _BACKWARD], capture_output=True, text=True, timeout=300)
        inside = subprocess.run([python, "-I", "-c", script], capture_output=True, text=True, timeout=600)
        assert inside.returncode != 77, "bubblewrap did not run"
        assert outside.returncode == 0 and outside.stdout.startswith(str(venv)), outside.stderr
        assert inside.returncode == 0 and inside.stdout == outside.stdout, inside.stderr
    finally:
        shutil.rmtree(venv)


@pytest.mark.parametrize("base", ["/tmp", "/var/tmp"])
def test_the_sandbox_shows_what_the_grader_needs_and_nothing_else(base, tmp_path, monkeypatch):
    # A fake layout: an interpreter inside a home, a course folder beside a roster. Wherever
    # it lies, only what is needed shows (an allow-list: issue 44 made the deny-list's
    # "elsewhere/other", visible before outside /tmp, invisible too).
    if not os.access(base, os.W_OK):
        pytest.skip(f"{base} is not writable here")
    _sandbox_or_skip()
    top = Path(tempfile.mkdtemp(prefix="course-layout-", dir=base))
    try:
        files = [
            "home/secret",
            "home/.pyenv/versions/3.11.7/lib/site-packages/os.py",
            "course/course/__init__.py",
            "course/roster/ada/00_warmup.ipynb",
            "elsewhere/other",
        ]
        for rel in files:
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_text(rel)
        monkeypatch.syspath_prepend(str(top / "home/.pyenv/versions/3.11.7/lib/site-packages"))
        monkeypatch.setattr(binds, "_course_package", lambda: str(top / "course" / "course"))
        (tmp_path / "in").mkdir()
        run = sandbox.run_untrusted(lambda folder: ["find", str(top), "-type", "f"], tmp_path / "in")
        seen = {str(Path(line).relative_to(top)) for line in run.stdout.decode().split()}
        assert seen == {"home/.pyenv/versions/3.11.7/lib/site-packages/os.py", "course/course/__init__.py"}, (
            run
        )
        for where in ("course/course/new", "/run/sandbox/in/new"):  # bound read-only
            touch = sandbox.run_untrusted(lambda folder, w=where: ["touch", str(top / w)], tmp_path / "in")
            assert touch.returncode != 0, (where, touch)
    finally:
        shutil.rmtree(top)


def test_a_sandbox_that_cannot_start_the_grader_says_why(tmp_path, monkeypatch):
    _sandbox_or_skip()
    monkeypatch.setattr(sys, "executable", "/tmp/no-such-venv/bin/python")
    with pytest.raises(RuntimeError, match="cannot start the grader's Python .*no-such-venv"):
        sandbox.sandbox_available()


def test_the_reported_command_time_is_no_longer_than_the_command_ran():
    """``graded in N s`` is measured from the process's start: never more than its parent
    saw it run (on Linux the boot's wall-clock time is rounded to a second; it must not leak in)."""
    program = (
        "import time\nfrom course.grading.processes import command_seconds\n"
        "print(command_seconds(time.monotonic()))"
    )
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    seen = time.monotonic() - started
    assert 0 < float(out.stdout) <= seen
