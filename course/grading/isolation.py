"""Where learner code runs: never on the grader's import path, never beside a classmate.

Two levels, one per command:

- **Every process the grader starts** is an isolated Python (``python -I``: no current folder,
  no ``PYTHONPATH``, no user site on ``sys.path``) that puts the folder the grader's own
  ``course`` package came from first, runs in a private folder, and inherits an environment
  without the signing key and with a private ``TMPDIR``::

      python_command("course.grading.worker", "--serve", "0")
      # [sys.executable, "-I", "-c", "<put COURSE_ROOT first, run the module>", "course.grading.worker", ...]
      # OK: a committed course/grading/worker.py or copy.py in the learner's checkout is never imported

- **Each learner of a gradebook, the room and regrade** is graded in a sandbox:
  :func:`course.grading.sandbox.run_untrusted` (bubblewrap, an allow-list of read-only
  binds, an unprivileged uid, limits), whose fallback where bubblewrap cannot run uses
  :func:`limits` (a separate process, a private copy, resource limits).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["child_env", "course_root", "limits", "no_dump", "python_command"]
_BOOT = (
    "import runpy, sys; sys.path.insert(0, {root!r}); name = sys.argv.pop(1); "
    "runpy.run_module(name, run_name='__main__', alter_sys=True)"
)
_DROPPED = (
    "COURSE_GRADE_KEY",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONSAFEPATH",
)


def course_root() -> str:
    """The folder that holds the ``course`` package this grader runs."""
    import course

    return str(Path(course.__file__).resolve().parent.parent)


def python_command(module: str, *args: str) -> list[str]:
    """``python -I`` running ``module`` with the grader's own ``course`` first on ``sys.path``."""
    return [sys.executable, "-I", "-c", _BOOT.format(root=course_root()), module, *args]


def child_env(tmp: Path | None = None) -> dict[str, str]:
    """This environment without the signing key nor Python's path variables; ``TMPDIR`` set
    to ``tmp`` (so what learner code leaves in temporary files goes when the grade ends)."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return env


def no_dump() -> None:
    """Linux: make this process non-dumpable, so a process without ``CAP_SYS_PTRACE`` (learner
    code in a sandbox) cannot read its memory, environment or file descriptors via ``/proc``."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        except (OSError, AttributeError):
            pass


def limits(file_bytes: int = 1 << 30) -> None:
    """Resource limits for a process that runs learner code without a sandbox (a
    ``preexec_fn``): no file larger than ``file_bytes``, no core dumps, a new session."""
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()
