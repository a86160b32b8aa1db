"""Warm checking servers: one bubblewrap sandbox per notebook, started before the notebook exists.

A live room (``course room --watch``) must show a saved notebook within seconds, yet a
sandboxed ``course grade`` spends most of its time before any learner code runs: starting
Python, importing torch and the checks, computing the oracles. So we start that part early::

    pool = WarmPool(lesson=1, size=2)      # two sandboxes, each a checking server, getting ready
    server = pool.take()                   # a ready one (or the next to be ready); a new one starts
    outcomes = server.check(exercises, "01_autograd_graph.ipynb", data, cell_timeout=60, limit=300)
    # {"1.1": {"yours": [...], ...}, "1.2": {"failure": "timeout: ..."}}: as Checker.check gives
    pool.close()

NOTE [A warm sandbox holds one learner's notebook, once]
    1. A :class:`WarmServer` is ``python -m course.grading.worker --serve N`` (the checking
       server of :mod:`course.grading.worker`, unchanged) in a sandbox of its own, made as
       :func:`~course.grading.sandbox.run.run_untrusted` makes one (the allow-list of
       :mod:`~course.grading.sandbox.binds`, the namespaces, an unprivileged uid, the
       limits). Nothing of the host is writable in it: the notebook is written into its
       own size-capped tmpfs (``SANDBOX_DIR/work``, where its code runs) and the outcomes
       are read from there (``SANDBOX_DIR/out``), through ``/proc/PID/root`` of its first
       process (bwrap's ``--info-fd`` names it), while the server still waits.
    2. It imports everything and says ``ready`` before any notebook exists, then waits.
    3. It checks exactly one notebook: :meth:`WarmServer.check` writes the notebook into
       ``work``, sends the one job, reads the outcomes (:func:`course.grading.checker.read_outcomes`:
       regular files only, size-capped, ``torch.load(weights_only=True)``) and ends the
       sandbox, and everything in it, whatever the job did. Two learners' code never meet
       in one process, one folder or one sandbox; the pool starts a fresh one to replace it.
    4. Nothing is judged in here: the caller compares the outcomes with the oracle's, in a
       process that runs no learner code (``course room`` does, as ``course grade`` does).
    5. Past ``2 * limit + 60`` s the job counts as timed out and the sandbox is killed.

Where bubblewrap does not run, :func:`warm_available` is False and callers grade as before
(:func:`course.classroom.gradebook.grade_sandboxed`, which says how it isolated).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from course.grading.checker import read_outcomes
from course.grading.isolation import python_command
from course.grading.sandbox.binds import SANDBOX_DIR
from course.grading.sandbox.limits import Limits, prepare
from course.grading.sandbox.run import bwrap_prefix, sandbox_available, spawn_bwrap

__all__ = ["ISOLATION", "WarmPool", "WarmServer", "warm_available"]

ISOLATION = "bubblewrap (warm)"


def warm_available() -> bool:
    """Whether warm sandboxes can run here (bubblewrap runs the grader's Python)."""
    try:
        return sandbox_available()
    except RuntimeError:
        return False


class WarmServer:
    """One checking server for ``lesson`` in a sandbox of its own, for one notebook (NOTE above)."""

    def __init__(self, lesson: int, limits: Limits | None = None):
        self.lesson = lesson
        self.tmp = Path(tempfile.mkdtemp(prefix="course-warm-"))
        (self.tmp / "in").mkdir(mode=0o755)  # empty: the notebook goes into the sandbox's own tmpfs
        self.holder = prepare(limits or Limits())
        args, drop = bwrap_prefix(self.tmp / "in", (limits or Limits()).tmp_bytes)
        info, told = os.pipe()  # bwrap says there the pid of the sandbox's first process
        args += ["--info-fd", str(told)]
        self.err = open(self.tmp / "stderr", "wb")  # noqa: SIM115 (closed in close())
        try:
            self.proc = spawn_bwrap(
                shutil.which("bwrap") or "bwrap",
                args,
                [*drop, *python_command("course.grading.worker", "--serve", str(lesson))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.err,
                preexec_fn=self.holder.preexec,
                start_new_session=True,
                extra_fds=(told,),
            )
        finally:
            os.close(told)
        said = b""
        with os.fdopen(info, "rb", buffering=0) as f:  # {"child-pid": N} on a few lines, then more
            while b"}" not in said and (chunk := f.read(4096)):
                said += chunk
        pid = json.loads(said[: said.find(b"}") + 1] or b"{}").get("child-pid", 0)
        self.root = Path(f"/proc/{pid}/root")  # the sandbox's root, seen from here
        self.ready = threading.Event()
        self.reply: dict = {}
        self.ended = threading.Event()
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("ready"):
                self.ready.set()
            elif isinstance(msg, dict) and "job" in msg:
                self.reply = msg
                break
        self.ended.set()
        self.ready.set()  # a server that died is "ready" to say so

    def why_dead(self) -> str:
        with contextlib.suppress(OSError):
            tail = (self.tmp / "stderr").read_bytes()[-400:].decode("utf-8", "replace").strip().splitlines()
            if tail:
                return f"the checking server stopped: {tail[-1][:200]}"
        return "the checking server stopped"

    def check(
        self, exercises: list, name: str, cells: list, text: str, cell_timeout: float, limit: float
    ) -> dict:
        """Every exercise's outcomes, by id (``{"failure": why}`` where there are none); the
        sandbox is ended afterwards, whatever happened."""
        try:
            if not self.ready.wait(600) or self.ended.is_set():
                why = self.why_dead()
                return {ex.id: {"failure": why} for ex in exercises}
            inside = self.root / SANDBOX_DIR.lstrip("/")  # its own size-capped tmpfs
            for folder in ("work", "out"):  # made here, before any learner code runs
                (inside / folder).mkdir()
                os.chmod(inside / folder, 0o777)
            (inside / "work" / name).write_text(text, encoding="utf-8")
            spec = {
                "job": "1",
                "exercises": [ex.id for ex in exercises],
                "cells": cells,
                "cwd": f"{SANDBOX_DIR}/work",
                "cell_timeout": cell_timeout,
                "limit": limit,
                "out": f"{SANDBOX_DIR}/out",
            }
            try:
                self.proc.stdin.write((json.dumps(spec) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                return {ex.id: {"failure": self.why_dead()} for ex in exercises}
            finished = self.ended.wait(2 * limit + 60)
            reports = {ex.id: read_outcomes(inside / "out" / f"{ex.id}.pt") for ex in exercises}
            if finished and self.reply.get("exit") == 0:
                return reports
            why = (
                f"timeout: checking ran past {2 * limit + 30:g} s"
                if not finished or self.reply.get("exit") == "killed"
                else f"the checking process failed (exit {str(self.reply.get('exit'))[:40]})"
            )
            return {i: r if "failure" not in r else {"failure": why} for i, r in reports.items()}
        finally:
            self.close()

    def close(self) -> None:
        """End the sandbox and everything in it; remove its folders."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()
        self.holder.close()
        self.err.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class WarmPool:
    """``size`` warm servers for ``lesson`` kept starting or ready; :meth:`take` hands one out
    (each used once) and has its replacement started.

    Every server waiting in the pool is started by the pool's own thread, which lives as long
    as the pool: bubblewrap's ``--die-with-parent`` ends a sandbox when the *thread* that
    started it ends (the kernel's parent-death signal), so a replacement started by a
    short-lived grading thread died with it. A server made on demand by :meth:`take` is used
    at once, by the thread that made it."""

    def __init__(self, lesson: int, size: int = 1):
        self.lesson, self.size = lesson, max(1, size)
        self.lock = threading.Lock()
        self.closed = False
        self.servers: list[WarmServer] = []
        self.wanted: queue.SimpleQueue = queue.SimpleQueue()  # one item per server to start; None: stop
        self.starter = threading.Thread(target=self._starter, daemon=True)
        self.starter.start()
        for _ in range(self.size):
            self.wanted.put(True)

    def _starter(self) -> None:
        while self.wanted.get() is not None:
            if self.closed:  # asked for before the pool closed: no longer wanted
                continue
            server = WarmServer(self.lesson)
            with self.lock:
                if not self.closed:
                    self.servers.append(server)
                    continue
            server.close()

    def take(self, replace: bool = True) -> WarmServer:
        """The oldest live server (the first to be ready), else a new one; a fresh one is
        started to take its place unless ``replace`` is False (no more notebooks are coming)."""
        with self.lock:
            if self.closed:
                raise RuntimeError("the pool is closed")
            live = [s for s in self.servers if not s.ended.is_set()]
            dead = [s for s in self.servers if s.ended.is_set()]
            self.servers = live[1:]
            server = live[0] if live else None
        for s in dead:  # a sandbox that stopped while it waited (killed for memory, say)
            s.close()
            self.wanted.put(True)
        if replace:
            self.wanted.put(True)
        return server or WarmServer(self.lesson)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            servers, self.servers = self.servers, []
        self.wanted.put(None)
        for server in servers:
            server.close()
        # a server the starter was making when we closed: it closes it itself; wait for that,
        # or the process may end first and leave the server's folder behind
        self.starter.join(timeout=60)
