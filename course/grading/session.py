"""A grading session: what one ``course grade`` sets up before any learner code runs, and ends.

::

    with open_session({0, 3}) as session:          # fingerprint, oracles, the checking server
        report = grade_in_session(session, path, ...)   # course.grading.notebook
    session.tampered                                # the package files that changed meanwhile

Everything a session holds is passed explicitly (no module keeps it): the private folder, the
checking server (:class:`course.grading.checker.Checker`), the fingerprint of the ``course``
package, the oracles' outcomes computed once, and the lock that serialises judging (oracles
and hint matching reseed global RNGs: one at a time).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import threading
from pathlib import Path

from course.grading.checker import Checker
from course.grading.files import changed_files, package_digest
from course.grading.processes import become_subreaper, descendants, end_processes

__all__ = ["GradingSession", "open_session"]


class GradingSession:
    """What one ``course grade`` sets up before any learner code runs, and ends after.

    ``sequential``: notebooks are graded one at a time, so the processes a notebook leaves
    behind are killed before the next one starts (with ``-j N`` they are killed at the end).
    ``extra``: the instructor's extra cases (:mod:`course.checks.extra`), already applied in
    this process; the checking server loads the same file (checked by its sha256).
    """

    def __init__(self, lessons: set[int], sequential: bool = True, extra=None):
        self.tmp = Path(tempfile.mkdtemp(prefix="course-grade-"))
        (self.tmp / "cwd").mkdir()  # where the grader's own processes start: nothing in it
        (self.tmp / "tmp").mkdir()  # TMPDIR of learner code: removed with the session
        self.sequential = sequential
        self.subreaper = become_subreaper()
        self.keep = set(descendants())  # what was running before us is not ours to end
        self.baseline = package_digest()
        self.killed: list[str] = []
        self.tampered: list[str] = []
        self.judge_lock = threading.Lock()  # oracles and hint matching reseed global RNGs
        self.expected_outcomes: dict[str, list] = {}
        self.extra = (extra.path, extra.sha256) if extra else None
        self.extra_counts: dict[str, int] = dict(extra.by_exercise) if extra else {}
        self.checker = Checker(lessons, self.tmp, self.extra) if hasattr(os, "fork") else None
        try:
            self._prepare_judge(lessons)
        finally:
            if self.checker:
                self.checker.wait_ready()

    def expected(self, ex) -> list:
        """The oracle's outcomes on every case of ``ex``, computed once per session."""
        from course import checks

        if ex.id not in self.expected_outcomes:
            self.expected_outcomes[ex.id] = checks.expected_outcomes(ex)
        return self.expected_outcomes[ex.id]

    def _prepare_judge(self, lessons: set[int]) -> None:
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
                    expected = self.expected(ex)
                    checks.judge(ex, expected, expected, dict(ex.budget))  # the passing path: no hint search
                except Exception:  # the same failure comes back when judging, as an `error`
                    pass
        buffer = io.BytesIO()  # the weights-only unpickler, loaded now
        torch.save({"yours": [{"kind": "value", "value": torch.zeros(1)}]}, buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True)

    def end_leftovers(self) -> list[str]:
        """Kill every process below us that is not the checking server (nor was here before)."""
        keep = self.keep | (
            {self.checker.proc.pid} if self.checker and self.checker.proc.poll() is None else set()
        )
        killed = end_processes(keep)
        self.killed += killed
        return killed

    def close(self) -> list[str]:
        """Stop the checking server, end every leftover process; the files that changed."""
        if self.checker:
            self.checker.stop()
        self.end_leftovers()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return changed_files(self.baseline, package_digest())


@contextlib.contextmanager
def open_session(lessons: set[int], sequential: bool = True, extra=None):
    """A :class:`GradingSession` for ``lessons``; closed on exit, ``session.tampered`` set then."""
    session = GradingSession(lessons, sequential, extra)
    try:
        yield session
    finally:
        session.tampered = session.close()
