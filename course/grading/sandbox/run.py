"""``run_untrusted``: run a command that runs learner code, on the kernel's isolation where it exists.

::

    run = run_untrusted(lambda folder: python_command("course", "grade", folder, ...),
                        inputs=private_copy, stdin=one_time_key, timeout=600)
    run.returncode, run.stdout, run.said, run.isolation, run.timed_out

NOTE [What bubblewrap gives, and what the fallback gives]
With bubblewrap (Linux: CI runners, hubs, instructors' machines):

1. new namespaces of every kind (mount, PID, network, IPC, UTS, cgroup; user too when not
   root), so no network (no TCP, and no ``AF_UNIX`` socket of the host: no socket folder is
   bound), no view of the host's processes;
2. a PID namespace whose first process's exit ends every process in it, and
   ``--die-with-parent``: a PID-hopping descendant cannot outlive the grade, with no scan;
3. the allow-list of read-only binds of :mod:`course.grading.sandbox.binds`, a size-capped
   ``/tmp``, ``/dev/shm`` and working folder;
4. an unprivileged uid: as root, a uid of its own per sandbox (``setuid`` after bwrap has
   mounted, ``no_new_privs`` set, no capability left), so root-owned files are unreadable
   and the process limit binds it; otherwise the user's own uid in a user namespace;
5. memory and process limits (:mod:`course.grading.sandbox.limits`: a cgroup where one can
   be made, else rlimits);
6. no host path in an argv learner code can read: the mounts reach bwrap through a pipe
   (``--args``), so ``/proc/1/cmdline`` names only the command; bwrap's own environment is
   ``PATH`` alone, and its file descriptors are closed to the sandbox's uid;
7. a wall-clock limit: past ``timeout`` the sandbox is killed (and everything in it with it).

Without it (macOS, Windows, Linux without bubblewrap): a separate process in a private
folder, a new session, rlimits (file size, no core dumps), and the grader's own supervision
(:mod:`course.grading.processes`); ``isolation`` says so, and the commands say it loudly.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from course.grading.isolation import child_env, course_root, limits
from course.grading.sandbox.binds import SANDBOX_DIR, mount_args
from course.grading.sandbox.limits import Limits, prepare, sandbox_uid

__all__ = [
    "NO_SANDBOX",
    "Run",
    "bwrap_prefix",
    "run_untrusted",
    "sandbox_available",
    "spawn_bwrap",
    "why_no_sandbox",
]

NO_SANDBOX = "none (separate process, private copy, limits)"
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # bwrap's own environment: nothing else of ours
_DROP = (  # as root, after bwrap mounted: no new privileges, then a uid of the sandbox's own
    "import ctypes, os, sys; ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0); "
    "os.setgroups([]); os.setgid({uid}); os.setuid({uid}); os.execvp(sys.argv[1], sys.argv[1:])"
)
_SETPRIV = "/usr/bin/setpriv"  # under /usr, which the sandbox binds
_PROBE = (
    "import importlib.util, sys; sys.path.insert(0, {root!r}); "
    "missing = [m for m in ('course', 'torch') if importlib.util.find_spec(m) is None]; "
    "missing and sys.exit('cannot import ' + ', '.join(missing))"
)


@dataclass
class Run:
    """What a sandboxed command left: its exit status (None: killed at the limit), its stdout,
    the last line it said on stderr, the isolation it ran under, and whether it timed out."""

    returncode: int | None
    stdout: bytes
    said: str
    isolation: str
    timed_out: bool = False
    limits: str = ""  # "cgroup v1: memory 4096 MiB, 512 processes", or the rlimits


def _namespaces() -> list[str]:
    if os.geteuid() == 0:  # bwrap as root: no user namespace, the uid is dropped by _DROP
        return [
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
        ]
    return ["--unshare-all", "--disable-userns", "--cap-drop", "ALL"]


def bwrap_prefix(inputs: Path, tmp_bytes: int = 256 << 20) -> tuple[list[str], list[str]]:
    """(bubblewrap's arguments, the command prefix that drops to the sandbox's uid), for
    ``inputs`` bound at ``SANDBOX_DIR/in`` (NOTE [What bubblewrap gives, and what the fallback
    gives])."""
    args = [*mount_args(inputs, tmp_bytes), *_namespaces(), "--die-with-parent", "--new-session"]
    args += ["--chdir", SANDBOX_DIR, "--clearenv"]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": SANDBOX_DIR, "TMPDIR": "/tmp"}
    env |= {"USER": "learner", "LOGNAME": "learner", "COURSE_SANDBOX": "bubblewrap"}
    env |= {k: os.environ[k] for k in ("LANG", "LC_ALL") if k in os.environ}
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args, _drop_to(sandbox_uid()) if os.geteuid() == 0 else []


def _drop_to(uid: int) -> list[str]:
    """The command prefix that, in the sandbox, becomes ``uid`` for good (real, effective and
    saved; no group, no capability, ``no_new_privs``): util-linux's ``setpriv`` where it is (a
    millisecond), else a Python that does the same (a Python's start, 20-40 ms)."""
    if os.path.exists(_SETPRIV):
        return [
            _SETPRIV,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--no-new-privs",
            "--",
        ]
    return [sys.executable, "-I", "-S", "-c", _DROP.format(uid=uid)]


def spawn_bwrap(
    bwrap: str, args: list[str], command: list[str], extra_fds: tuple = (), **kw
) -> subprocess.Popen:
    """bwrap with its arguments through a pipe (``--args``): not in any argv learner code reads."""
    read, write = os.pipe()
    try:
        payload = b"".join(a.encode("utf-8", "surrogateescape") + b"\0" for a in args)
        if len(payload) > 60_000:
            raise RuntimeError("too many bubblewrap arguments for one pipe")
        os.write(write, payload)
        os.close(write)
        write = -1
        return subprocess.Popen(
            [bwrap, "--args", str(read), *command], pass_fds=(read, *extra_fds), env=_ENV, **kw
        )
    finally:
        os.close(read)
        if write != -1:
            os.close(write)


def _probe() -> str:
    return _probe_for(sys.executable, shutil.which("bwrap") or "")


@functools.cache
def _probe_for(python: str, bwrap: str) -> str:
    """ "" when bubblewrap runs the grader's Python here; "absent" or "no namespaces" when it
    cannot run at all (the fallback then); RuntimeError when it runs but our Python cannot
    start in it (a sandbox that cannot start the grader would score every learner 0).

    One sandbox starts the grader's Python (a tenth of a second); only when that fails does
    a second, of ``/bin/sh`` alone, tell "no namespaces here" from "our Python cannot start"."""
    if not bwrap:
        return "absent"
    with tempfile.TemporaryDirectory(prefix="course-probe-") as tmp:
        os.chmod(tmp, 0o755)
        args, drop = bwrap_prefix(Path(tmp))
        probe = [*drop, python, "-I", "-c", _PROBE.format(root=course_root())]
        try:
            started = spawn_bwrap(bwrap, args, probe, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, err = started.communicate(timeout=120)
        except OSError:
            return "no namespaces"
        if started.returncode == 0:
            return ""
        with contextlib.suppress(OSError):  # can bubblewrap make namespaces here at all?
            true = spawn_bwrap(
                bwrap, args, ["/bin/sh", "-c", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            if true.wait(60) != 0:
                return "no namespaces"
    why = " ".join(err.decode("utf-8", "replace").split())[-300:]
    raise RuntimeError(
        f"the sandbox cannot start the grader's Python ({why or f'exit {started.returncode}'})"
    )


def sandbox_available() -> bool:
    """Whether :func:`run_untrusted` runs in bubblewrap here (RuntimeError: it would, but the
    grader's Python cannot start in it)."""
    return _probe() == ""


_WHY = {"absent": "bubblewrap is not installed", "no namespaces": "bubblewrap cannot make namespaces here"}


def why_no_sandbox() -> str:
    """ "" when :func:`run_untrusted` runs in bubblewrap here; else, in words, why it does not
    (``course grade`` prints it when it falls back, and exits 2 with ``--sandbox``)."""
    try:
        return _WHY.get(_probe(), "")
    except RuntimeError as e:
        return str(e)


def _tail(stream, keep: int = 4096) -> Callable[[], str]:
    """Read ``stream`` to its end in a thread, keeping its last ``keep`` bytes; returns a
    function giving the last line read ("" if none)."""
    kept = bytearray()

    def drain() -> None:
        for chunk in iter(lambda: stream.read1(1 << 16), b""):
            kept.extend(chunk)
            del kept[:-keep]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()

    def last_line() -> str:
        reader.join(timeout=10)
        if not reader.is_alive():
            stream.close()
        lines = kept.decode("utf-8", "replace").strip().splitlines()
        return lines[-1].strip() if lines else ""

    return last_line


def run_untrusted(
    argv: Callable[[str], list[str]],
    inputs: Path,
    stdin: bytes = b"",
    timeout: float = 600,
    limits_: Limits | None = None,
    stdout_limit: int = 16 << 20,
    secret: bytes | None = None,
    bubblewrap: bool | None = None,
) -> Run:
    """Run ``argv(folder)`` (``folder``: where ``inputs`` is seen) in a sandbox: bubblewrap
    where it runs, else the fallback (NOTE above). ``stdin`` is written and closed at once;
    stdout is kept (at most ``stdout_limit`` bytes); past ``timeout`` s everything is killed.

    ``secret`` (the instructor's extra cases): a file at ``folder/../secret.py`` that the command
    reads before any learner code runs and then removes (``course grade`` does, inside a
    sandbox), never in ``inputs``, which stays there read-only for all to read.

    ``bubblewrap``: None asks first whether it runs here (:func:`why_no_sandbox`, cached);
    True runs it without asking (the caller asks only when the run fails: ``course grade``),
    False runs the fallback.
    """
    limits_ = limits_ or Limits()
    if bubblewrap is None:
        bubblewrap = _probe() == ""
    bwrap = shutil.which("bwrap") if bubblewrap else None
    with tempfile.TemporaryDirectory(prefix="course-sandbox-") as tmp:
        os.chmod(inputs, 0o755)
        for p in inputs.iterdir():
            os.chmod(p, 0o644)
        out_path = Path(tmp) / "stdout"
        holder = prepare(limits_) if bwrap else None
        try:
            with open(out_path, "wb") as out:
                if bwrap:
                    proc = _start_in_bubblewrap(bwrap, argv, inputs, Path(tmp), out, holder, secret)
                else:
                    proc = _start_without(argv, inputs, Path(tmp), out, secret)
                said = _tail(proc.stderr)
                timed_out = _feed_and_wait(proc, stdin, timeout)
        finally:
            if holder is not None:
                holder.close()
        with open(out_path, "rb") as f:
            stdout = f.read(stdout_limit + 1)
    if len(stdout) > stdout_limit:
        stdout = b""
    isolation = "bubblewrap" if bwrap else NO_SANDBOX
    described = holder.describe() if holder else "rlimits: file size, no core dumps"
    return Run(None if timed_out else proc.returncode, stdout, said(), isolation, timed_out, described)


def _start_in_bubblewrap(bwrap, argv, inputs: Path, tmp: Path, out, holder, secret) -> subprocess.Popen:
    args, drop = bwrap_prefix(inputs, holder.limits.tmp_bytes)
    pass_fds: tuple = ()
    if secret is not None:  # copied by bwrap into the sandbox's own tmpfs
        held = tmp / "secret"
        held.write_bytes(secret)
        pass_fds = (os.open(held, os.O_RDONLY),)
        args += ["--perms", "0644", "--file", str(pass_fds[0]), f"{SANDBOX_DIR}/secret.py"]
    try:
        return spawn_bwrap(
            bwrap,
            args,
            [*drop, *argv(f"{SANDBOX_DIR}/in")],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.PIPE,
            preexec_fn=holder.preexec,
            start_new_session=True,
            extra_fds=pass_fds,
        )
    finally:
        for fd in pass_fds:
            os.close(fd)


def _start_without(argv, inputs: Path, tmp: Path, out, secret) -> subprocess.Popen:
    """The fallback: a separate process in a private folder, with rlimits. ``COURSE_SANDBOX``
    tells a ``course grade`` started so that this process chose where it runs."""
    if secret is not None:
        (inputs.parent / "secret.py").write_bytes(secret)
    (tmp / "cwd").mkdir()
    (tmp / "tmp").mkdir()
    return subprocess.Popen(
        argv(str(inputs)),
        stdin=subprocess.PIPE,
        stdout=out,
        stderr=subprocess.PIPE,
        cwd=tmp / "cwd",
        env={**child_env(tmp / "tmp"), "COURSE_SANDBOX": NO_SANDBOX},
        preexec_fn=limits,
    )


def _feed_and_wait(proc: subprocess.Popen, stdin: bytes, timeout: float) -> bool:
    """Write ``stdin`` and close it, wait; past ``timeout`` kill everything (True: timed out)."""
    with contextlib.suppress(OSError):  # it may have died before reading
        proc.stdin.write(stdin)
        proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
        return True
    return False
