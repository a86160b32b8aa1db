"""Do the guides work as written? Every ``bash`` and ``python`` block of the learner's and the
instructor's guides runs here, exactly as written, in a simulated class (issue 48).

The blocks are read by Sybil (a well-kept runner for documentation examples), so a guide cannot
drift from what is tested: there is no copy of a command in this file. A block that cannot run
here says so just above it, in Sybil's own directive, with the reason pytest reports::

    <!-- skip: next "needs the network: it clones the course's repository" -->

The simulated class (one module fixture, built once): GitHub Classroom's template (``course
start autograd-course``, committed), four learners' repositories made from it,

- ``autograd-ada``: lesson 00 solved, committed before the deadline;
- ``autograd-bob``: exercise 0.2 answered before the deadline, the rest after it;
- ``autograd-cy``: exercise 0.2 answered, and JupyterLab's duplicate ``00_warmup-Copy1.ipynb``;
- ``autograd-dee``: the template untouched;

and ``eve``, on the roster (``roster.txt``) with no repository. ``roster/`` holds a clone of
each (the gradebook's layout), ``student-repos/`` the repositories (what ``gh classroom clone``
makes), ``reports/`` the signed reports of the instructor's run at the deadline (one of them
made by the previous release's grader, so that ``course regrade --only-flagged`` has work) and
``reports-later/`` bob's from a run after it, ``instructor.key`` the key. Reports are made with
the CI example's ``course grade`` options (the graded time of the deadline run set to the
deadline's eve and signed again with the instructor's key: a test cannot wait for a cron).

The blocks that grade notebooks take minutes: they carry the ``guides`` marker and run when
it is selected (``python -m pytest -m guides tests/test_guides.py``, a step of ``.ci/run``);
otherwise they skip, saying so. Independent oracles for the last test: the exercise registry's
points (what a solved, a partial and an untouched notebook earn) and the dates we commit with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sybil")
from sybil import Sybil  # noqa: E402
from sybil.evaluators.skip import Skipper  # noqa: E402
from sybil.parsers.markdown import CodeBlockParser, SkipParser  # noqa: E402
from test_homework import _commit, _git  # a learner's repository, committed at a date (tests/ is on sys.path)

from course.grading import signing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ["README.md", "docs/install.md", "docs/instructor-guide.md", "docs/grading.md"]
GRADING = ("course grade", "course gradebook", "course room", "course regrade", "course collect", "reports")
KEY = "the instructor's key"
DEADLINE_EVE = "2026-12-01T22:30:00Z"  # the deadline run's time (the guides' deadline: 23:59+01:00)
BEFORE, AFTER = "2026-11-30T20:00:00Z", "2026-12-02T09:00:00Z"
OUTPUT: dict[str, subprocess.CompletedProcess] = {}  # "doc:line" -> what the block printed


def _evaluate(language: str):
    def run(example) -> None:
        here = Path(example.namespace["class_dir"])
        command = ["bash", "-e", "-o", "pipefail", "-c"] if language == "bash" else [sys.executable, "-c"]
        done = subprocess.run(
            [*command, example.parsed],
            cwd=here,
            env=_environment(here),
            capture_output=True,
            text=True,
            timeout=900,
        )
        OUTPUT[f"{Path(example.path).relative_to(ROOT)}:{example.line}"] = done
        assert done.returncode == 0 and "Traceback" not in done.stderr, (
            f"{example.path}:{example.line} exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )

    return run


SYBIL = Sybil(
    parsers=[
        CodeBlockParser("bash", _evaluate("bash")),
        CodeBlockParser("python", _evaluate("python")),
        SkipParser(),
    ]
)


def _blocks() -> list:
    """(id, the directives just above a block, the block) for every block, in document order."""
    found = []
    for name in GUIDES:
        document = SYBIL.parse(ROOT / name)
        directives = []
        for example in document.examples():
            if isinstance(example.region.evaluator, Skipper):
                directives.append(example)
                continue
            heavy = any(word in example.parsed for word in GRADING)
            marks = [pytest.mark.guides] if heavy else []
            found.append(pytest.param(directives, example, id=f"{name}:{example.line}", marks=marks))
            directives = []
    return found


def _guides_selected(config) -> bool:
    """Was the ``guides`` marker asked for (``-m guides``)?"""
    expression = config.option.markexpr or ""
    return "guides" in expression and "not guides" not in expression


def _environment(here: Path) -> dict[str, str]:
    """The instructor's shell: the course's command on PATH, a home of its own, no key in it."""
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_GRADE_KEY", "PYTHONPATH")}
    env.update(PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin", HOME=str(here / "home"))
    return env


def _course(here: Path, *args) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "course", *map(str, args)],
        cwd=here,
        env=_environment(here),
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stdout + done.stderr


def _answered_02() -> bytes:
    """The learner copy of lesson 00 with exercise 0.2 answered (torch's value, 8.0)."""
    nb = json.loads((ROOT / "notebooks/00_warmup.ipynb").read_text())
    (cell,) = [c for c in nb["cells"] if "predicted_a_grad = ..." in "".join(c["source"])]
    cell["source"] = ["predicted_a_grad = 8.0\n"]
    return json.dumps(nb, indent=1).encode()


def _grade_as_ci(here: Path, learner: str, out: Path) -> None:
    """The grading step of docs/ci-grading-example.yml, with its options (--no-run: the score
    never depends on the headless run, and this is a rehearsal of the pipeline, not of Jupyter)."""
    _course(
        here,
        "grade",
        f"student-repos/{learner}/autograd-course",
        "--key-file",
        "instructor.key",
        "--learner",
        learner,
        "--lessons",
        "00",
        "--json",
        out / "report.json",
        "--junit",
        out / "junit.xml",
        "--feedback",
        out / "feedback",
        "--no-run",
        "-q",
    )


def _as_the_deadline_run(path: Path, fingerprint: str | None = None) -> None:
    report = json.loads(path.read_text())
    report.pop("signature")
    report["graded_at"] = DEADLINE_EVE
    if fingerprint:
        report["grader_fingerprint"] = fingerprint
    path.write_text(json.dumps(signing.sign(report, KEY.encode()), indent=2))


@pytest.fixture(scope="module")
def class_dir(tmp_path_factory, request) -> Path:
    here = tmp_path_factory.mktemp("class")
    (here / "home").mkdir()
    (here / ".venv").symlink_to(Path(sys.prefix))  # the README's .venv/bin/course
    (here / "instructor.key").write_text(KEY)
    (here / "roster.txt").write_text("ada\nbob\ncy\ndee\neve\n")
    _course(here, "start", "autograd-course")  # what the README's `course lab` did first
    if not _guides_selected(request.config):
        return here  # no grading block runs: no repositories needed
    template = here / "template"
    template.mkdir()
    _git(template, "init", "-q")
    _course(template, "start", "autograd-course")
    _commit(template, {}, "2026-11-20T09:00:00Z")
    solved = (ROOT / "solutions/00_warmup.ipynb").read_bytes()
    work = {
        "autograd-ada": {"00_warmup.ipynb": solved},
        "autograd-bob": {"00_warmup.ipynb": _answered_02()},
        "autograd-cy": {"00_warmup.ipynb": _answered_02(), "00_warmup-Copy1.ipynb": _answered_02()},
        "autograd-dee": {},
    }
    for learner, files in work.items():
        repo = here / "student-repos" / learner
        _git(here, "clone", "-q", str(template), str(repo))
        if files:
            _commit(repo / "autograd-course", files, BEFORE)
        _grade_as_ci(here, learner, here / "reports" / f"report-{learner}")
        old = "course 0.0.9 sha256:0000000000000000" if learner == "autograd-ada" else None
        _as_the_deadline_run(here / "reports" / f"report-{learner}" / "report.json", old)
    _commit(here / "student-repos/autograd-bob/autograd-course", {"00_warmup.ipynb": solved}, AFTER)
    _grade_as_ci(here, "autograd-bob", here / "reports-later" / "report-autograd-bob")
    for learner in work:
        _git(here, "clone", "-q", str(here / "student-repos" / learner), str(here / "roster" / learner))
    return here


@pytest.mark.parametrize(("directives", "example"), _blocks())
def test_the_block_runs_as_written(directives, example, class_dir, request):
    if request.node.get_closest_marker("guides") and not _guides_selected(request.config):
        pytest.skip("a block that grades notebooks: run with -m guides (.ci/run does)")
    example.namespace["class_dir"] = str(class_dir)
    for directive in directives:  # Sybil's skip: the next block is skipped, with its reason
        directive.evaluate()
    example.evaluate()


@pytest.mark.guides
def test_the_pipeline_as_the_guides_run_it_gives_every_learner_their_due(class_dir, request):
    """What the blocks above printed: every learner's score, the missing one named, the
    duplicate kept, the old grader's report flagged (and, once regraded, no longer), the score
    that rose after the deadline flagged. Runs after the blocks (same module, in order)."""
    if not _guides_selected(request.config):
        pytest.skip("run with -m guides (.ci/run does)")
    from course import checks

    checks.load_all()
    points = {ex.id: ex.points for ex in checks.all_exercises(0)}
    full, answered = sum(points.values()), points["0.2"]
    collected = [
        done.stdout
        for key, done in OUTPUT.items()
        if key.startswith("docs/grading.md") and "course collect" in done.args[-1]
    ]
    assert len(collected) == 2, list(OUTPUT)
    rows = {line.split()[0]: line for line in collected[0].splitlines()[1:]}
    assert rows["autograd-ada"].split()[1] == f"{full}/{full}" and "regrade" in rows["autograd-ada"]
    assert rows["autograd-bob"].split()[1:3] == [f"{full}/{full}", "yes"]
    assert (
        f"score rose after the deadline: {answered} (graded {DEADLINE_EVE}) -> {full}" in rows["autograd-bob"]
    )
    assert rows["autograd-cy"].split()[1:3] == [f"{answered}/{full}", "no"]  # the duplicate cost nothing
    assert rows["autograd-dee"].split()[1] == f"0/{full}"
    assert "missing: no report" in rows["eve"]
    assert not [r for name, r in rows.items() if name != "autograd-ada" and "regrade" in r]
    after = {line.split()[0]: line for line in collected[1].splitlines()[1:]}
    assert "regrade" not in after["autograd-ada"] and after["autograd-ada"].split()[1] == f"{full}/{full}"
    assert (class_dir / "regraded/autograd-ada/00_warmup.feedback.md").is_file()  # regrade refreshed it
    gradebook = next(
        done.stdout for key, done in OUTPUT.items() if "--expect roster.txt -j 2" in done.args[-1]
    )
    lines = {line.split()[0]: line for line in gradebook.splitlines() if line.startswith("  ")}
    assert "missing: no folder eve/" in lines["eve"] and lines["eve"].split()[1] == "-"
    assert "00_warmup-Copy1.ipynb ignored" in lines["autograd-cy"]


def test_every_skipped_block_says_why_and_every_command_block_is_run():
    """A skip without a reason hides a block; a command block in a language nobody runs
    (``sh``, ``console``) would not be run at all."""
    for name in GUIDES:
        document = SYBIL.parse(ROOT / name)
        for example in document.examples():
            if isinstance(example.region.evaluator, Skipper):
                action, reason = example.parsed
                assert action == "next" and reason and reason.strip('"'), f"{name}:{example.line}"
        text = (ROOT / name).read_text()
        for language in ("sh", "shell", "console", "py", "python3"):
            assert f"```{language}\n" not in text, f"{name} has a ```{language} block: write bash or python"


def test_the_readmes_printed_check_is_what_check_prints():
    """The README's picture of a check is the check's own words for a catalogued wrong answer
    (0.1's double backward), so the first thing a learner reads cannot drift."""
    import re

    from course import checks

    checks.load_all()
    shown = re.search(r'```text\n>>> check\("0\.1"\)\n(.*?)\n```', (ROOT / "README.md").read_text(), re.S)
    assert shown, "README.md lost its printed check"
    ex = checks.get("0.1")
    messages = [checks.grade_answer(ex, w.answer).message for w in ex.wrong]
    assert shown.group(1) in messages
