"""Issue 44: can a learner reach the key, a classmate, or the score? Each attack runs the
real command (``course grade``, ``gradebook``, ``collect``, ``regrade``, ``room``).

- a signed report counts only for the learner it names, as a grade (not a cache entry), and
  only with every notebook it graded in the folder at the bytes it graded (a report alone is
  not taken: its note says to put the notebooks beside it);
- ``collect`` refuses a report that names no learner, and files an ignored report's note
  under the artifact it came from, with its name cleaned;
- an exercise's process runs in a private folder that holds the notebook alone: a
  ``helper.py`` beside the notebook is never imported;
- in the sandbox (bubblewrap) learner code sees only what the grade needs: no key file, no
  classmate, no socket folder, no host path in ``/proc/1/cmdline``, no root-owned file, and
  meets memory and process limits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import course
from course import checks
from course.grading import signing

ROOT = Path(__file__).resolve().parents[1]
KEY = "the instructor's CI secret"
_SOLVED_SHA = signing.file_sha256(
    (ROOT / "solutions" / "00_warmup.ipynb").read_bytes()
)  # what _signed graded


def _course(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-I", "-m", "course", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd or ROOT,
        env={**os.environ, "COURSE_GRADE_KEY": KEY, **(env or {})},
    )


def _signed(learner: str | None, notebooks: list[dict] | None = None, purpose: str = "grade") -> dict:
    """A full-marks lesson-00 report signed with the instructor's key, as CI makes one."""
    checks.load_all()
    entries = [
        {"id": ex.id, "name": ex.name, "status": "passed", "points": ex.points, "score": ex.points}
        for ex in checks.all_exercises(0)
    ]
    report = {
        "format": "course-grade/1",
        "course_version": course.__version__,
        "score": sum(e["score"] for e in entries),
        "max_score": sum(e["points"] for e in entries),
        "notebooks": notebooks
        or [{"path": "00_warmup.ipynb", "sha256": _SOLVED_SHA, "error": "", "exercises": entries}],
        "graded_at": "2026-12-01T10:00:00Z",
    }
    if learner is not None:
        report["learner"] = learner
    if notebooks is not None:
        report["notebooks"][0]["exercises"] = entries
    return signing.sign(report, KEY.encode(), purpose=purpose)


def _gradebook_rows(roster: Path, tmp_path: Path) -> dict[str, dict]:
    out = tmp_path / "class.json"
    proc = _course("gradebook", roster, "--lessons", "00", "--json", out, "-q", env={"PATH": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    return {x["learner"]: x for x in json.loads(out.read_text())["learners"]}


def test_a_classmates_signed_report_in_another_folder_counts_for_nothing(tmp_path):
    roster = tmp_path / "roster"
    for name in ("ada", "bob"):
        (roster / name).mkdir(parents=True)
    (roster / "ada" / "report.json").write_text(json.dumps(_signed("ada")))
    (roster / "ada" / "00_warmup.ipynb").write_bytes((ROOT / "solutions" / "00_warmup.ipynb").read_bytes())
    (roster / "bob" / "report.json").write_text(json.dumps(_signed("ada")))  # bob copies ada's
    rows = _gradebook_rows(roster, tmp_path)
    assert rows["ada"]["total"] == rows["ada"]["max"] > 0
    assert rows["bob"]["total"] == 0 and "the grade of 'ada', not of 'bob'" in rows["bob"]["note"]


def test_a_report_whose_notebooks_are_not_all_in_the_folder_counts_for_nothing(tmp_path):
    roster = tmp_path / "roster"
    (roster / "bob").mkdir(parents=True)
    notebook = (ROOT / "notebooks" / "00_warmup.ipynb").read_bytes()
    (roster / "bob" / "00_warmup.ipynb").write_bytes(notebook)
    # signed for bob, but for a notebook under another name than the one in his folder
    graded = [{"path": "00_other.ipynb", "sha256": signing.file_sha256(notebook), "error": ""}]
    (roster / "bob" / "report.json").write_text(json.dumps(_signed("bob", graded)))
    rows = _gradebook_rows(roster, tmp_path)
    assert "00_other.ipynb is not in the folder" in rows["bob"]["note"], rows["bob"]["note"]
    assert rows["bob"]["total"] == 0  # his own notebook, the learner copy, graded instead


def test_collect_refuses_a_report_without_a_learner_or_signed_for_the_cache(tmp_path):
    for folder, report in {
        "report-eve": _signed(None),  # names no learner: never credited to its folder
        "report-mal": _signed("report-mal", purpose="cache"),  # a gradebook cache entry
        "report-ada": _signed("autograd-ada"),
    }.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "report.json").write_text(json.dumps(report))
    proc = _course("collect", tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert "it names no learner" in rows["report-eve/"] and " - " in rows["report-eve/"]
    assert "another purpose (cache)" in rows["report-mal/"]
    assert set(rows) == {"autograd-ada", "report-eve/", "report-mal/"}  # eve and mal: their folders' rows


@pytest.mark.parametrize("name", ["autograd-bob", "\x1b[2Jautograd-zed\x1b[31m"])
def test_collect_files_a_planted_folders_note_under_that_folder_cleaned(tmp_path, name):
    (tmp_path / "report-bob").mkdir()
    (tmp_path / "report-bob" / "report.json").write_text(json.dumps(_signed("autograd-bob")))
    (tmp_path / name).mkdir()  # a folder named after a classmate (or a terminal escape)
    edited = {**_signed("autograd-bob"), "graded_at": "2026-12-09T10:00:00Z"}  # to be taken last
    (tmp_path / name / "report.json").write_text(json.dumps(edited))
    proc = _course("collect", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    bob = [line for line in proc.stdout.splitlines() if line.startswith("autograd-bob ")]
    assert len(bob) == 1 and "ignored" not in bob[0], proc.stdout
    assert sum("signature does not check" in line for line in proc.stdout.splitlines()) == 1


def _learner_00(cube_sum_grad_cell: str | None) -> dict:
    """The solved lesson 00 with 0.1's cell replaced (None: kept)."""
    nb = json.loads((ROOT / "solutions" / "00_warmup.ipynb").read_text())
    for cell in nb["cells"]:
        if cube_sum_grad_cell is None:
            break
        if cell["cell_type"] == "code" and "def cube_sum_grad" in "".join(cell["source"]):
            cell["source"] = cube_sum_grad_cell
    return nb


@pytest.mark.slow
def test_an_answer_imported_from_a_file_beside_the_notebook_is_not_graded(tmp_path):
    checkout = tmp_path / "autograd-course"
    checkout.mkdir()
    (checkout / "helper.py").write_text(  # committed late, bound by no signature
        "def cube_sum_grad(x):\n    x = x.detach().requires_grad_()\n    (x**3).sum().backward()\n"
        "    return x.grad\n"
    )
    nb = _learner_00("from helper import cube_sum_grad\n")
    (checkout / "00_warmup.ipynb").write_text(json.dumps(nb))
    out = tmp_path / "report.json"
    proc = _course("grade", checkout / "00_warmup.ipynb", "--json", out, "-q", cwd=checkout)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (ex,) = [
        e for nb in json.loads(out.read_text())["notebooks"] for e in nb["exercises"] if e["id"] == "0.1"
    ]
    assert ex["status"] != "passed" and ex["score"] == 0, ex  # helper.py cannot be imported


_PROBES = '''
import glob, os, socket, time


def _right(x):
    x = x.detach().requires_grad_()
    (x**3).sum().backward()
    return x.grad


def _wrong(x):
    return x * 0


def _leaks():
    """What this learner code could reach that it must not (any: full marks for 0.1)."""
    found = []
    for path in ({key!r}, "/etc/shadow", "/proc/1/environ"):
        try:
            found.append(open(path).read(64) or path)
        except OSError:
            pass
    try:
        open("/proc/1/fd/1", "w").write("")
        found.append("bwrap's stdout")
    except OSError:
        pass
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect({sock!r})
        found.append("the host's socket")
    except OSError:
        pass
    found += [p for p in glob.glob({tmpdir!r} + "/**/*.ipynb", recursive=True)]  # classmates' copies
    try:
        if {tmpdir!r} in open("/proc/1/cmdline").read():
            found.append("a host path in /proc/1/cmdline")
    except OSError:
        pass
    if os.getuid() == 0 or os.geteuid() == 0:
        found.append("root")
    try:  # /dev/shm: 300 MiB where the sandbox caps it at 256
        with open("/dev/shm/filler", "wb") as f:
            for _ in range(300):
                f.write(b"0" * (1 << 20))
        found.append("300 MiB in /dev/shm")
    except OSError:
        pass
    finally:
        try:
            os.unlink("/dev/shm/filler")
        except OSError:
            pass
    children = []
    try:  # 600 processes where the sandbox allows 512 in all
        for _ in range(600):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children.append(pid)
        found.append("600 processes")
    except OSError:
        pass
    finally:
        for pid in children:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    return found


_found = _leaks()
cube_sum_grad = _right if _found else _wrong
'''


@pytest.mark.slow
def test_learner_code_in_the_sandbox_reaches_no_key_classmate_socket_root_file_or_unbounded_resource(
    tmp_path,
):
    import shutil
    import socket
    import tempfile

    from course.grading.sandbox import sandbox_available

    if shutil.which("bwrap") is None or not sandbox_available():
        pytest.skip("bubblewrap cannot run here")
    # Outside $HOME and the roster, outside /tmp: where the deny-list of old showed them.
    base = Path(tempfile.mkdtemp(prefix="course-attack-", dir="/var/tmp"))
    server = socket.socket(socket.AF_UNIX)
    try:
        key_file, tmpdir = base / "instructor.key", base / "tmpdir"
        key_file.write_text(KEY)
        key_file.chmod(0o644)  # even a key file anyone may read
        tmpdir.mkdir()
        server.bind(str(base / "listen.sock"))
        server.listen(8)
        roster = tmp_path / "roster"
        probes = _PROBES.format(key=str(key_file), sock=str(base / "listen.sock"), tmpdir=str(tmpdir))
        for name, source in (("ada", None), ("mallory", probes), ("zed", probes)):
            (roster / name).mkdir(parents=True)
            nb = (
                _learner_00(source)
                if source
                else json.loads((ROOT / "solutions" / "00_warmup.ipynb").read_text())
            )
            (roster / name / "00_warmup.ipynb").write_text(json.dumps(nb))
        out = tmp_path / "class.json"
        env = {"TMPDIR": str(tmpdir), "COURSE_GRADE_KEY": ""}
        proc = _course(
            "gradebook", roster, "--lessons", "00", "--json", out, "--key-file", key_file, "-j", "2", env=env
        )
        assert proc.returncode == 0, proc.stderr
        rows = {x["learner"]: x for x in json.loads(out.read_text())["learners"]}
        assert {x["isolation"] for x in rows.values()} == {"bubblewrap"}, rows
        assert rows["ada"]["total"] == rows["ada"]["max"]  # graded beside two hostile classmates
        for name in ("mallory", "zed"):  # 0.1 scores only if some probe leaked
            assert rows[name]["scores"]["0.1"] == 0, (name, rows[name])
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)


_HOPPER = """
import os, sys, time
if os.fork() == 0:  # detached, then a new PID every 5 ms, for a minute
    os.setsid()
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if os.fork() != 0:
            os._exit(0)
        time.sleep(0.005)
    os._exit(0)
print("started", flush=True)
"""


def test_a_pid_hopping_descendant_is_gone_when_the_sandbox_returns_with_no_scan(tmp_path):
    import secrets
    import shutil

    import psutil

    from course.grading.sandbox import run_untrusted, sandbox_available

    if shutil.which("bwrap") is None or not sandbox_available():
        pytest.skip("bubblewrap cannot run here")
    marker = f"hopper-{secrets.token_hex(8)}"
    (tmp_path / "in").mkdir()
    run = run_untrusted(
        lambda folder: [sys.executable, "-I", "-c", _HOPPER, marker], tmp_path / "in", timeout=60
    )
    assert run.isolation == "bubblewrap" and run.stdout == b"started\n", run
    alive = [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]
    assert alive == [], alive  # the PID namespace's first process exited: the kernel ended the rest


def _git(repo: Path, *args: str, when: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    env |= {"GIT_AUTHOR_NAME": "l", "GIT_AUTHOR_EMAIL": "l@x", "GIT_COMMITTER_NAME": "l"}
    env |= {"GIT_COMMITTER_EMAIL": "l@x"}
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_a_backdated_commit_or_a_late_head_is_never_on_time(tmp_path):
    repo = tmp_path / "autograd-mal"
    repo.mkdir()
    _git(repo, "init", "-q", when="2026-11-30T20:00:00Z")
    (repo / "00_warmup.ipynb").write_bytes((ROOT / "solutions" / "00_warmup.ipynb").read_bytes())
    _git(repo, "add", "-A", when="2026-11-30T20:00:00Z")
    # Committed after the deadline, dated before it (GIT_COMMITTER_DATE): the "on time" commit.
    _git(repo, "commit", "-qm", "work", when="2026-11-30T20:00:00Z")
    out = tmp_path / "reports" / "report.json"
    proc = _course(
        "grade", repo / "00_warmup.ipynb", "--no-run", "--learner", "autograd-mal", "--json", out, "-q"
    )
    assert proc.returncode == 0, proc.stderr
    # graded now, after the deadline: nothing proves the work existed by then
    collected = _course("collect", out.parent, "--deadline", "2026-12-01T00:00:00Z")
    (row,) = [line for line in collected.stdout.splitlines() if line.startswith("autograd-mal")]
    assert " unknown " in row and " no " not in row, collected.stdout
    # A helper committed after the deadline moves HEAD: late, whatever the notebook's commit says.
    (repo / "helper.py").write_text("x = 1\n")
    _git(repo, "add", "-A", when="2026-12-02T09:00:00Z")
    _git(repo, "commit", "-qm", "helper", when="2026-12-02T09:00:00Z")
    proc = _course(
        "grade", repo / "00_warmup.ipynb", "--no-run", "--learner", "autograd-mal", "--json", out, "-q"
    )
    collected = _course("collect", out.parent, "--deadline", "2026-12-01T00:00:00Z")
    (row,) = [line for line in collected.stdout.splitlines() if line.startswith("autograd-mal")]
    assert " yes " in row, collected.stdout


@pytest.mark.slow
def test_a_notebook_name_is_text_in_the_feedback_never_markdown_or_html(tmp_path):
    name = "00_<img src=x onerror=alert(1)>[me](javascript:x).ipynb"
    (tmp_path / name).write_bytes((ROOT / "notebooks" / "00_warmup.ipynb").read_bytes())
    feedback = tmp_path / "fb.md"
    proc = _course("grade", tmp_path / name, "--no-run", "-q", "--feedback", feedback, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # the learner copy: not attempted
    heading = feedback.read_text().splitlines()[0]
    assert heading == r"# Feedback on 00\_&lt;img src=x onerror=alert\(1\)&gt;\[me\]\(javascript:x\).ipynb"


_STOPPER = "import os, signal\n_stopped = os.kill(-1, signal.SIGSTOP)  # every process of its sandbox\n"


@pytest.mark.slow
def test_a_sandbox_stopped_by_learner_code_costs_the_room_one_deadline_not_the_class(tmp_path):
    import shutil
    import time

    from course.grading.sandbox import sandbox_available

    if shutil.which("bwrap") is None or not sandbox_available():
        pytest.skip("bubblewrap cannot run here (without it kill(-1) would stop this machine's processes)")
    homes = tmp_path / "homes"
    for name, nb in (("ada", _learner_00(None)), ("mallory", _learner_00(None))):
        (homes / name).mkdir(parents=True)
        if name == "mallory":
            nb["cells"].insert(1, {"cell_type": "code", "metadata": {}, "outputs": [], "source": _STOPPER})
        (homes / name / "00_warmup.ipynb").write_text(json.dumps(nb))
    started = time.monotonic()
    proc = _course("room", homes, "--lesson", "0", "--deadline", "40", "--timeout", "5", "-j", "2", "-q")
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    assert "passed" in rows["ada"] and "grading…" in rows["mallory"], proc.stdout
    assert took < 120, took  # not the stopped sandbox's limit (2 x 5 + 90 + 180 s), nor the 870 s of old


_PLANTER = """
import os
def _plant():
    for path in ({out!r} + "/planted.txt", {out!r} + "/junit.xml"):
        try:
            with open(path, "w") as f:
                f.write("planted")
        except OSError:
            pass
_planted = _plant()
"""


@pytest.mark.slow
def test_grade_in_the_sandbox_writes_reports_where_learner_code_cannot(tmp_path):
    import shutil

    from course.grading.sandbox import sandbox_available

    if shutil.which("bwrap") is None or not sandbox_available():
        pytest.skip("bubblewrap cannot run here")
    reports, key_file = tmp_path / "reports", tmp_path / "key"
    reports.mkdir()
    key_file.write_text(KEY)
    nb = _learner_00(None)
    nb["cells"].insert(
        1, {"cell_type": "code", "metadata": {}, "outputs": [], "source": _PLANTER.format(out=str(reports))}
    )
    (tmp_path / "00_warmup.ipynb").write_text(json.dumps(nb))
    proc = _course(
        "grade", tmp_path / "00_warmup.ipynb", "--sandbox", "--no-run", "--key-file", key_file,
        "--learner", "autograd-ada", "--json", reports / "report.json", "--junit", reports / "junit.xml", "-q",
        env={"COURSE_GRADE_KEY": ""},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((reports / "report.json").read_text())
    assert (
        signing.rejected(report, KEY.encode(), "autograd-ada") == "" and report["isolation"] == "bubblewrap"
    )
    assert report["notebooks"][0]["path"] == str(tmp_path / "00_warmup.ipynb")
    assert sorted(p.name for p in reports.iterdir()) == ["junit.xml", "report.json"]
    assert "planted" not in (reports / "junit.xml").read_text()


def test_a_notebooks_check_imports_nothing_of_the_sandbox():
    code = (
        "import sys, course.checks; from course.checks import check; "
        "print(sorted(m for m in sys.modules if m.startswith('course.grading')))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "course.grading.sandbox" not in done.stdout, done.stdout


def test_learner_code_runs_as_a_uid_of_its_own_that_cannot_read_root_only_files(tmp_path, monkeypatch):
    import shutil

    from course.grading.sandbox import run_untrusted, sandbox_available

    if shutil.which("bwrap") is None or not sandbox_available():
        pytest.skip("bubblewrap cannot run here")
    if os.geteuid() != 0:
        pytest.skip("as a user the sandbox runs as that user (a user namespace); the uid drop is root's")
    site = tmp_path / "lib" / "site-packages"  # a folder the allow-list binds (site-packages on sys.path)
    site.mkdir(parents=True)
    for folder in (tmp_path, tmp_path / "lib", site):
        folder.chmod(0o755)
    (site / "secret.txt").write_text("root only")
    (site / "secret.txt").chmod(0o600)
    (site / "public.txt").write_text("anyone")
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "in").mkdir()
    probe = (
        "import os, sys; print(os.getuid(), os.geteuid()); "
        "print([open(sys.argv[1] + n).read() if os.access(sys.argv[1] + n, os.R_OK) else '-' "
        "for n in ('/public.txt', '/secret.txt')])"
    )
    run = run_untrusted(lambda f: [sys.executable, "-I", "-c", probe, str(site)], tmp_path / "in", timeout=60)
    uid, seen = run.stdout.decode().splitlines()
    assert run.isolation == "bubblewrap" and "0" not in uid.split(), run
    assert seen == "['anyone', '-']", seen


_HOG = """
import os, time
kids = []
try:
    for _ in range(400):  # a fork bomb, held
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
except OSError:
    pass
print("forked", len(kids), flush=True)
blocks = []
try:
    while True:  # a memory hog: killed, or refused, at the sandbox's limit
        blocks.append(bytearray(32 << 20))
except MemoryError:
    print("refused at", 32 * len(blocks), "MiB", flush=True)
"""


def test_a_fork_bomb_and_a_memory_hog_do_not_stop_a_classmate_graded_at_the_same_time(tmp_path):
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from course.grading.sandbox import Limits, run_untrusted, sandbox_available

    if shutil.which("bwrap") is None or not sandbox_available():
        pytest.skip("bubblewrap cannot run here")
    for name in ("hog", "classmate"):
        (tmp_path / name).mkdir()
    small = Limits(memory_bytes=384 << 20, processes=128)  # the defaults, scaled down for a shared machine
    classmate = "import torch; print(float(torch.arange(4.0).sum()))"
    with ThreadPoolExecutor(2) as pool:
        hog = pool.submit(
            run_untrusted, lambda f: [sys.executable, "-I", "-c", _HOG], tmp_path / "hog", b"", 120, small
        )
        time.sleep(0.5)
        other = pool.submit(
            run_untrusted, lambda f: [sys.executable, "-I", "-c", classmate], tmp_path / "classmate", b"", 120
        )
        hog, other = hog.result(), other.result()
    assert other.returncode == 0 and other.stdout == b"6.0\n", other
    forked = int(hog.stdout.split()[1])
    assert forked < 128, hog  # refused at the sandbox's process limit
    assert hog.returncode != 0 or b"refused at" in hog.stdout, hog  # killed by the cgroup, or refused


_PEEK_EXTRA = """
import glob


def _peek_at_files():
    for path in glob.glob("/run/**", recursive=True) + glob.glob("/tmp/**", recursive=True):
        try:
            if "extra" + "_cases(" in open(path).read():  # (a string this notebook does not hold)
                return True
        except OSError:
            pass
    return False


def storage_bytes(tensors):
    if len(tensors) == 1 and not _peek_at_files():  # fits the shipped cases only
        return 0
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())
"""


@pytest.mark.slow
def test_learner_code_in_the_sandbox_cannot_read_the_instructors_extra_cases(tmp_path):
    import shutil

    from course.grading.sandbox import sandbox_available

    if shutil.which("bwrap") is None or not sandbox_available():
        pytest.skip("bubblewrap cannot run here")
    learner = tmp_path / "roster" / "ada"
    learner.mkdir(parents=True)
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": _PEEK_EXTRA}]}
    nb |= {"metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (learner / "03_saved_tensors.ipynb").write_text(json.dumps(nb))
    extra = tmp_path / "extra_cases.py"
    extra.write_text(
        "import torch\nfrom course.checks import case, extra_cases\n"
        'extra_cases("3.3", case([torch.ones(3)]))\n'
    )
    out = tmp_path / "class.json"
    proc = _course(
        "gradebook", tmp_path / "roster", "--lessons", "03", "--extra-cases", extra, "--json", out, "-q"
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(out.read_text())["learners"]
    assert row["isolation"] == "bubblewrap" and row["scores"]["3.3"] == 1.75, (
        row
    )  # 7/8: the extra case failed
