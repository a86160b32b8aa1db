"""``course grade --classroom OUT``: the grade as GitHub Classroom's autograder reads it.

GitHub Classroom's reporter action (``classroom-resources/autograding-grading-reporter``)
takes a list of step ids (``runners: course``) and, for each id, reads the environment
variable ``<ID in upper case>_RESULTS``: base64 of a JSON object with one entry per test.
:func:`runner_result` builds that object from a ``course grade --json`` summary, one test per
exercise, its points as the test's score::

    >>> summary = {"all_passed": False, "tampering": [], "max_score": 3, "notebooks": [
    ...     {"path": "notebooks/00_warmup.ipynb", "error": "", "exercises": [
    ...         {"id": "0.1", "name": "cube_sum_grad", "status": "passed", "points": 2, "score": 2,
    ...          "message": "[0.1 cube_sum_grad] passed: 4/4 cases (2 points)", "seconds": 0.5},
    ...         {"id": "0.2", "name": "predicted_a_grad", "status": "not attempted", "points": 1,
    ...          "score": 0, "message": "[0.2 predicted_a_grad] not attempted", "seconds": 0.1}]}]}
    >>> result = runner_result(summary)
    >>> result["status"], result["max_score"], [(t["name"], t["status"], t["score"]) for t in result["tests"]]
    ('fail', 3, [('0.1 cube_sum_grad', 'pass', 2), ('0.2 predicted_a_grad', 'fail', 0)])
    >>> import base64, json
    >>> json.loads(base64.b64decode(encode(result))) == result     # what the reporter decodes
    True

A workflow step sets it as its ``result`` output (``echo "result=$(cat OUT)" >>
"$GITHUB_OUTPUT"``) and passes it to the reporter as ``COURSE_RESULTS``
(docs/classroom-autograding.yml).
"""

from __future__ import annotations

import base64
import json

__all__ = ["RUNNER_ID", "encode", "placeholder", "runner_result"]

# NOTE [What GitHub Classroom's reporter reads]
# Read in classroom-resources/autograding-grading-reporter, the action Classroom's templates
# use, at 43c2d9f524d3 (2025-09-02), and in the command grader beside it
# (github-education-resources/autograding-command-grader, src/main.js at 4993a162d5c7):
# 1. src/main.js: `runners` is split at commas; for each id, trimmed and upper-cased,
#    `${ID}_RESULTS` is read from the environment, base64-decoded and parsed as JSON. Its
#    error message asks for ids of letters and digits only: ours is `course`.
# 2. src/notify-classroom.js: the points are the sum of `tests[].score` over the runners
#    whose `max_score` is truthy, out of the sum of their `max_score`, posted as the notice
#    "Points X/Y" (and `{totalPoints, maxPoints}`). A result with max_score 0 posts no
#    points at all: our placeholder relies on it.
# 3. src/main.js: a runner whose `status` is "fail" or "error" fails the step (the learner
#    sees a red check); "pass" only when every exercise passed.
# 4. src/console-results.js: the log shows each test's name with a tick or a cross, its
#    `message` only when its status is "error", and its `test_code` whenever there is one.
#    So an exercise that did not pass carries the check's message (yours, expected, hint)
#    in `test_code`: that is where the learner reads why.
# 5. src/helpers/test-helpers.js: the log's table scores a runner as (tests passed / tests)
#    * max_score, which is not rule 2's sum when exercises are worth different points (or a
#    score is partial); the notice of rule 2 is the one Classroom records.
# 6. the command grader writes `{version: 1, status, max_score, tests: [{name, status,
#    score, message, test_code, filename, line_no, duration}]}` (duration in milliseconds,
#    statuses "pass" / "fail" / "error"); we write the same fields.

RUNNER_ID = "course"  # the workflow step's id; the reporter reads COURSE_RESULTS
_STATUS = {"passed": "pass", "error": "error"}  # failed, not attempted, revealed: "fail"
_MESSAGE_LIMIT = 2000  # characters of an exercise's message shown in the Actions log


def _test(name: str, status: str, score: float, message: str, filename: str, seconds: float) -> dict:
    message = message[:_MESSAGE_LIMIT]
    return {
        "name": name,
        "status": status,
        "score": score,
        "message": message,
        "test_code": "" if status == "pass" else message,  # what the log shows (NOTE rule 4)
        "filename": filename,
        "line_no": 0,
        "duration": round(seconds * 1000),
    }


def runner_result(summary: dict) -> dict:
    """The Classroom runner result of a ``course grade`` summary (see the NOTE above).

    One test per exercise of every notebook (``"N.M name"``), plus an ``error`` test for a
    notebook that could not be graded and one for tampering; the scores sum to the
    summary's ``score``.
    """
    tests = []
    for nb in summary["notebooks"]:
        tests += [
            _test(
                f"{e['id']} {e['name']}",
                _STATUS.get(e["status"], "fail"),
                e["score"],
                e["message"],
                nb["path"],
                e.get("seconds", 0.0),
            )
            for e in nb["exercises"]
        ]
        if nb["error"]:
            tests.append(_test(f"notebook {nb['path']}", "error", 0, nb["error"], nb["path"], 0.0))
    if summary.get("tampering"):
        changed = ", ".join(summary["tampering"][:10])
        tests.append(_test("course package", "error", 0, f"changed during grading: {changed}", "", 0.0))
    statuses = {t["status"] for t in tests}
    status = "error" if "error" in statuses else "pass" if summary["all_passed"] else "fail"
    return {"version": 1, "status": status, "max_score": summary["max_score"], "tests": tests}


def placeholder(why: str = "grading did not finish") -> dict:
    """What the ``--classroom`` file holds until the real result replaces it: no points
    (``max_score`` 0, which the reporter sends nothing for), one ``error`` test."""
    return {
        "version": 1,
        "status": "error",
        "max_score": 0,
        "tests": [_test("grading", "error", 0, why, "", 0.0)],
    }


def encode(result: dict) -> str:
    """``result`` as the reporter's ``<ID>_RESULTS`` variable holds it: base64 of compact JSON."""
    return base64.b64encode(json.dumps(result, separators=(",", ":"), allow_nan=False).encode()).decode()
