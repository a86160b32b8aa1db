"""Where learner code runs: never on the grader's import path, never beside a classmate.

Two levels, one per command:

- **Every process the grader starts** is an isolated Python (``python -I``: no current folder,
  no ``PYTHONPATH``, no user site on ``sys.path``) that puts the folder the grader's own
  ``course`` package came from first, runs in a private folder, and inherits an environment
  without the signing key and with a private ``TMPDIR``::

      python_command("course.grading.worker", "--serve", "0")
      # [sys.executable, "-I", "-c", "<put COURSE_ROOT first, run the module>", "course.grading.worker", ...]
      # OK: a committed course/grading/worker.py or copy.py in the learner's checkout is never imported

- **Each learner of a gradebook** is graded in a bubblewrap sandbox (:func:`sandbox_command`):
  the machine read-only, ``/tmp`` and the working folder private size-capped tmpfs, the
  roster, the cache and anything else named in ``hide`` replaced by empty folders, no
  network, no capabilities, new PID namespace (nothing outside is visible in ``/proc``),
  killed with its parent. Where bubblewrap cannot run, :func:`sandbox_command` returns None
  and the caller says so loudly and falls back to :func:`limits` (a separate process, a
  private copy, resource limits): the strongest isolation left to an unprivileged process.

Differences from torch: none (torch runs only its own code).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = [
    "SANDBOX_DIR",
    "child_env",
    "course_root",
    "limits",
    "no_dump",
    "python_command",
    "sandbox_command",
]

SANDBOX_DIR = "/run/sandbox"  # the learner's working folder inside the sandbox
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


def sandbox_command(
    argv: list[str], inputs: Path, hide: list[Path], tmp_bytes: int = 256 << 20
) -> list[str] | None:
    """``argv`` wrapped in bubblewrap: ``inputs`` read-only at ``SANDBOX_DIR/in``, the working
    folder and ``/tmp`` private tmpfs of ``tmp_bytes`` each, every path in ``hide`` replaced
    by an empty folder. None when bubblewrap is missing or cannot make namespaces here."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None
    root = course_root()
    env = child_env()
    cmd = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/run",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        SANDBOX_DIR,
    ]
    if root.startswith("/tmp/") or root.startswith("/run/"):  # the course itself must stay visible
        cmd += ["--ro-bind", root, root]
    needed = (root + os.sep, str(Path(sys.prefix).resolve()) + os.sep, str(Path(sys.executable).resolve()))
    for h in hide:  # never hide the course or the Python that runs it
        if Path(h).exists() and not any(n.startswith(str(Path(h).resolve()) + os.sep) for n in needed):
            cmd += ["--tmpfs", str(Path(h).resolve())]
    cmd += [
        "--ro-bind",
        str(inputs),
        f"{SANDBOX_DIR}/in",
        "--chdir",
        SANDBOX_DIR,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    for k in ("PATH", "LANG", "LC_ALL"):
        if k in env:
            cmd += ["--setenv", k, env[k]]
    cmd += ["--setenv", "HOME", SANDBOX_DIR, "--setenv", "TMPDIR", "/tmp"]
    probe = subprocess.run(cmd + ["/bin/true"], capture_output=True, timeout=60)
    return cmd + argv if probe.returncode == 0 else None
