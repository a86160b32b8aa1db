"""``course grade``: score a learner's notebook (or a folder of them), headless, for CI.

::

    course grade PATH.ipynb [--json OUT] [--junit OUT] [--timeout S] [--cell-timeout S] [--min-score X]
    course grade DIR [-j N] [...]          # every *.ipynb in DIR, then a table

What happens to one notebook (the file is only ever read):

1. **Run it** top to bottom in a fresh kernel of this Python environment (nbclient; outputs
   are dropped as they arrive), with a per-cell and a total timeout. This is the learner's
   experience of "Run All": the report lists the cells that raised or timed out. It does
   not decide the score.
2. **Check each exercise** of the lesson in its own fresh worker process
   (``course.grading.worker``): the worker imports the checks before any learner code runs,
   executes only the notebook's definitions, runs the answer (found by the exercise's name)
   on the visible and hidden cases, and returns plain-data outcomes.
3. **Judge** here, in the grading process, which never runs learner code: the oracle's
   outcomes are computed here, the worker's are loaded with ``torch.load(weights_only=True)``
   and compared; a wrong answer gets the hint of the misconception it matches.

Steps 1 and 2 run at the same time. Threat model and limits: ``docs/grading.md``.

Exit status: 0 when every exercise passed (or the score reaches ``--min-score``, a fraction
of the points, e.g. 0.8), 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

__all__ = ["NotebookReport", "exit_code", "grade_notebook", "main"]

FORMAT = "course-grade/1"
_LESSON_FILE = re.compile(r"^(\d\d)_")
_EXERCISE_ID = re.compile(r"""(?:check\(\s*["']|exercise )(\d+)\.\d+""")
_judge_lock = threading.Lock()  # oracles and hint matching reseed global RNGs: one at a time
_expected_cache: dict[str, list] = {}


@dataclass
class NotebookReport:
    """The grade of one notebook (``to_json`` is the ``--json`` entry, see docs/grading.md)."""

    path: str
    lesson: int | None
    exercises: list[dict] = field(default_factory=list)
    run: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""

    @property
    def score(self) -> float:
        return sum(e["score"] for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e["points"] for e in self.exercises)

    @property
    def all_passed(self) -> bool:
        return not self.error and bool(self.exercises) and all(e["status"] == "passed" for e in self.exercises)

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(score=self.score, max_score=self.max_score, all_passed=self.all_passed)
        return d


def _lesson_of(path: Path, sources: list[str]) -> int | None:
    m = _LESSON_FILE.match(path.name)
    if m:
        return int(m.group(1))
    found = {int(x) for src in sources for x in _EXERCISE_ID.findall(src)}
    return found.pop() if len(found) == 1 else None


class _NoRun(Exception):
    """``--no-run``: skip the headless run."""


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _expected(ex) -> list:
    from course import checks

    if ex.id not in _expected_cache:
        _expected_cache[ex.id] = checks.expected_outcomes(ex)
    return _expected_cache[ex.id]


def _read_report(path: Path) -> dict:
    """A worker's report for one exercise, loaded as data only; ``{"failure": why}`` if unusable."""
    import torch

    if not path.exists():
        return {"failure": "the checking process ended without a report"}
    try:
        report = torch.load(path, weights_only=True)
        assert isinstance(report, dict)
        if isinstance(report.get("failure"), str):
            return {"failure": report["failure"]}
        assert isinstance(report.get("yours"), list)
        assert all(isinstance(o, dict) and o.get("kind") in {"value", "raised", "not attempted", "timeout"}
                   for o in report["yours"])
        return report
    except Exception as e:
        return {"failure": f"the checking process reported something unreadable ({type(e).__name__})"}


def _run_worker(exercises: list, cells: list, cwd: Path, cell_timeout: float, limit: float, tmp: Path) -> dict:
    """Run one worker process for ``exercises``; their reports by id."""
    name = "-".join(ex.id for ex in exercises)
    spec, out, err = tmp / f"{name}.json", tmp / f"out-{name}", tmp / f"{name}.err"
    out.mkdir()
    spec.write_text(json.dumps({"exercises": [ex.id for ex in exercises], "cells": cells, "cwd": str(cwd),
                                "cell_timeout": cell_timeout, "limit": limit}))
    cmd = [sys.executable, "-m", "course.grading.worker", str(spec), str(out)]
    with open(err, "wb") as stderr:
        try:  # the worker enforces `limit` per exercise; this is the backstop
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                  cwd=cwd, timeout=limit + 120)
        except subprocess.TimeoutExpired:
            return {ex.id: {"failure": f"timeout: checking ran past {limit:g} s"} for ex in exercises}
    reports = {ex.id: _read_report(out / f"{ex.id}.pt") for ex in exercises}
    if proc.returncode != 0:
        tail = err.read_bytes()[-400:].decode("utf-8", "replace").strip().splitlines()
        why = f"the checking process failed (exit {proc.returncode}): {tail[-1] if tail else ''}"
        reports = {i: r if "failure" not in r else {"failure": why} for i, r in reports.items()}
    return reports


def _judge(ex, report: dict, seconds: float) -> dict:
    """The verdict on one exercise, from its worker report (this process runs no learner code)."""
    from course import checks

    with _judge_lock:
        expected = _expected(ex)
        if "failure" not in report and len(report["yours"]) != len(expected):
            report = {"failure": "the checking process reported the wrong number of cases"}
        if "failure" in report:
            result = checks.Result(id=ex.id, name=ex.name, title=ex.title, status="error", points=ex.points,
                                   score=0, cases_passed=0, cases_total=len(expected),
                                   message=f"[{ex.id} {ex.name}] error: {report['failure']}", budget=dict(ex.budget))
        else:
            result = checks.judge(ex, report["yours"], expected, report.get("cost") or {})
            if result.status != "passed" and report.get("notes"):
                result.message += "\n  notes:    " + "\n            ".join(report["notes"][:5])
    d = result.to_json()
    d["seconds"] = round(seconds, 2)
    d["timed_out"] = "timeout" in d["message"] or "did not finish within" in d["message"]
    return d


def _check_exercises(exercises: list, cells: list, cwd: Path, cell_timeout: float, limit: float,
                     tmp: Path, jobs: int) -> list[dict]:
    """Check every exercise in fresh processes: one worker forking a child per exercise where
    ``fork`` exists, else one worker per exercise (``jobs`` at a time)."""
    start = time.monotonic()
    if hasattr(os, "fork"):
        reports = _run_worker(exercises, cells, cwd, cell_timeout, limit, tmp)
    else:  # pragma: no cover (Windows)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            parts = pool.map(lambda ex: _run_worker([ex], cells, cwd, cell_timeout, limit, tmp), exercises)
            reports = {k: v for part in parts for k, v in part.items()}
    seconds = time.monotonic() - start
    return [_judge(ex, reports[ex.id], seconds) for ex in exercises]


def _grade_exercise(ex, cells, cwd, cell_timeout, limit, tmp) -> dict:
    """Check and judge one exercise alone (what the tests use)."""
    return _check_exercises([ex], cells, cwd, cell_timeout, limit, tmp, jobs=1)[0]


def grade_notebook(
    path: Path,
    timeout: float = 300,
    cell_timeout: float = 60,
    lesson: int | None = None,
    jobs: int | None = None,
    progress=None,
    run: bool = True,
) -> NotebookReport:
    """Grade one notebook. Never writes to ``path``.

    Args:
        path: the learner's notebook.
        timeout: seconds for the whole notebook run (and, separately, for each exercise's checks).
        cell_timeout: seconds per cell.
        lesson: the lesson number, when the file name does not start with it (``NN_``).
        jobs: how many checking processes at once (default: the CPU count).
        progress: ``progress(text)`` is called with one-line updates (stderr in the CLI).
        run: run the notebook in a kernel too (False: score only; ``report.run`` stays empty).

    Returns:
        A :class:`NotebookReport`.
    """
    from course import checks

    say = progress or (lambda text: None)
    start = time.monotonic()
    path = Path(path)
    try:  # plain JSON first: the checking processes can start before nbformat/nbclient load
        text = path.read_text(encoding="utf-8")
        raw_cells = json.loads(text)["cells"]
        cells = [[i, _source(c)] for i, c in enumerate(raw_cells) if c.get("cell_type") == "code"]
    except Exception as e:
        return NotebookReport(str(path), lesson, error=f"cannot read the notebook: {type(e).__name__}: {e}")
    lesson = lesson if lesson is not None else _lesson_of(path, [src for _, src in cells])
    report = NotebookReport(str(path), lesson)
    if lesson is None:
        report.error = "cannot tell which lesson this is: name it NN_slug.ipynb or pass --lesson N"
        return report
    exercises = checks.all_exercises(lesson)
    if not exercises:
        report.error = f"lesson {lesson} has no registered exercises"
        return report
    say(f"{path.name}: " + (f"running {len(cells)} code cells, " if run else "") + f"checking {len(exercises)} exercises")
    cwd = path.resolve().parent
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp, ThreadPoolExecutor(max_workers=1) as pool:
        checking = pool.submit(_check_exercises, exercises, cells, cwd, cell_timeout, timeout, Path(tmp),
                               jobs or os.cpu_count() or 2)
        try:
            if not run:
                raise _NoRun
            import nbformat

            from course.grading.kernel import run_notebook

            nb = nbformat.reads(text, as_version=4)
            run = run_notebook(nb, cwd, cell_timeout=cell_timeout, total_timeout=timeout)
            report.run = {
                "code_cells": len(run.cells), "seconds": round(run.seconds, 2),
                "errors": [{"cell": c.index, "error": c.error} for c in run.cells if c.status == "error"],
                "timeouts": [{"cell": c.index, "error": c.error} for c in run.cells if c.status == "timeout"],
                "skipped": sum(c.status == "skipped" for c in run.cells),
                "total_timed_out": run.total_timed_out, "kernel_died": run.kernel_died,
            }
        except _NoRun:
            pass
        except Exception as e:  # the kernel would not start, for example
            report.run = {"failure": f"{type(e).__name__}: {e}"}
        say(f"{path.name}: " + ("notebook run done, " if run else "") + "waiting for the checks")
        report.exercises = checking.result()
    report.seconds = round(time.monotonic() - start, 2)
    say(f"{path.name}: {report.score:g}/{report.max_score:g} in {report.seconds:.1f} s")
    return report


# --- reports --------------------------------------------------------------------------------


def _summary(reports: list[NotebookReport]) -> dict:
    import torch

    import course

    score, max_score = sum(r.score for r in reports), sum(r.max_score for r in reports)
    return {
        "format": FORMAT,
        "course_version": course.__version__,
        "torch_version": torch.__version__,
        "notebooks": [r.to_json() for r in reports],
        "score": score,
        "max_score": max_score,
        "fraction": round(score / max_score, 4) if max_score else 0.0,
        "all_passed": bool(reports) and all(r.all_passed for r in reports),
    }


def _print_notebook(r: NotebookReport) -> None:
    print(f"{r.path}  (lesson {r.lesson})")
    if r.error:
        print(f"  error: {r.error}")
    for e in r.exercises:
        print(f"  {e['id']:<6} {e['name']:<28} {e['status']:<14} {e['score']:g}/{e['points']:g}")
    for e in r.exercises:
        if e["status"] != "passed":
            print("\n" + "\n".join("  " + line for line in e["message"].splitlines()))
    run = r.run
    if "failure" in run:
        print(f"\n  notebook run failed: {run['failure']}")
    elif run:
        problems = [f"cell {x['cell']}: {x['error']}" for x in sorted(run["errors"] + run["timeouts"], key=lambda x: x["cell"])]
        line = (f"\n  notebook run: {run['code_cells']} code cells in {run['seconds']:.1f} s, "
                f"{len(run['errors'])} raised, {len(run['timeouts'])} timed out")
        line += f", {run['skipped']} skipped (total timeout)" if run["skipped"] else ""
        print(line)
        for p in problems[:10]:
            print(f"    {p[:160]}")
    pct = f" ({100 * r.score / r.max_score:.0f}%)" if r.max_score else ""
    print(f"\n  score {r.score:g}/{r.max_score:g}{pct}, {r.seconds:.1f} s")


def _print_table(reports: list[NotebookReport]) -> None:
    width = max([len(Path(r.path).name) for r in reports] + [8])
    print(f"{'notebook':<{width}}  {'score':>9}  passed  failed  not att.  error  seconds")
    for r in reports:
        count = {s: sum(e["status"] == s for e in r.exercises) for s in ("passed", "failed", "not attempted", "error")}
        score = "error" if r.error else f"{r.score:g}/{r.max_score:g}"
        print(f"{Path(r.path).name:<{width}}  {score:>9}  {count['passed']:>6}  {count['failed']:>6}  "
              f"{count['not attempted']:>8}  {count['error']:>5}  {r.seconds:>7.1f}")
    total, most = sum(r.score for r in reports), sum(r.max_score for r in reports)
    print(f"{'total':<{width}}  {f'{total:g}/{most:g}':>9}")


def _junit(summary: dict) -> ET.ElementTree:
    suites = ET.Element("testsuites", name="course grade")
    for nb in summary["notebooks"]:
        exs = nb["exercises"]
        suite = ET.SubElement(suites, "testsuite", name=nb["path"], tests=str(len(exs)),
                              failures=str(sum(e["status"] in ("failed", "not attempted") for e in exs)),
                              errors=str(sum(e["status"] == "error" for e in exs) + bool(nb["error"])),
                              time=f"{nb['seconds']:.2f}")
        if nb["error"]:
            ET.SubElement(ET.SubElement(suite, "testcase", name="notebook", classname=nb["path"]),
                          "error", message=nb["error"])
        for e in exs:
            case = ET.SubElement(suite, "testcase", name=f"{e['id']} {e['name']}", classname=nb["path"],
                                 time=f"{e['seconds']:.2f}")
            if e["status"] == "error":
                ET.SubElement(case, "error", message=e["status"]).text = e["message"]
            elif e["status"] != "passed":
                ET.SubElement(case, "failure", message=e["status"]).text = e["message"]
    return ET.ElementTree(suites)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a notebook, or a folder of notebooks")
    parser.add_argument("--json", type=Path, help="write the report as JSON here (docs/grading.md)")
    parser.add_argument("--junit", type=Path, help="write a JUnit XML report here")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for the whole notebook run (default 300)")
    parser.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell (default 60)")
    parser.add_argument("--min-score", type=float, default=None,
                        help="pass when score/max reaches this fraction (default: every exercise must pass)")
    parser.add_argument("--lesson", type=int, default=None, help="lesson number, if the file name lacks NN_")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="notebooks graded at once (folders)")
    parser.add_argument("--no-run", action="store_true",
                        help="score only: skip running the notebook in a kernel (the score never depends on it)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    if args.path.is_dir():
        paths = sorted(p for p in args.path.glob("*.ipynb") if not p.name.startswith("."))
    elif args.path.is_file():
        paths = [args.path]
    else:
        print(f"course grade: no such notebook or folder: {args.path}", file=sys.stderr)
        return 2
    if not paths:
        print(f"course grade: no notebooks in {args.path}", file=sys.stderr)
        return 2
    say = (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    kwargs = dict(timeout=args.timeout, cell_timeout=args.cell_timeout, lesson=args.lesson, run=not args.no_run,
                  progress=say if len(paths) == 1 else None)  # a folder gets a progress bar instead
    if len(paths) == 1:
        reports = [grade_notebook(paths[0], **kwargs)]
    else:
        from tqdm import tqdm

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(grade_notebook, p, jobs=max(1, (os.cpu_count() or 2) // args.jobs), **kwargs)
                       for p in paths]
            reports = [f.result() for f in tqdm(futures, desc="grading", unit="nb", disable=args.quiet, file=sys.stderr)]

    summary = _summary(reports)
    if args.path.is_dir():
        _print_table(reports)
    else:
        _print_notebook(reports[0])
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if args.junit:
        _junit(summary).write(args.junit, encoding="unicode", xml_declaration=True)
    return exit_code(summary, args.min_score)


def exit_code(summary: dict, min_score: float | None = None) -> int:
    """0 when every exercise passed, or, with ``min_score``, when score/max reaches it; else 1.

    Example:
        >>> exit_code({"all_passed": False, "fraction": 0.75}), exit_code({"all_passed": False, "fraction": 0.75}, 0.7)
        (1, 0)
    """
    ok = summary["all_passed"] if min_score is None else summary["fraction"] >= min_score
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
