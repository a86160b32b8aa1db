"""Grading a class: each learner's notebooks graded in a sandbox of their own, and cached.

:func:`collect` grades every learner of a roster (``-j N`` at once) with ``course grade
--no-run`` inside :func:`course.grading.sandbox.run_untrusted` (:func:`grade_sandboxed`), or
takes the signed CI report their folder holds (:mod:`course.classroom.roster`); results are
cached in ``ROSTER/.course-gradebook/``, signed for the purpose "cache", under the hash of the
notebooks, the lessons and the grader's fingerprint. NOTE [Nothing a learner wrote is trusted]
in :mod:`course.classroom.roster` says what counts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course.classroom.roster import (
    REPORT_LIMIT,
    TEMPLATE_DIR,
    Learner,
    ci_reports,
    learner_notebooks,
    same_learner,
    sha256_of,
)
from course.grading.files import grader_fingerprint, write_atomically
from course.grading.isolation import python_command
from course.grading.sandbox import run_untrusted
from course.grading.signing import file_sha256, parse, problems, sign, verify
from course.grading.untrusted import Untrusted, clean_text, read_regular

CACHE_DIR = ".course-gradebook"


def _fingerprint(
    notebooks: dict[str, bytes], lessons: set[int] | None = None, extra: Path | None = None
) -> str:
    # The grader's own fingerprint (version and the checks' code): a fixed check grades again.
    chosen = "all" if lessons is None else ",".join(map(str, sorted(lessons)))
    cases = f" extra {sha256_of(extra)}" if extra is not None else ""  # other extra cases, another grade
    h = hashlib.sha256(f"{grader_fingerprint()} lessons {chosen}{cases}".encode())
    for name, data in sorted(notebooks.items()):
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + data + b"\0")
    return h.hexdigest()[:24]


def cache_key(cache: Path, key: bytes | None) -> bytes:
    """The instructor's key, else one kept in the cache folder (made on first use, 0600).
    ``course room`` signs its cache with the same key, and grades in :func:`grade_sandboxed`."""
    if key is not None:
        return key
    cache.mkdir(mode=0o700, exist_ok=True)
    path = cache / "key"
    try:
        return read_regular(path, 4096).strip() or _new_key(path)
    except (OSError, Untrusted):
        return _new_key(path)


def _new_key(path: Path) -> bytes:
    value = secrets.token_hex(32).encode()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(value)
    return value


def grade_sandboxed(
    notebooks: dict[str, bytes], timeout: float, lessons: set[int] | None, hide: list[Path] = (), extra=None
) -> tuple[dict, str]:
    """(the grade report of ``notebooks``, the isolation used); runs ``course grade --no-run``
    on a private copy through :func:`course.grading.sandbox.run_untrusted` (bubblewrap where it
    runs: nothing of the host but the allow-list is visible, so ``hide`` needs no entry; its
    paths are kept for the callers that name what must never be seen)."""
    del hide  # the allow-list shows none of them (NOTE [An allow-list, not a deny-list])
    with tempfile.TemporaryDirectory(prefix="course-gradebook-") as tmp:
        inputs = Path(tmp) / "in"
        inputs.mkdir()
        for name, data in notebooks.items():  # only the selected lessons, under their own names
            (inputs / name).write_bytes(data)
        once = secrets.token_hex(32)  # the sandboxed grader signs with this: learner code never sees it

        def args(folder: str) -> list[str]:
            cmd = [
                "course",
                "grade",
                folder,
                "--json",
                "-",
                "--key-file",
                "-",
                "-q",
                "--no-run",
                "--timeout",
                f"{timeout:g}",
            ]
            if lessons is not None:  # only their checks are prepared (and missing ones reported)
                cmd += ["--lessons", ",".join(f"{n:02d}" for n in sorted(lessons))]
            if extra is not None:  # read, then removed, before any learner code runs
                cmd += ["--extra-cases", f"{folder}/../secret.py"]
            return python_command(*cmd)

        # Bounded: a sandbox stopped by learner code (SIGSTOP) costs this, then it is killed.
        limit = len(notebooks) * (2 * timeout + 90) + 180
        secret = extra.read_bytes() if extra is not None else None  # the instructor's extra cases
        run = run_untrusted(
            args, inputs, stdin=once.encode(), timeout=limit, stdout_limit=REPORT_LIMIT, secret=secret
        )
    if run.timed_out:
        raise RuntimeError(f"grading did not finish in time ({limit:g} s)")
    said = f": {clean_text(run.said, 300)}" if run.said else ""
    try:
        report = parse(run.stdout)
    except ValueError:
        raise RuntimeError(f"grading did not finish (exit {run.returncode}){said}") from None
    if problems(report) or not verify(report, once.encode()):
        raise RuntimeError(
            f"grading did not finish (exit {run.returncode}{said}): no report signed by the grader"
        )
    for nb in report["notebooks"]:  # a notebook that scored must be the one we gave
        name = Path(nb["path"]).name
        scored = sum(e["score"] for e in nb["exercises"]) > 0
        if scored and (name not in notebooks or nb.get("sha256") != file_sha256(notebooks[name])):
            raise RuntimeError(f"grading did not finish: {name} is not the notebook given")
    return report, run.isolation


def _graded(
    name: str,
    notebooks: dict[str, bytes],
    cache: Path,
    key: bytes,
    timeout: float,
    quiet: bool,
    lessons: set[int] | None,
    hide: list[Path],
    extra: Path | None = None,
) -> tuple[dict, str]:
    """The grade report of one learner's ``notebooks``: from the cache (signed by ``key``)
    or a fresh sandboxed run; and how it was isolated ("cached" for a cache hit)."""
    entry = (
        cache / f"{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}-"
        f"{_fingerprint(notebooks, lessons, extra)}.json"
    )
    try:
        cached = parse(read_regular(entry, REPORT_LIMIT))
        if not problems(cached) and verify(cached, key, purpose="cache"):
            return cached, "cached"
    except (OSError, Untrusted, ValueError):
        pass  # no entry, a half-written or a forged one: grade again
    report, isolation = grade_sandboxed(notebooks, timeout, lessons, hide, extra)
    report = sign(report, key, purpose="cache")  # never a learner's grade (NOTE [A signature has a purpose])
    cache.mkdir(mode=0o700, exist_ok=True)
    write_atomically(entry, json.dumps(report), mode=0o600)
    if not quiet:
        print(f"graded {clean_text(name, 80)}", file=sys.stderr, flush=True)
    return report, isolation


def _learner(
    folder: Path,
    lessons: set[int] | None,
    cache: Path,
    keys: tuple,
    timeout: float,
    quiet: bool,
    hide: list[Path],
    extra: Path | None = None,
) -> Learner:
    learner = Learner(clean_text(folder.name, 200))
    notes: list[str] = []
    try:
        notebooks = learner_notebooks(folder, lessons, notes)
        before = len(notes)
        reports = ci_reports(folder, keys[0], notebooks, notes, extra, lessons)
        ignored = len(notes) > before  # a report was there, and its note says why it was not taken
        if not reports and notebooks:
            report, learner.isolation = _graded(
                folder.name, notebooks, cache, keys[1], timeout, quiet, lessons, hide, extra
            )
            reports = [report]
        elif not reports:
            learner.empty = True
            notes.append(
                f"no lesson notebook in {folder.name}/ nor {folder.name}/{TEMPLATE_DIR}/"
                + ("" if ignored else " (and no report)")
            )
        for report in reports:
            for item in report.get("ignored", []):
                if "another notebook of lesson" in item.get("reason", ""):
                    notes.append(f"{Path(item['path']).name} ignored: {item['reason']}")
            for nb in report["notebooks"]:
                if nb.get("error"):
                    notes.append(f"{Path(nb['path']).name}: {nb['error']}")
                for entry in nb["exercises"]:
                    learner.exercises[entry["id"]] = entry
    except Exception as e:  # one learner's trouble is that learner's row only
        notes.append(f"not graded: {clean_text(e, 300)}")
    learner.note = clean_text("; ".join(notes), 1000)
    return learner


def collect(
    roster: Path,
    lessons: set[int] | None = None,
    jobs: int = 1,
    timeout: float = 300,
    quiet: bool = True,
    key: bytes | None = None,
    extra: Path | None = None,
    expected: list[str] = (),
) -> list[Learner]:
    """Every learner folder of ``roster``, in name order, graded or read from their signed reports;
    and a row for each learner of ``expected`` without a folder ("missing").

    ``key``: the instructor's key (what CI signed the learners' reports with); without one,
    no report is trusted and every learner's notebooks are graded. ``extra``: the instructor's
    extra cases (``course grade --extra-cases``): a report counts only if graded with them.
    """
    folders = sorted(
        p for p in roster.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    )
    cache = roster / CACHE_DIR
    keys = (key, cache_key(cache, key))
    hide = [roster.resolve(), cache.resolve(), Path.home()]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        found = list(
            pool.map(lambda f: _learner(f, lessons, cache, keys, timeout, quiet, hide, extra), folders)
        )
    have = [x.name for x in found]
    found += [
        Learner(name, note=f"missing: no folder {name}/ in the roster", empty=True)
        for name in expected
        if not any(same_learner(name, learner) for learner in have)
    ]
    return sorted(found, key=lambda x: x.name)
