"""Signed, validated grade reports: a ``report.json`` a learner wrote by hand counts for nothing.

``course grade --json`` signs its report when it holds a key (``--key-file FILE``, ``-`` for
stdin, or the ``COURSE_GRADE_KEY`` environment variable, read and removed before any learner
code runs): an HMAC-SHA256 over the report's canonical JSON, which names the course version
and the sha256 of every notebook graded. The gradebook takes a report only when it parses,
passes :func:`problems` and its signature checks with the instructor's key::

    >>> key = b"instructor secret"
    >>> report = {"format": "course-grade/1", "course_version": "0.1.0", "score": 2, "max_score": 2,
    ...           "notebooks": [{"path": "00_warmup.ipynb", "sha256": "ab", "error": "", "exercises": [
    ...               {"id": "0.1", "status": "passed", "points": 2, "score": 2}]}]}
    >>> signed = sign(report, key)
    >>> verify(signed, key)                                  # OK
    True
    >>> verify({**signed, "score": 3}, key), verify(signed, b"a guess")   # BAD: edited, wrong key
    (False, False)

NOTE [A signature has a purpose]
Every signature names what it is for, in the signed body (``"purpose"``) and in the key
itself (HMAC under a key derived from the instructor's key and the purpose), so a signed
thing made for one reader is never taken by another:

1. ``"grade"``: a learner's grade (``course grade --json``, ``course regrade``); readers
   (the gradebook, ``course collect``) also check whose it is (``learner``) and which
   notebooks it graded (``notebooks[].sha256``).
2. ``"cache"``: the gradebook's and the room's cache entries (never a learner's grade)::

    >>> cached = sign(report, key, purpose="cache")
    >>> verify(cached, key, purpose="cache"), verify(cached, key)    # OK, BAD: not a grade
    (True, False)
    >>> verify({**cached, "purpose": "grade"}, key)                  # BAD: the field alone is not enough
    False
    >>> problems({**report, "score": float("nan")})
    ['score: not a finite number']
    >>> problems({**report, "notebooks": "all of them"})
    ['notebooks: not a list']

:func:`parse` reads untrusted JSON: ``NaN``/``Infinity`` refused, nesting deeper than
:data:`MAX_DEPTH` refused, never a ``RecursionError``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import sys

from course.grading.files import REPORT_FORMAT

__all__ = [
    "KEY_ENV",
    "MAX_DEPTH",
    "PURPOSES",
    "file_sha256",
    "parse",
    "problems",
    "read_key",
    "rejected",
    "sign",
    "verify",
]

KEY_ENV = "COURSE_GRADE_KEY"
MAX_DEPTH = 32  # a grade report nests 5 deep; anything far deeper is not one
STATUSES = {"passed", "failed", "not attempted", "error", "revealed"}
PURPOSES = ("grade", "cache")  # NOTE [A signature has a purpose]


def file_sha256(data: bytes) -> str:
    """The hex SHA-256 of a notebook file's bytes: what a report's ``sha256`` binds, outputs and
    all (``course.learner.workspace.cells_hash`` is the other hash: of the cells' sources only)."""
    return hashlib.sha256(data).hexdigest()


def _canonical(report: dict) -> bytes:
    body = {k: v for k, v in report.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _purpose_key(key: bytes, purpose: str) -> bytes:
    """The key one purpose signs with: derived from ``key``, another for every purpose."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}")
    return hmac.new(key, b"course-grade/1 purpose " + purpose.encode(), hashlib.sha256).digest()


def sign(report: dict, key: bytes, purpose: str = "grade") -> dict:
    """``report`` with ``purpose`` and a ``signature`` field: HMAC-SHA256 (hex) of everything
    else, keyed by ``key`` derived for ``purpose`` (NOTE [A signature has a purpose])."""
    body = {**{k: v for k, v in report.items() if k != "signature"}, "purpose": purpose}
    digest = hmac.new(_purpose_key(key, purpose), _canonical(body), hashlib.sha256).hexdigest()
    return {**body, "signature": {"alg": "hmac-sha256", "value": digest}}


def verify(report: dict, key: bytes, purpose: str = "grade") -> bool:
    """Whether ``report`` carries a signature made with ``key`` for ``purpose`` over exactly its content."""
    sig = report.get("signature") if isinstance(report, dict) else None
    if not isinstance(sig, dict) or sig.get("alg") != "hmac-sha256" or not isinstance(sig.get("value"), str):
        return False
    if report.get("purpose") != purpose:
        return False
    try:
        expected = hmac.new(_purpose_key(key, purpose), _canonical(report), hashlib.sha256).hexdigest()
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, sig["value"])


def read_key(key_file: str | None) -> bytes | None:
    """The signing key: from ``key_file`` (``-``: stdin), else from ``$COURSE_GRADE_KEY``;
    the variable is removed from this process's environment either way, so no process the
    grader starts inherits it. None when there is no key."""
    from_env = os.environ.pop(KEY_ENV, None)
    if key_file is not None:
        raw = sys.stdin.buffer.read(1 << 16) if key_file == "-" else open(key_file, "rb").read(1 << 16)
        key = raw.strip()
    else:
        key = (from_env or "").encode()
    return key or None


def _depth(value, limit: int) -> int:
    """Nesting depth of parsed JSON, iteratively (stops counting past ``limit``)."""
    todo, deepest = [(value, 1)], 0
    while todo:
        v, d = todo.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(v, dict):
            todo.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            todo.extend((x, d + 1) for x in v)
    return deepest


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number a report may hold")


def parse(text: str | bytes) -> object:
    """Untrusted JSON: ``NaN``/``Infinity`` and nesting past :data:`MAX_DEPTH` refused.

    Raises:
        ValueError: not JSON, a non-finite constant, or nested too deep.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if _depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    return value


def _git_problems(git: object, where: str) -> list[str]:
    """What is wrong with a notebook's ``git`` record (absent or None: nothing)."""
    if git is None:
        return []
    if not isinstance(git, dict):
        return [f"{where}: not an object or null"]
    bad = [
        k
        for k in ("head", "head_time", "commit", "commit_time", "path")
        if not isinstance(git.get(k), (str, type(None)))
    ]
    if not isinstance(git.get("modified", False), bool):
        bad.append("modified")
    return [
        f"{where}.{k}: not a string or null" if k != "modified" else f"{where}.modified: not a boolean"
        for k in bad
    ]


def rejected(report: object, key: bytes | None, learner: str | None = None) -> str:
    """Why ``report`` is not a grade the holder of ``key`` made for ``learner`` ("" when it is one).

    The checks every reader of a learner's report makes (the gradebook, ``course collect``):
    it is a report (:func:`problems`), there is a key, its signature checks with it for the
    purpose ``"grade"`` (a cache entry is not a grade), and it names its learner (``learner``
    when given: the gradebook's folder)::

        >>> empty = {"format": "course-grade/1", "course_version": "0.1.0", "score": 0, "max_score": 0,
        ...          "notebooks": [], "learner": "ada"}
        >>> rejected(sign(empty, b"k"), b"k"), rejected(empty, b"k")          # OK, BAD: unsigned
        ('', 'its signature does not check')
        >>> rejected(sign(empty, b"k"), b"k", learner="bob")                  # BAD: ada's grade
        "it is the grade of 'ada', not of 'bob'"
        >>> rejected(sign({**empty, "learner": None}, b"k"), b"k")            # BAD: whose?
        'it names no learner (course grade --learner)'
        >>> rejected(sign(empty, b"k", purpose="cache"), b"k")                # BAD: a cache entry
        'signed for another purpose (cache), not as a grade'
        >>> rejected({**empty, "notebooks": [{"path": "a", "exercises": [], "git": "HEAD"}]}, b"k")
        'malformed (notebooks[0].git: not an object or null)'
    """
    found = problems(report)
    if found:
        return "malformed (" + "; ".join(found[:3]) + ")"
    if key is None:
        return "no instructor key to check its signature (--key-file or $COURSE_GRADE_KEY)"
    purpose = report.get("purpose")
    if purpose in PURPOSES and purpose != "grade" and verify(report, key, purpose):
        return f"signed for another purpose ({purpose}), not as a grade"
    if not verify(report, key):
        return "its signature does not check"
    named = report.get("learner")
    if not isinstance(named, str) or not named:
        return "it names no learner (course grade --learner)"
    if learner is not None and named != learner:
        return f"it is the grade of {named!r}, not of {learner!r}"
    return ""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def problems(report: object) -> list[str]:
    """What makes ``report`` not a ``course grade --json`` report (empty: it is one).

    Checked: the format, types of every field the gradebook reads, finite numbers,
    ``0 <= score <= points`` per exercise, a known status, and totals that add up.
    """
    if not isinstance(report, dict):
        return ["not a JSON object"]
    found = []
    if report.get("format") != REPORT_FORMAT:
        found.append(f"format: not {REPORT_FORMAT}")
    if not isinstance(report.get("course_version"), str):
        found.append("course_version: not a string")
    for name in ("score", "max_score"):
        if not _number(report.get(name)):
            found.append(f"{name}: not a finite number")
    notebooks = report.get("notebooks")
    if not isinstance(notebooks, list):
        return found + ["notebooks: not a list"]
    total = most = 0.0
    for i, nb in enumerate(notebooks):
        where = f"notebooks[{i}]"
        if not isinstance(nb, dict):
            found.append(f"{where}: not an object")
            continue
        if not isinstance(nb.get("path"), str) or not isinstance(nb.get("error", ""), str):
            found.append(f"{where}: path or error not a string")
        found += _git_problems(nb.get("git"), f"{where}.git")
        exercises = nb.get("exercises")
        if not isinstance(exercises, list):
            found.append(f"{where}.exercises: not a list")
            continue
        for j, ex in enumerate(exercises):
            at = f"{where}.exercises[{j}]"
            if not isinstance(ex, dict) or not isinstance(ex.get("id"), str):
                found.append(f"{at}: not an exercise with an id")
                continue
            if ex.get("status") not in STATUSES:
                found.append(f"{at}.status: not one of {sorted(STATUSES)}")
            points, score = ex.get("points"), ex.get("score")
            if not (_number(points) and _number(score) and 0 <= score <= points):
                found.append(f"{at}: score and points must be numbers with 0 <= score <= points")
                continue
            if not isinstance(ex.get("hint", ""), str):
                found.append(f"{at}.hint: not a string")
            total, most = total + score, most + points
    if not found and (
        not math.isclose(total, report["score"]) or not math.isclose(most, report["max_score"])
    ):
        found.append("score/max_score: not the sum of the exercises")
    return found
