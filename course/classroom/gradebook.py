"""`course gradebook`: one table for a whole class, and the misconceptions the class met.

``ROSTER`` holds one folder per learner (the folder's name is the learner). Each folder holds
that learner's notebooks, and maybe the signed ``course grade --json`` report a CI job made
for them (format ``course-grade/1``, signed with the instructor's key: ``--key-file`` or
``$COURSE_GRADE_KEY``): a report that checks, for this folder's learner, with every notebook
it graded there at the bytes it graded, wins (nothing is graded again)::

    roster/
      ada/      00_warmup.ipynb 01_autograd_graph.ipynb ...
      alan/     autograd-course/00_warmup.ipynb ...   # a clone of the Classroom template, a hub home
      grace/    autograd-course/... report.json      # signed by CI for these notebooks; a hand-written,
                                                      # copied or stale one is ignored, with the reason
      linus/                         # empty: listed as "no lesson notebook", never a silent 0

The notebooks are those of ``<learner>/`` or, when it holds none, of
``<learner>/autograd-course/`` (the folder ``course start`` makes, in the Classroom template
and in a hub home). A second notebook of one lesson (JupyterLab's ``00_warmup-Copy1.ipynb``)
is ignored and named in the row's note: the lesson's own ``NN_slug.ipynb`` is graded.
``--expect FILE`` (one learner a line) names who should have handed work in: a learner with
no folder gets a row that says so.

Notebooks are graded by ``course grade --no-run`` itself, one learner at a time (``-j N``
learners at once), each in a sandbox of its own (``course.grading.sandbox.run_untrusted``:
bubblewrap, nothing of the host but an allow-list; without it a loud warning and a separate
process with limits),
see the NOTE below and docs/grading.md; it skips the headless "Run All", which never changes
a score. Its reports are cached in ``ROSTER/.course-gradebook/``, signed, under the hash of
the learner's notebooks, the lessons chosen and the grader's fingerprint (version and
checks): run it again after every push and only changed learners are graded.

What it writes:

- stdout: per exercise, the pass rate and the misconceptions met (the known wrong answer a
  learner's answer matched, with its hint), most common first; learners who did not attempt
  the exercise are counted apart;
- ``--csv OUT``: one row per learner (``learner`` first), one column per exercise id with the
  points scored, then ``total``, ``max`` and ``note`` (why a row is empty). An exercise the
  learner did not attempt is an empty cell; one attempted and failed (or that raised) is ``0``,
  so a spreadsheet's ``COUNTBLANK`` counts who has not started and ``AVERAGE`` averages over
  those who tried;
- ``--json OUT``: the same as stdout, as data (format ``course-gradebook/1``);
- ``--html OUT``: the report with a bar chart of pass rates, readable without Jupyter.

A misconception is recognised by the hint in the report: the grader gives a wrong answer the
hint of the known wrong answer it behaves like (``course.checks``), and the gradebook looks
that hint up in the exercise's catalogue.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course.classroom.gradebook_report import Report, build, text, write_csv, write_html, write_json
from course.classroom.learner_grades import CACHE_DIR, REPORT_LIMIT, cache_key, collect, grade_sandboxed
from course.classroom.roster import (
    Learner,
    expected_learners,
    learner_notebooks,
    notebook_folder,
    same_learner,
)
from course.grading.options import positive_seconds
from course.grading.signing import read_key

__all__ = [
    "CACHE_DIR",
    "REPORT_LIMIT",
    "Learner",
    "Report",
    "build",
    "cache_key",
    "collect",
    "expected_learners",
    "grade_sandboxed",
    "learner_notebooks",
    "main",
    "notebook_folder",
    "same_learner",
]


def _lessons(value: str | None) -> set[int] | None:
    if not value:
        return None
    try:
        return {int(part) for part in value.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lessons takes numbers like 00,01, not {value!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course gradebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("roster", type=Path, help="a folder with one folder per learner")
    parser.add_argument(
        "--csv", type=Path, help="one row per learner, one column per exercise (points; empty: not attempted)"
    )
    parser.add_argument("--json", type=Path, help="the report as JSON")
    parser.add_argument("--html", type=Path, help="the report with a pass-rate chart, as one HTML file")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="learners graded at once (default 1)")
    parser.add_argument("--lessons", type=_lessons, default=None, help="only these lessons, e.g. 00,01")
    parser.add_argument(
        "--timeout", type=positive_seconds, default=300, help="seconds per notebook run (default 300)"
    )
    parser.add_argument(
        "--key-file",
        default=None,
        help="the key CI signed reports with (-: stdin; default $COURSE_GRADE_KEY)",
    )
    parser.add_argument(
        "--extra-cases",
        type=Path,
        default=None,
        metavar="FILE.py",
        help="the instructor's extra hidden cases",
    )
    parser.add_argument(
        "--expect",
        type=Path,
        default=None,
        metavar="FILE",
        help="who should have handed work in: one learner a line (or a CSV, name first)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return parser


def _refusal(args: argparse.Namespace) -> str | None:
    """Why the command cannot start (a missing folder, an unknown lesson, an output that is a
    folder), said before anyone is graded; ``None`` when it can."""
    if args.expect is not None and not args.expect.is_file():
        return f"--expect: no such file: {args.expect}"
    if not args.roster.is_dir():
        return f"no such roster folder: {args.roster}"
    if args.jobs < 1:
        return "-j needs a positive number of learners"
    from course.grading.plan import lesson_numbers

    unknown = sorted(set(args.lessons or ()) - set(lesson_numbers()))
    if unknown:  # as `course grade` says it: a typo must not print a 0/0 table
        return f"--lessons: the course has no lesson {', '.join(f'{n:02d}' for n in unknown)}"
    for out in (args.csv, args.json, args.html):
        if out is not None and not out.parent.is_dir():
            return f"the folder for {out} does not exist"
        if out is not None and out.is_dir():
            return f"{out} is a folder; give a file name"
    return None


def _secrets(args: argparse.Namespace) -> tuple[bytes | None, Path | None]:
    """The signing key and the extra cases' file, each checked now (``OSError`` or
    ``ExtraCasesError`` name what is wrong)."""
    key = read_key(args.key_file)
    extra = args.extra_cases.resolve() if args.extra_cases else None
    if extra is not None:
        from course.checks.extra import load_extra_cases

        load_extra_cases(extra)
    return key, extra


def _warn_about(learners: list) -> int:
    """The two warnings the table's reader must see (no sandbox; nothing to grade); 1 when no
    learner had anything to grade (a wrong folder, more likely than a class that did nothing)."""
    unsandboxed = [x.name for x in learners if x.isolation.startswith("none")]
    if unsandboxed:
        print(
            f"course gradebook: WARNING: bubblewrap is not available here, so {len(unsandboxed)} learner(s) were "
            "graded WITHOUT a sandbox (a separate process, a private copy and resource limits only): a hostile "
            "notebook could read or change other learners' files. Install bubblewrap (apt-get install bubblewrap) "
            "or run the gradebook in a container (docs/grading.md).",
            file=sys.stderr,
        )
    empty = [x.name for x in learners if x.empty]
    if empty:
        print(
            f"course gradebook: nothing to grade for {len(empty)} of {len(learners)} learner(s): "
            f"{', '.join(empty)} (their rows say why; a row of '-' is not a score)",
            file=sys.stderr,
        )
    return 1 if len(empty) == len(learners) else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    refusal = _refusal(args)
    if refusal:
        print(f"course gradebook: {refusal}", file=sys.stderr)
        return 2
    from course.checks.extra import ExtraCasesError

    try:
        key, extra = _secrets(args)
    except OSError as e:
        print(f"course gradebook: --key-file: {e.strerror or e}", file=sys.stderr)
        return 2
    except ExtraCasesError as e:  # its errors now, before any learner is graded
        print(f"course gradebook: --extra-cases: {e}", file=sys.stderr)
        return 2
    expected = expected_learners(args.expect) if args.expect else []
    learners = collect(args.roster, args.lessons, args.jobs, args.timeout, args.quiet, key, extra, expected)
    if not learners:
        print(f"course gradebook: no learner folders in {args.roster}", file=sys.stderr)
        return 2
    report = build(learners, args.lessons)
    code = _warn_about(learners)
    print(text(report))
    for out, write in ((args.csv, write_csv), (args.json, write_json), (args.html, write_html)):
        if out is None:
            continue
        try:
            write(report, out)
        except OSError as e:  # every learner is graded: say what could not be written, keep the rest
            print(f"course gradebook: cannot write {out}: {e.strerror or e}", file=sys.stderr)
            code = 1
    return code
