"""Checking a notebook's answers (in the checking server) and judging them (here).

::

    results = check_and_judge(session, exercises, cells, cwd, cell_timeout=60, limit=300)
    # [{"id": "0.1", "status": "passed", "score": 2, ...}, ...]: one verdict per exercise

The grading process, which runs no learner code, judges: each exercise's outcomes (from the
checking server, :mod:`course.grading.worker`) are compared with the oracle's, and a wrong
answer gets the hint of the misconception it matches. Nothing here raises: a comparison
that fails makes that exercise an ``error`` with the reason::

    judge_outcomes(session, ex, {"failure": "timeout: ..."}, 1.0)   # OK: {"status": "error", ...}
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course.grading.checker import run_worker
from course.grading.redact import hide_extra_case
from course.grading.untrusted import clean_text

__all__ = ["check_and_judge", "error_result", "judge_outcomes", "not_attempted_result", "one_line"]


def one_line(e: BaseException) -> str:
    """``Type: message`` of an exception, on one line, cleaned for a report."""
    text = clean_text(f"{type(e).__name__}: {e}", limit=400).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def error_result(ex, why: str, seconds: float = 0.0) -> dict:
    """The verdict ``error`` on ``ex``, scored 0, with the reason."""
    return {
        "id": ex.id,
        "name": ex.name,
        "title": ex.title,
        "status": "error",
        "points": ex.points,
        "score": 0,
        "cases_passed": 0,
        "cases_total": len(ex.all_cases),
        "message": clean_text(f"[{ex.id} {ex.name}] error: {why}", 4000),
        "hint": "",
        "cost": {},
        "budget": dict(ex.budget),
        "seconds": round(seconds, 2),
        "timed_out": why.startswith("timeout"),
        "revealed": False,
        "partial": False,
    }


def judge_outcomes(session, ex, report: dict, seconds: float, revealed: bool = False) -> dict:
    """The verdict on one exercise, from its worker report (this process runs no learner code).
    ``revealed``: the notebook asks to see this prediction's answer (``check(id, reveal=True)``),
    so it is reported as revealed, worth no points.
    Never raises: a comparison that fails makes the exercise an ``error`` with the reason."""
    from course import checks

    try:
        with session.judge_lock:
            expected = session.expected(ex)
            if "failure" not in report and len(report["yours"]) != len(expected):
                report = {"failure": "the checking process reported the wrong number of cases"}
            if "failure" in report:
                return error_result(ex, report["failure"], seconds)
            result = checks.judge(ex, report["yours"], expected, report.get("cost") or {}, revealed)
            extra = session.extra_counts.get(ex.id, 0)  # the instructor's cases: passed/failed only
            result = hide_extra_case(
                ex, extra, result, report["yours"], expected, report.get("cost") or {}, revealed
            )
            if result.status != "passed" and report.get("notes"):
                result.message += "\n  notes:    " + "\n            ".join(report["notes"][:5])
        d = result.to_json()
    except Exception as e:
        return error_result(ex, f"the grader could not compare this answer ({one_line(e)})", seconds)
    d["message"], d["hint"] = clean_text(d["message"], 4000), clean_text(d.get("hint", ""), 1000)
    d["seconds"] = round(seconds, 2)
    d["timed_out"] = "timeout" in d["message"] or "did not finish within" in d["message"]
    return d


def not_attempted_result(session, ex) -> dict:
    """The verdict on an exercise whose notebook is missing: every case not attempted."""
    return judge_outcomes(session, ex, {"yours": [{"kind": "not attempted"} for _ in ex.all_cases]}, 0.0)


def check_and_judge(
    session,
    exercises: list,
    cells: list,
    cwd: Path,
    cell_timeout: float,
    limit: float,
    jobs: int = 1,
    revealed_by_run=None,
) -> list[dict]:
    """Check every exercise (the session's checking server, else a worker per exercise) and judge.

    ``cells``: ``[index, source]`` of the notebook's code cells; ``jobs``: workers at once
    where there is no ``fork``; ``revealed_by_run()``: the ids whose answer ``check`` showed
    while the notebook ran in its kernel (it waits for that run to end), so a reveal counts
    however the call was spelled. Without a run, a literal ``reveal=True`` in the source counts."""
    start = time.monotonic()
    if session.checker:
        reports = session.checker.check(exercises, cells, cwd, cell_timeout, limit, session.tmp)
    else:  # pragma: no cover (Windows: no fork)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            parts = pool.map(
                lambda ex: run_worker([ex], cells, cwd, cell_timeout, limit, session.tmp, session.extra),
                exercises,
            )
            reports = {k: v for part in parts for k, v in part.items()}
    seconds = time.monotonic() - start
    from course import checks

    asked = set().union(*(checks.reveals_in(src) for _, src in cells))  # cell by cell: magics do not parse
    if revealed_by_run is not None:
        asked |= set(revealed_by_run())
    return [judge_outcomes(session, ex, reports[ex.id], seconds, ex.id in asked) for ex in exercises]
