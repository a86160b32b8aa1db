"""``course grade``: score a learner's notebook (or a folder of them), headless, for CI.

::

    course grade PATH.ipynb [--json OUT] [--junit OUT] [--timeout S] [--cell-timeout S] [--min-score X]
    course grade DIR [--lessons 00,01] [-j N] [...]   # the course's lessons, found in DIR, then a table

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
every notebook graded while it happened), and the report is written, last, atomically.
Threat model and limits: ``docs/grading.md``.

Exit status: 0 when every exercise passed (or the score reaches ``--min-score``, a fraction
of the points, e.g. 0.8), 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course.grading import report as reporting
from course.grading import signing
from course.grading.checker import Checker, run_worker
from course.grading.options import grade_parser
from course.grading.isolation import child_env, no_dump
from course.grading.report import NotebookReport
from course.grading.untrusted import Untrusted, clean_text, read_regular
from course.grading.processes import become_subreaper, command_seconds, descendants, end_processes

__all__ = ["NotebookReport", "exit_code", "grade_notebook", "main"]

_LESSON_FILE = re.compile(r"^(\d\d)_")
_OFFERED = re.compile(r"\.updated(-\d+)?\.ipynb$")  # the copies `course update` offers
_EXERCISE_ID = re.compile(r"""(?:check\(\s*["']|exercise )(\d+)\.\d+""")
_judge_lock = threading.Lock()  # oracles and hint matching reseed global RNGs: one at a time
_expected_cache: dict[str, list] = {}
_session: "_Session | None" = None  # the one `course grade` runs under (main() sets it)


def _lesson_of(path: Path, sources: list[str]) -> int | None:
    m = _LESSON_FILE.match(path.name)
    if m:
        return int(m.group(1))
    found = {int(x) for src in sources for x in _EXERCISE_ID.findall(src)}
    return found.pop() if len(found) == 1 else None


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _code_cells(text: str) -> list[list]:
    """[index, source] of every code cell (plain JSON: no nbformat needed to start checking)."""
    return [[i, _source(c)] for i, c in enumerate(json.loads(text)["cells"]) if c.get("cell_type") == "code"]


def _one_line(e: BaseException) -> str:
    text = clean_text(f"{type(e).__name__}: {e}", limit=400).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


_LOADED = time.monotonic()


# --- before any learner code: fingerprint, imports, oracles, the checking server ------------


def _package_digest() -> dict[str, str]:
    """sha256 of every file of the ``course`` package (bytecode caches aside), by relative path."""
    import course

    root = Path(course.__file__).resolve().parent
    digest = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            try:
                digest[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
            except OSError as e:
                digest[p.relative_to(root).as_posix()] = f"unreadable: {type(e).__name__}"
    return digest


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _expected(ex) -> list:
    from course import checks

    if ex.id not in _expected_cache:
        _expected_cache[ex.id] = checks.expected_outcomes(ex)
    return _expected_cache[ex.id]


def _prepare_judge(lessons: set[int]) -> None:
    """Import the checks of ``lessons`` and run their oracles and comparisons once, so that
    nothing the judge uses is first loaded from disk after learner code ran."""
    import torch

    from course import checks

    for n in sorted(lessons):
        try:
            exercises = checks.all_exercises(n)
        except Exception:  # a broken lesson module: its exercises are errors when judged
            continue
        for ex in exercises:
            try:
                expected = _expected(ex)
                checks.judge(ex, expected, expected, dict(ex.budget))  # the passing path: no hint search
            except Exception:  # the same failure comes back when judging, as an `error`
                pass
    buffer = io.BytesIO()  # the weights-only unpickler, loaded now
    torch.save({"yours": [{"kind": "value", "value": torch.zeros(1)}]}, buffer)
    buffer.seek(0)
    torch.load(buffer, weights_only=True)


class _Session:
    """What one ``course grade`` sets up before any learner code runs, and ends after.

    ``sequential``: notebooks are graded one at a time, so the processes a notebook leaves
    behind are killed before the next one starts (with ``-j N`` they are killed at the end).
    """

    def __init__(self, lessons: set[int], sequential: bool = True):
        self.tmp = Path(tempfile.mkdtemp(prefix="course-grade-"))
        (self.tmp / "cwd").mkdir()  # where the grader's own processes start: nothing in it
        (self.tmp / "tmp").mkdir()  # TMPDIR of learner code: removed with the session
        self.sequential = sequential
        self.subreaper = become_subreaper()
        self.keep = set(descendants())  # what was running before us is not ours to end
        self.baseline = _package_digest()
        self.killed: list[str] = []
        self.checker = Checker(lessons, self.tmp) if hasattr(os, "fork") else None
        try:
            _prepare_judge(lessons)
        finally:
            if self.checker:
                self.checker.wait_ready()

    def end_leftovers(self) -> list[str]:
        """Kill every process below us that is not the checking server (nor was here before)."""
        keep = self.keep | ({self.checker.proc.pid} if self.checker and self.checker.proc.poll() is None else set())
        killed = end_processes(keep)
        self.killed += killed
        return killed

    def close(self) -> list[str]:
        """Stop the checking server, end every leftover process; the files that changed."""
        if self.checker:
            self.checker.stop()
        self.end_leftovers()
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)
        return _changed(self.baseline, _package_digest())


@contextlib.contextmanager
def _session_for(lessons: set[int], sequential: bool = True):
    global _session
    session = _Session(lessons, sequential)
    previous, _session = _session, session
    try:
        yield session
    finally:
        _session = previous
        session.tampered = session.close()


# --- checking and judging ------------------------------------------------------------------


def _error_result(ex, why: str, seconds: float = 0.0) -> dict:
    return {"id": ex.id, "name": ex.name, "title": ex.title, "status": "error", "points": ex.points, "score": 0,
            "cases_passed": 0, "cases_total": len(ex.all_cases),
            "message": clean_text(f"[{ex.id} {ex.name}] error: {why}", 4000),
            "hint": "", "cost": {}, "budget": dict(ex.budget), "seconds": round(seconds, 2),
            "timed_out": why.startswith("timeout"), "revealed": False}


def _judge(ex, report: dict, seconds: float, revealed: bool = False) -> dict:
    """The verdict on one exercise, from its worker report (this process runs no learner code).
    ``revealed``: the notebook asks to see this prediction's answer (``check(id, reveal=True)``),
    so it is reported as revealed, worth no points.
    Never raises: a comparison that fails makes the exercise an ``error`` with the reason."""
    from course import checks

    try:
        with _judge_lock:
            expected = _expected(ex)
            if "failure" not in report and len(report["yours"]) != len(expected):
                report = {"failure": "the checking process reported the wrong number of cases"}
            if "failure" in report:
                return _error_result(ex, report["failure"], seconds)
            result = checks.judge(ex, report["yours"], expected, report.get("cost") or {}, revealed)
            if result.status != "passed" and report.get("notes"):
                result.message += "\n  notes:    " + "\n            ".join(report["notes"][:5])
        d = result.to_json()
    except Exception as e:
        return _error_result(ex, f"the grader could not compare this answer ({_one_line(e)})", seconds)
    d["message"], d["hint"] = clean_text(d["message"], 4000), clean_text(d.get("hint", ""), 1000)
    d["seconds"] = round(seconds, 2)
    d["timed_out"] = "timeout" in d["message"] or "did not finish within" in d["message"]
    return d


def _check_exercises(exercises: list, cells: list, cwd: Path, cell_timeout: float, limit: float,
                     tmp: Path, jobs: int) -> list[dict]:
    """Check every exercise (the session's checking server, else a worker per exercise) and judge."""
    start = time.monotonic()
    checker = _session.checker if _session else None
    if checker:
        reports = checker.check(exercises, cells, cwd, cell_timeout, limit, tmp)
    else:  # pragma: no cover (Windows: no fork)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            parts = pool.map(lambda ex: run_worker([ex], cells, cwd, cell_timeout, limit, tmp), exercises)
            reports = {k: v for part in parts for k, v in part.items()}
    seconds = time.monotonic() - start
    from course import checks

    asked = set().union(*(checks.reveals_in(src) for _, src in cells))  # cell by cell: magics do not parse
    return [_judge(ex, reports[ex.id], seconds, ex.id in asked) for ex in exercises]


def _grade_exercise(ex, cells, cwd, cell_timeout, limit, tmp) -> dict:
    """Check and judge one exercise alone (what the tests use)."""
    if _session is not None:
        return _check_exercises([ex], cells, cwd, cell_timeout, limit, tmp, jobs=1)[0]
    with _session_for({ex.lesson}):
        return _check_exercises([ex], cells, cwd, cell_timeout, limit, tmp, jobs=1)[0]


def _not_attempted(ex) -> dict:
    return _judge(ex, {"yours": [{"kind": "not attempted"} for _ in ex.all_cases]}, 0.0)


# --- one notebook --------------------------------------------------------------------------


def grade_notebook(
    path: Path,
    timeout: float = 300,
    cell_timeout: float = 60,
    lesson: int | None = None,
    jobs: int | None = None,
    progress=None,
    run: bool = True,
) -> NotebookReport:
    """Grade one notebook. Never writes to ``path``; never raises for a bad notebook.

    Called on its own (``course progress``, tests), it sets up a grading session of its own
    (fingerprint, oracles, checking server) for this lesson and ends every process the
    notebook left behind before returning.

    Args:
        path: the learner's notebook.
        timeout: seconds for the whole notebook run (and, separately, for checking its answers).
        cell_timeout: seconds per cell.
        lesson: the lesson number, when the file name does not start with it (``NN_``).
        jobs: worker processes at once where there is no ``fork`` (default: the CPU count).
        progress: ``progress(text)`` is called with one-line updates (stderr in the CLI).
        run: run the notebook in a kernel too (False: score only; ``report.run`` stays empty).

    Returns:
        A :class:`NotebookReport`.
    """
    path = Path(path)
    text, lesson = _read(path, lesson)
    options = dict(timeout=timeout, cell_timeout=cell_timeout, jobs=jobs, progress=progress, run=run)
    if _session is not None:
        return _grade(path, text, lesson, **options)
    with _session_for({lesson} if lesson is not None and _has_exercises(lesson) else set()) as session:
        report = _grade(path, text, lesson, **options)
    if session.tampered:
        _void(report, session.tampered)
    return report


def _read(path: Path, lesson: int | None) -> tuple[str | BaseException, int | None]:
    """The notebook's text (or why it cannot be read) and its lesson (None if unknown)."""
    try:
        text: str | BaseException = read_regular(path).decode("utf-8")
        sources = [src for _, src in _code_cells(text)]
    except Exception as e:
        text, sources = e, []
    return text, lesson if lesson is not None else _lesson_of(path, sources)


def _has_exercises(lesson: int) -> bool:
    from course import checks

    try:
        return bool(checks.all_exercises(lesson))
    except Exception:
        return False


def _void(report: NotebookReport, changed: list[str]) -> None:
    """Tampering: the course package changed while this notebook was graded; no score counts."""
    files = ", ".join(changed[:5]) + (", ..." if len(changed) > 5 else "")
    report.error = f"void: the course package changed while this notebook was graded (tampering): {files}"
    for e in report.exercises:
        e.update(status="error", score=0, message=f"[{e['id']} {e['name']}] error: void, the course package "
                                                  "changed while this notebook was graded")


def _grade(path: Path, text: str | BaseException, lesson: int | None, timeout: float, cell_timeout: float,
           jobs: int | None, progress, run: bool) -> NotebookReport:
    """Grade one notebook inside the current session; voids it if the package changed meanwhile."""
    session = _session
    before = _package_digest()
    start = time.monotonic()
    report = NotebookReport(clean_text(path, 500), lesson)
    with contextlib.suppress(OSError, Untrusted):  # the bytes graded, readable or not as a notebook
        report.sha256 = signing.notebook_hash(read_regular(path))
    try:
        _grade_into(report, path, text, timeout, cell_timeout, jobs, progress or (lambda text: None), run)
    except Exception as e:  # never lose the other notebooks' results
        report.error = f"the grader failed on this notebook: {_one_line(e)}"
    _keep_every_exercise(report)
    if session.sequential:
        report.killed = session.end_leftovers()
    changed = _changed(before, _package_digest())
    if changed:
        _void(report, changed)
    report.seconds = round(time.monotonic() - start, 2)
    return report


def _keep_every_exercise(report: NotebookReport) -> None:
    """A notebook the grader failed on keeps every exercise of its lesson in the maximum, as
    an ``error`` scored 0 (a failure must never shrink what the score is out of)."""
    from course import checks

    if report.lesson is None or not _has_exercises(report.lesson):
        return
    have = {e.get("id") for e in report.exercises}
    why = report.error or "the grader has no result for this exercise"
    report.exercises += [_error_result(ex, why) for ex in checks.all_exercises(report.lesson) if ex.id not in have]


def _grade_into(report: NotebookReport, path: Path, text, timeout, cell_timeout, jobs, say, run) -> None:
    from course import checks

    lesson = report.lesson
    if isinstance(text, BaseException):
        report.error = f"cannot read the notebook: {_one_line(text)}"
        if lesson is not None and _has_exercises(lesson):
            report.exercises = [_error_result(ex, "the notebook cannot be read") for ex in checks.all_exercises(lesson)]
        return
    if lesson is None:
        report.error = "cannot tell which lesson this is: name it NN_slug.ipynb or pass --lesson N"
        return
    exercises = checks.all_exercises(lesson) if _has_exercises(lesson) else []
    if not exercises:
        report.error = f"lesson {lesson} has no registered exercises"
        return
    cells = _code_cells(text)
    say(f"{path.name}: " + (f"running {len(cells)} code cells, " if run else "") + f"checking {len(exercises)} exercises")
    cwd = path.resolve().parent
    with ThreadPoolExecutor(max_workers=1) as pool:
        checking = pool.submit(_check_exercises, exercises, cells, cwd, cell_timeout, timeout, _session.tmp,
                               jobs or os.cpu_count() or 2)
        if run:
            report.run = _run_in_kernel(text, cwd, cell_timeout, timeout, child_env(_session.tmp / "tmp"))
            say(f"{path.name}: notebook run done, waiting for the checks")
        report.exercises = checking.result()


def _run_in_kernel(text: str, cwd: Path, cell_timeout: float, timeout: float, env: dict) -> dict:
    """Step 1, the learner's "Run All": what raised, what timed out (never the score)."""
    try:
        import nbformat

        from course.grading.kernel import run_notebook

        with warnings.catch_warnings():  # a notebook without cell ids is fine to grade
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
        run = run_notebook(nb, cwd, cell_timeout=cell_timeout, total_timeout=timeout, env=env)
    except Exception as e:  # the kernel would not start, for example
        return {"failure": _one_line(e)}
    return {
        "code_cells": len(run.cells), "seconds": round(run.seconds, 2),
        "errors": [{"cell": c.index, "error": clean_text(c.error)} for c in run.cells if c.status == "error"],
        "timeouts": [{"cell": c.index, "error": clean_text(c.error)} for c in run.cells if c.status == "timeout"],
        "skipped": sum(c.status == "skipped" for c in run.cells),
        "total_timed_out": run.total_timed_out, "kernel_died": run.kernel_died,
    }


# --- a folder: the course's lessons ---------------------------------------------------------


class _Usage(Exception):
    """A usage error: exit 2 with this message, before any grading."""


def _folder_plan(folder: Path, only: set[int] | None) -> tuple[list, list[int], list[dict]]:
    """(notebooks to grade as (path, text, lesson), lessons with no notebook, ignored files).

    Raises:
        _Usage: two notebooks of the same lesson.
    """
    course_lessons = _lesson_files()
    wanted = sorted(only) if only is not None else course_lessons
    unknown = sorted(set(wanted) - set(course_lessons))
    if unknown:
        raise _Usage(f"--lessons: the course has no lesson {', '.join(f'{n:02d}' for n in unknown)}")
    found: dict[int, list] = {}
    ignored = []
    for p in sorted(folder.glob("*.ipynb")):
        if p.name.startswith("."):
            continue
        if _OFFERED.search(p.name):
            ignored.append({"path": clean_text(p, 500), "reason": "a copy offered by `course update`, not graded"})
            continue
        text, lesson = _read(p, None)
        if lesson is None:
            ignored.append({"path": clean_text(p, 500), "reason": "not a lesson (name it NN_slug.ipynb)"})
        elif lesson not in wanted:
            why = "not in --lessons" if lesson in course_lessons else f"the course has no lesson {lesson:02d}"
            ignored.append({"path": clean_text(p, 500), "reason": why})
        else:
            found.setdefault(lesson, []).append((p, text, lesson))
    twins = {n: entries for n, entries in found.items() if len(entries) > 1}
    if twins:
        lines = [f"  lesson {n:02d}: " + ", ".join(p.name for p, _, _ in entries) for n, entries in sorted(twins.items())]
        raise _Usage(f"more than one notebook for the same lesson in {folder}:\n" + "\n".join(lines) +
                     "\nKeep one per lesson (or grade them one at a time: course grade FILE.ipynb).")
    return [found[n][0] for n in sorted(found)], [n for n in wanted if n not in found], ignored


def _missing_report(folder: Path, lesson: int) -> NotebookReport:
    from course import checks

    report = NotebookReport(str(folder / f"{lesson:02d}_*.ipynb"), lesson,
                            note="no notebook for this lesson: every exercise counts as not attempted")
    report.exercises = [_not_attempted(ex) for ex in checks.all_exercises(lesson)]
    return report


def _lesson_files() -> list[int]:
    """The lessons that have a check module (``course/checks/lessonNN.py``), without importing them."""
    import course

    folder = Path(course.__file__).resolve().parent / "checks"
    return sorted(int(m.group(1)) for p in folder.glob("lesson*.py") if (m := re.fullmatch(r"lesson(\d\d)\.py", p.name)))


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
    say = (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    try:  # usage errors first, before anything costly
        if args.path.is_dir():
            plan, missing, ignored = _folder_plan(args.path, args.lessons)
            if not plan:  # a wrong folder, more likely than a learner who did nothing
                raise _Usage(f"no lesson notebooks in {args.path}")
        elif args.path.is_file():
            text, lesson = _read(args.path, args.lesson)
            plan, missing, ignored = [(args.path, text, lesson)], [], []
        else:
            raise _Usage(f"no such notebook or folder: {args.path}")
    except _Usage as e:
        print(f"course grade: {e}", file=sys.stderr)
        return 2
    placeholders = {args.json: json.dumps(reporting.placeholder()) + "\n",
                    args.junit: reporting.junit_placeholder()}
    for out in (args.json, args.junit):  # from now on a planted file counts for nothing
        if out not in (None, "-"):
            try:
                reporting.write_atomically(out, placeholders[out])
            except OSError as e:
                print(f"course grade: cannot write {out}: {e.strerror or e}", file=sys.stderr)
                return 2
    options = dict(timeout=args.timeout, cell_timeout=args.cell_timeout, run=not args.no_run)
    lessons = {lesson for _, _, lesson in plan if lesson is not None} | set(missing)
    say(f"preparing the grader ({len(lessons)} lesson(s)) before any notebook code runs")
    with _session_for(lessons, sequential=args.jobs == 1) as session:
        reports = [r for r in (_missing_report(args.path, n) for n in missing) if r.exercises]
        if not args.path.is_dir():
            reports.append(_grade(*plan[0], progress=say, jobs=None, **options))
        else:
            from tqdm import tqdm

            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                futures = [pool.submit(_grade, p, text, lesson, progress=None, jobs=None, **options)
                           for p, text, lesson in plan]
                reports += [f.result() for f in tqdm(futures, desc="grading", unit="nb", disable=args.quiet,
                                                     file=sys.stderr)]
    reports.sort(key=lambda r: (r.lesson if r.lesson is not None else 99, r.path))
    summary = reporting.summary(reports, ignored, session.killed, session.tampered, command_seconds(_LOADED))
    if key is not None:
        summary = signing.sign(summary, key)
    _report(summary, reports, args)
    return exit_code(summary, args.min_score)


def _report(summary: dict, reports: list[NotebookReport], args) -> None:
    """stdout, then the files (last, each written atomically). A closed stdout is not an error."""
    try:
        if args.json == "-":
            sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        elif args.path.is_dir():
            reporting.print_table(reports)
        else:
            reporting.print_notebook(reports[0])
        if args.json != "-":
            reporting.print_footer(summary)
        sys.stdout.flush()
    except BrokenPipeError:  # `course grade ... | head`: the reader left; the files still matter
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    if args.json and args.json != "-":
        reporting.write_atomically(args.json, json.dumps(summary, indent=2) + "\n")
    if args.junit and args.junit != "-":
        buffer = io.StringIO()
        reporting.junit(summary).write(buffer, encoding="unicode", xml_declaration=True)
        reporting.write_atomically(args.junit, buffer.getvalue())


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
