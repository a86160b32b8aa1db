"""``course grade``: score a learner's notebook (or a folder of them), headless, for CI.

::

    course grade PATH.ipynb [--json OUT] [--junit OUT] [--timeout S] [--cell-timeout S] [--min-score X]
    course grade DIR [--lessons 00,01] [-j N] [...]   # the course's lessons, found in DIR, then a table
    course grade DIR --classroom OUT --learner NAME   # GitHub Classroom's points (course.grading.github_classroom)
    course grade PATH [--extra-cases FILE.py] [--feedback [FILE_OR_DIR]]  # instructor's cases, learner's feedback

Before any learner code runs, the grading process fingerprints the files of the ``course``
package, imports the checks of every lesson it will grade and computes their oracles'
outcomes, and starts the checking server (``course.grading.worker``), which imports the same
checks. Then, for each notebook (the file is only ever read):

1. **Run it** top to bottom in a fresh kernel of this Python environment (nbclient; outputs
   are dropped as they arrive), with a per-cell and a total timeout. This is the learner's
   experience of "Run All": the report lists the cells that raised or timed out. It does
   not decide the score.
2. **Check it**: the checking server forks a process that executes only the notebook's
   definitions, and that process forks one per exercise to run the answer (found by the
   exercise's name) on the visible and hidden cases; they return plain-data outcomes.
3. **Judge** here, in the grading process, which never runs learner code: the worker's
   outcomes are loaded with ``torch.load(weights_only=True)`` and compared with the oracle's;
   a wrong answer gets the hint of the misconception it matches. Nothing here raises: a
   comparison that fails makes that exercise an ``error`` with the reason.

Steps 1 and 2 run at the same time. Afterwards every process that learner code left behind
is killed (the grader is a child subreaper on Linux, so detached processes stay in its
tree), the package's files are checked against the fingerprint (a change voids the grade of
every notebook graded while it happened), and the report is written, last, atomically. It
records what was graded (:mod:`course.grading.provenance`: each notebook's git commit and
that commit's time, read before any learner code runs), when, and by which grader.
Threat model and limits: ``docs/grading.md``.

The jobs live in modules of their own: :mod:`course.grading.options` (the command line),
:mod:`course.grading.plan` (which notebooks of a folder), :mod:`course.grading.session`
(set-up and tear-down, passed explicitly), :mod:`course.grading.notebook` (one notebook),
:mod:`course.grading.judging` (checking and judging), :mod:`course.grading.checker` (the
checking server's client), :mod:`course.grading.report` (the reports); this one ties them
together and writes the reports.

Exit status: 0 when every exercise passed (or the score reaches ``--min-score``, a fraction
of the points, e.g. 0.8), 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import time
from collections.abc import Callable

from course.grading import github_classroom, provenance, signing
from course.grading import report as reporting
from course.grading.feedback import feedback_markdown, feedback_name, feedback_target, markdown_text
from course.grading.files import grader_fingerprint, write_atomically
from course.grading.isolation import no_dump
from course.grading.notebook import grade_in_session, grade_notebook, read_notebook, unreadable_report
from course.grading.options import grade_parser
from course.grading.plan import UsageError, missing_report, plan_folder
from course.grading.processes import command_seconds
from course.grading.report import NotebookReport
from course.grading.session import open_session
from course.grading.untrusted import Untrusted, clean_text, read_regular

__all__ = ["NO_ISOLATION", "NotebookReport", "exit_code", "grade_notebook", "main"]

_LOADED = time.monotonic()  # when this command started (its time is reported)
NO_ISOLATION = "none (supervision)"  # the report's "isolation" when learner code ran under it alone


def main(argv: list[str] | None = None) -> int:
    args = grade_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    no_dump()  # learner code (in a sandbox, without CAP_SYS_PTRACE) cannot read our memory or key
    try:
        key = signing.read_key(args.key_file)  # before any learner code runs; the variable goes
    except OSError as e:
        print(f"course grade: --key-file: {e.strerror or e}", file=sys.stderr)
        return 2
    # nbformat -> jsonschema would build an IRI grammar (rfc3987_syntax) that no notebook check
    # uses: 2-3 s of start-up. Marking it absent makes jsonschema skip that one format check.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    try:  # usage errors first, before anything costly
        plan, missing, ignored = _plan(args)
        extra = _extra_cases(args.extra_cases)
        feedback = _feedback_target(args)
        _write_placeholders(args, plan, feedback)
    except UsageError as e:
        print(f"course grade: {e}", file=sys.stderr)
        return 2
    stamp = _provenance(plan, args.learner)  # before any learner code runs (it could rewrite .git)
    where = _where_learner_code_runs(args, "" if shutil.which("bwrap") else _NOT_INSTALLED)
    if where is _IN_BUBBLEWRAP and any(not isinstance(text, BaseException) for _, text, _ in plan):
        done = _graded_in_sandbox(args, plan, ignored, stamp, key, extra, feedback)
        if isinstance(done, int):
            return done
        where = _where_learner_code_runs(args, done)  # bubblewrap cannot run here after all
    elif where is _IN_BUBBLEWRAP:  # no notebook could be read: no learner code runs, none to isolate
        where = "none needed (no notebook could be read)"
    if isinstance(where, int):
        return where
    summary, reports = _graded_here(args, plan, missing, ignored, extra, stamp["git"])
    summary.update(stamp["report"])
    summary["extra_cases"] = extra.record() if extra else None
    summary["isolation"] = where
    return _finish(summary, reports, args, key, feedback)


def _say(args) -> Callable[[str], None]:
    """Progress on stderr (nothing with ``-q``)."""
    return (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))


def _plan(args) -> tuple[list, list[int], list]:
    """(the notebooks to grade as (path, text, lesson), the lessons missing from a folder, the
    files of a folder not graded, each with why). Raises UsageError: nothing to grade."""
    if args.path.is_dir():
        plan, missing, ignored = plan_folder(args.path, args.lessons)
        if not plan:  # a wrong folder, more likely than a learner who did nothing
            raise UsageError(f"no lesson notebooks in {args.path}")
    elif args.path.is_file():
        text, lesson = read_notebook(args.path, args.lesson)
        if isinstance(text, BaseException) and args.path.suffix != ".ipynb":
            raise UsageError(f"{args.path} is not a notebook (.ipynb): {clean_text(text, 200)}")
        plan, missing, ignored = [(args.path, text, lesson)], [], []
    else:
        raise UsageError(f"no such notebook or folder: {args.path}")
    if args.json == "-" and args.classroom == "-":
        raise UsageError("--json - and --classroom - both want stdout: give one of them a file")
    return plan, missing, ignored


def _write_placeholders(args, plan: list, feedback) -> None:
    """Each output file says "not finished" until the grade is written: from now on a planted
    file, or an earlier run's, counts for nothing. Raises UsageError: one cannot be written."""
    placeholders = {
        args.json: json.dumps(reporting.placeholder()) + "\n",
        args.junit: reporting.junit_placeholder(),
        args.classroom: github_classroom.encode(github_classroom.placeholder()) + "\n",
    }
    outs = [(out, text) for out, text in placeholders.items() if out not in (None, "-")]
    if feedback is not None:
        for path, _, _ in plan:
            heading = f"# Feedback on {markdown_text(path.name, 300)}\n\n"
            outs.append((_feedback_path(feedback, str(path), args.path.is_dir()), heading + _NO_VERDICT))
    for out, text in outs:
        try:
            write_atomically(out, text)
        except OSError as e:
            raise UsageError(f"cannot write {out}: {e.strerror or e}") from None


_NO_VERDICT = "Grading did not finish: no verdict yet.\n"
_NOT_INSTALLED = "bubblewrap is not installed"
_IN_BUBBLEWRAP = "start a sandbox"  # the decision (told apart by identity from any isolation's name)


def _where_learner_code_runs(args, why_not: str) -> str | int:
    """:data:`_IN_BUBBLEWRAP`; or the isolation this process grades under (inside a sandbox,
    the one the grader outside chose; the fallback, said on stderr in one line); or exit
    status 2 (``--sandbox`` where bubblewrap cannot run)."""
    inside = os.environ.get("COURSE_SANDBOX")
    if inside:  # the grader outside chose (course.grading.sandbox): grade here
        return inside
    if args.no_sandbox:
        _say(args)("note: --no-sandbox: learner code runs without isolation (supervision only)")
        return NO_ISOLATION
    if not why_not:
        return _IN_BUBBLEWRAP
    if args.sandbox:
        print(
            f"course grade: --sandbox: {why_not}; learner code was not run (docs/grading.md)", file=sys.stderr
        )
        return 2
    print(
        f"course grade: WARNING: learner code runs WITHOUT isolation ({why_not}; supervision only): "
        f"{_how_to_get_it(why_not)} (docs/grading.md)",
        file=sys.stderr,
    )
    return NO_ISOLATION


def _how_to_get_it(why_not: str) -> str:
    if not sys.platform.startswith("linux"):
        return "bubblewrap runs on Linux only; grade in a Linux container to isolate it"
    if why_not == _NOT_INSTALLED:
        return "apt-get install bubblewrap to grade in a sandbox"
    return "in a container, give it the privilege to make namespaces (docker run --privileged)"


def _graded_here(args, plan, missing, ignored, extra, git: dict) -> tuple[dict, list[NotebookReport]]:
    """(the summary, the reports) of grading ``plan`` in this process's session: learner code
    in its own processes (course.grading.worker, the kernel), under supervision. ``git``: each
    notebook's git record by path (read before any learner code ran)."""
    from course.checks.extra import applied

    say = _say(args)
    options = dict(timeout=args.timeout, cell_timeout=args.cell_timeout, run=not args.no_run)
    lessons = {lesson for _, _, lesson in plan if lesson is not None} | set(missing)
    say(f"preparing the grader ({len(lessons)} lesson(s)) before any notebook code runs")
    with applied(extra), open_session(lessons, sequential=args.jobs == 1, extra=extra) as session:
        _forget_secret(extra)
        reports = [r for r in (missing_report(session, args.path, n) for n in missing) if r.exercises]
        if not args.path.is_dir():
            reports.append(grade_in_session(session, *plan[0], progress=say, jobs=None, **options))
        else:
            reports += _graded_folder(session, plan, args, options)
    reports.sort(key=lambda r: (r.lesson if r.lesson is not None else 99, r.path))
    for r in reports:
        r.git = git.get(r.path)
    summary = reporting.summary(reports, ignored, session.killed, session.tampered, command_seconds(_LOADED))
    return summary, reports


def _graded_folder(session, plan: list, args, options: dict) -> list[NotebookReport]:
    """A folder's notebooks, ``-j`` at once, with a progress bar (not with ``-q``)."""
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [
            pool.submit(grade_in_session, session, p, text, lesson, progress=None, jobs=None, **options)
            for p, text, lesson in plan
        ]
        return [
            f.result() for f in tqdm(futures, desc="grading", unit="nb", disable=args.quiet, file=sys.stderr)
        ]


def _forget_secret(extra) -> None:
    """In a sandbox, the instructor's extra cases file is removed once this process and the
    checking server have loaded it (``open_session`` waits for the server): before any learner
    code runs, which must not read it (course.grading.sandbox.run: ``secret``)."""
    if extra is not None and os.environ.get("COURSE_SANDBOX") == "bubblewrap":
        with contextlib.suppress(OSError):
            os.unlink(extra.path)


def _graded_in_sandbox(args, plan, ignored, stamp, key, extra, feedback) -> int | str:
    """The grade made in bubblewrap (course.grading.sandbox.grade), finished here: the exit
    status; or, when it failed because bubblewrap cannot run here, why (before any learner
    code ran). Bubblewrap is tried without asking first: asking costs a sandbox that starts
    a Python, a tenth of a second of CPU in every grade, so it is asked only after a failure."""
    from course.grading.sandbox import why_no_sandbox
    from course.grading.sandbox.grade import grade_in_sandbox

    say = _say(args)
    say(f"grading in bubblewrap ({len(plan)} notebook(s)); this process writes the reports")
    try:
        summary, isolation = grade_in_sandbox(args, plan, args.path.is_dir())
    except RuntimeError as e:
        why_not = why_no_sandbox()
        if why_not:
            return why_not
        print(f"course grade: {clean_text(e, 500)}", file=sys.stderr)
        return 1
    fields = set(NotebookReport.__dataclass_fields__)
    reports = [NotebookReport(**{k: v for k, v in nb.items() if k in fields}) for nb in summary["notebooks"]]
    unreadable = {
        lesson: (path, text, lesson) for path, text, lesson in plan if isinstance(text, BaseException)
    }
    # one that could not even be copied in (a link, a FIFO) is "missing" there: an error here, as
    # without a sandbox (one copied in, such as broken JSON, the grader inside reports itself)
    missing_there = {r.lesson for r in reports if r.note and r.lesson in unreadable}
    if missing_there:
        reports = [r for r in reports if not (r.note and r.lesson in missing_there)]
        reports += [unreadable_report(*unreadable[lesson]) for lesson in missing_there]
        reports.sort(key=lambda r: (r.lesson if r.lesson is not None else 99, r.path))
        summary |= reporting.summary(reports, ignored, summary["killed"], summary["tampering"])
    for r in reports:
        r.git = stamp["git"].get(r.path)
    summary["notebooks"] = [r.to_json() for r in reports]
    summary["ignored"] = list(ignored)
    summary["seconds"] = round(command_seconds(_LOADED), 2)
    summary.update(stamp["report"])
    summary["extra_cases"] = extra.record() if extra else None
    summary["isolation"] = isolation
    return _finish(summary, reports, args, key, feedback)


def _finish(summary: dict, reports: list[NotebookReport], args, key, feedback) -> int:
    if key is not None:
        summary = signing.sign(summary, key)
    _write_reports(summary, reports, args)
    if feedback is not None:
        _write_feedback(summary, feedback, args.path.is_dir())
    return exit_code(summary, args.min_score)


def _provenance(plan: list, learner: str | None) -> dict:
    """What the report records about the work graded: each notebook's git commit and its time
    (None outside git), the learner, when, and by which grader (its checks' fingerprint)."""
    found = {}
    for path, _, _ in plan:
        with contextlib.suppress(OSError, Untrusted):
            found[str(path)] = provenance.git_record(path, read_regular(path))
    report = {"graded_at": provenance.now_utc(), "grader_fingerprint": grader_fingerprint()}
    if learner is not None:
        report["learner"] = clean_text(learner, 200)
    return {"git": found, "report": report}


def _extra_cases(path):
    """The instructor's extra cases (``--extra-cases FILE``), loaded before any learner code."""
    if path is None:
        return None
    from course.checks.extra import ExtraCasesError, load_extra_cases

    try:
        return load_extra_cases(path.resolve())
    except ExtraCasesError as e:
        raise UsageError(f"--extra-cases: {e}") from None


def _feedback_target(args):
    if args.feedback is None:
        return None
    try:
        return feedback_target(args.feedback, args.path.is_dir(), [args.json, args.junit])
    except ValueError as e:
        raise UsageError(str(e)) from None


def _write_feedback(summary: dict, target, folder: bool) -> None:
    """One Markdown feedback file per graded notebook (not for a lesson missing from a folder)."""
    graded = [nb for nb in summary["notebooks"] if not nb.get("note")]
    for nb in graded:
        write_atomically(
            _feedback_path(target, nb["path"], folder), feedback_markdown(nb, summary.get("extra_cases"))
        )


def _feedback_path(target, notebook: str, folder: bool):
    """The feedback file of ``notebook``: in the folder ``target``, or ``target`` itself."""
    return target / feedback_name(notebook) if folder or target.is_dir() else target


def _write_reports(summary: dict, reports: list[NotebookReport], args) -> None:
    """stdout, then the files (last, each written atomically). A closed stdout is not an error."""
    try:
        if args.json == "-":
            sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        elif args.classroom == "-":
            sys.stdout.write(github_classroom.encode(github_classroom.runner_result(summary)) + "\n")
        elif args.path.is_dir():
            reporting.print_table(reports)
        else:
            reporting.print_notebook(reports[0])
        if "-" not in (args.json, args.classroom):
            reporting.print_footer(summary)
        sys.stdout.flush()
    except BrokenPipeError:  # `course grade ... | head`: the reader left; the files still matter
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    if args.json and args.json != "-":
        write_atomically(args.json, json.dumps(summary, indent=2) + "\n")
    if args.classroom and args.classroom != "-":
        write_atomically(
            args.classroom, github_classroom.encode(github_classroom.runner_result(summary)) + "\n"
        )
    if args.junit and args.junit != "-":
        buffer = io.StringIO()
        reporting.junit(summary).write(buffer, encoding="unicode", xml_declaration=True)
        write_atomically(args.junit, buffer.getvalue())


def exit_code(summary: dict, min_score: float | None = None) -> int:
    """0 when every exercise passed, or, with ``min_score``, when score/max reaches it; else 1.
    Tampering with the course package is never a pass.

    Example:
        >>> exit_code({"all_passed": False, "fraction": 0.75}), exit_code({"all_passed": False, "fraction": 0.75}, 0.7)
        (1, 0)
    """
    if summary.get("tampering"):
        return 1
    ok = summary["all_passed"] if min_score is None else summary["fraction"] >= min_score
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
