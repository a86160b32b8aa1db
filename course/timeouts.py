"""One time limit for a block of code, shared by the checks and the grader's worker.

It lives apart from :mod:`course.checks` (which imports torch) so that a process that only
needs the limit, such as ``course grade`` answering a usage error, starts in a fraction of a
second.

Example:
    >>> import time
    >>> try:
    ...     with time_limit(0.05):
    ...         time.sleep(1)
    ... except CaseTimeout:
    ...     print("stopped")
    stopped
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["CaseTimeout", "time_limit"]


class CaseTimeout(BaseException):
    """Raised inside an answer that ran past its time limit (a BaseException, so a learner's
    ``except Exception`` cannot swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None, error: type[BaseException] = CaseTimeout) -> Iterator[None]:
    """Interrupt the block after ``seconds`` by raising ``error`` (SIGALRM: the main thread on
    POSIX only; elsewhere, or with no ``seconds``, there is no limit). The grader's worker
    uses it for definitions too."""
    usable = (
        seconds and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def _raise(signum, frame):
        raise error()

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
