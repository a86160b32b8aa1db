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
  roster, the cache and anything else named in ``hide`` replaced by empty read-only folders
  (only the grader's own Python and course are bound back, read-only), no network, no
  capabilities, new PID namespace (nothing outside is visible in ``/proc``), killed with its
  parent::

      sandbox_command(argv, inputs, hide=[Path.home()])
      # [bwrap, "--ro-bind", "/", "/", ..., "--tmpfs", "/root", "--ro-bind", <the Python>, ...]
      # OK: a venv in /tmp or an interpreter in ~/.pyenv still starts in the sandbox
      # BAD: a Python that cannot start in it: RuntimeError, naming what is missing

  Where bubblewrap cannot run, :func:`sandbox_command` returns None and the caller says so
  loudly and falls back to :func:`limits` (a separate process, a private copy, resource
  limits): the strongest isolation left to an unprivileged process.
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
    "needed_paths",
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


# NOTE [What the grader's Python needs in the sandbox]
# The sandbox starts from the whole machine read-only, then replaces some folders by empty
# tmpfs: /tmp and /run always (writable, size-capped), and every path in ``hide`` (the roster,
# the cache, the home folder; read-only). The grader's own Python must survive that: the course, the virtual environment
# (sys.prefix: pyvenv.cfg, site-packages with torch and, on a CUDA wheel, nvidia/*), the base
# interpreter (sys.base_prefix: the standard library) and the executable, each as named and
# as its link resolves.
# 1. A needed path under a replaced folder is bound back read-only, after that folder's tmpfs
#    (mounts go parents first), and nothing else of that folder:
#      venv in /tmp/ci-venv, hide ~            # --tmpfs /tmp ... --ro-bind /tmp/ci-venv /tmp/ci-venv
#      pyenv Python in ~/.pyenv, hide ~        # --tmpfs ~ --ro-bind ~/.pyenv/versions/3.11.7 ...
# 2. A hidden path inside a needed one stays hidden (its tmpfs comes after the bind):
#      course in /srv/course, roster /srv/course/roster   # --ro-bind ... --tmpfs .../roster
# 3. The sandbox is probed twice: /bin/true (can bubblewrap make namespaces here? if not, None,
#    and the caller falls back loudly), then the grader's Python finding ``course`` and
#    ``torch`` (if not, RuntimeError with what failed: a sandbox that cannot start the grader
#    would otherwise score every learner 0 without a word).
# Found on CI's torch 2.14.1 leg, whose venv lives in ${TMPDIR:-/tmp}: the sandbox's /tmp hid
# it, bubblewrap could not exec the interpreter, and every learner scored 0. The fault was
# ours, not the CUDA wheel's: with its venv visible, the gradebook's tests pass on 2.14.1.

_REPLACED = ("/tmp", "/run")  # always an empty tmpfs in the sandbox
_PROBE = (
    "import importlib.util, sys; sys.path.insert(0, {root!r}); "
    "missing = [m for m in ('course', 'torch') if importlib.util.find_spec(m) is None]; "
    "missing and sys.exit('cannot import ' + ', '.join(missing))"
)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def needed_paths() -> list[str]:
    """What the grader's Python needs to start: the course, the venv, the base interpreter, the
    executable and the folders on its import path (a ``.pth`` file or a venv made with
    ``--system-site-packages`` adds another venv's), as named and resolved; none inside another."""
    paths = {course_root()}
    on_path = [p for p in sys.path if os.path.isabs(p) and os.path.isdir(p) and p != os.getcwd()]
    for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, sys.executable, *on_path):
        paths |= {os.path.abspath(p), os.path.realpath(p)}
    return sorted(p for p in paths if not any(q != p and _inside(p, q) for q in paths))


def _mounts(hide: list[Path]) -> list[str]:
    """bubblewrap arguments: a read-only tmpfs per existing ``hide``, then every needed path
    they or ``/tmp``/``/run`` would hide, bound back read-only; parents before children."""
    hidden = sorted({str(Path(h).resolve()) for h in hide if Path(h).exists()})
    shadows = [*_REPLACED, *hidden]
    back = [p for p in needed_paths() if any(_inside(p, s) for s in shadows) and os.path.exists(p)]
    mounts = [(h, 0) for h in hidden] + [(p, 1) for p in back]  # at one depth: the tmpfs first
    out: list[str] = []
    for path, bind in sorted(mounts, key=lambda m: (len(Path(m[0]).parts), m[1])):
        out += ["--ro-bind", os.path.realpath(path), path] if bind else ["--tmpfs", path]
    for h in hidden:  # empty and read-only: nothing to fill memory with
        out += ["--remount-ro", h]
    return out


def sandbox_command(
    argv: list[str], inputs: Path, hide: list[Path], tmp_bytes: int = 256 << 20
) -> list[str] | None:
    """``argv`` wrapped in bubblewrap: ``inputs`` read-only at ``SANDBOX_DIR/in``, the working
    folder and ``/tmp`` private tmpfs of ``tmp_bytes`` each, every path in ``hide`` replaced
    by an empty folder except what the grader's Python needs (NOTE [What the grader's Python
    needs in the sandbox]). None when bubblewrap is missing or cannot make namespaces here;
    RuntimeError when it can but the grader's Python cannot start in it."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None
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
        *_mounts(hide),
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
    if subprocess.run(cmd + ["/bin/true"], capture_output=True, timeout=60).returncode != 0:
        return None
    probe = [sys.executable, "-I", "-c", _PROBE.format(root=course_root())]
    started = subprocess.run(cmd + probe, capture_output=True, timeout=120)
    if started.returncode != 0:
        why = " ".join(started.stderr.decode("utf-8", "replace").split())[-300:]
        raise RuntimeError(
            f"the sandbox cannot start the grader's Python ({why or f'exit {started.returncode}'})"
        )
    return cmd + argv
