"""The grader's side of the checking: a JSON-lines client for the checking server, the
no-fork fallback, and reading the outcome files they leave (never trusting them).

::

    checker = Checker({0, 1}, tmp)            # python -I -m course.grading.worker --serve 0 1, in tmp/cwd
    checker.wait_ready()
    outcomes = checker.check(exercises, cells, cwd, cell_timeout=60, limit=300, tmp=tmp)
    # {"0.1": {"yours": [...], "cost": {...}, ...}, "0.2": {"failure": "timeout: ..."}}
    checker.stop()

An outcome file is read as a regular file only (a FIFO or symlink planted in its place is
refused at once), at most :data:`OUTCOME_LIMIT` bytes, and its ``torch.save`` archive is
checked before ``torch.load(weights_only=True)`` sees it: stored, never compressed, at most
:data:`OUTCOME_UNPACKED_LIMIT` bytes unpacked (a 1 MB file must not become a 1 GiB tensor)::

    read_outcomes(Path("0.1.pt"))   # OK: {"yours": [...], ...}
    read_outcomes(Path("fifo.pt"))  # BAD input, fine answer: {"failure": "... not a regular file ..."}
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path

from course.grading.isolation import child_env, python_command
from course.grading.untrusted import Untrusted, clean_text, read_regular

__all__ = [
    "OUTCOME_LIMIT",
    "OUTCOME_UNPACKED_LIMIT",
    "Checker",
    "check_archive",
    "read_outcomes",
    "run_worker",
]

OUTCOME_LIMIT = 64 << 20  # bytes: an outcome file larger than this (on disk) is not decoded
OUTCOME_UNPACKED_LIMIT = 512 << 20  # bytes: nor one whose archive unpacks to more than this


class Checker:
    """The checking server (``python -m course.grading.worker --serve``), one per session."""

    def __init__(self, lessons: set[int], tmp: Path, extra: tuple[str, str] | None = None):
        self.err_path = tmp / "checker.err"
        more = ["--extra-cases", *extra] if extra else []  # (path, sha256) of the instructor's file
        with open(
            self.err_path, "wb"
        ) as err:  # python -I, in a private folder: nothing of the cwd is imported
            self.proc = subprocess.Popen(
                python_command("course.grading.worker", "--serve", *map(str, sorted(lessons)), *more),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=tmp / "cwd",
                env=child_env(tmp / "tmp"),
            )
        self.replies: dict[str, dict] = {}
        self.ready = self.dead = False
        self.cond = threading.Condition()
        self.jobs = itertools.count()
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                if msg.get("ready"):
                    self.ready = True
                elif "job" in msg:
                    self.replies[str(msg["job"])] = msg
                self.cond.notify_all()
        with self.cond:
            self.dead = True
            self.cond.notify_all()

    def _why_dead(self) -> str:
        try:
            tail = (
                read_regular(self.err_path, 64 << 20)[-400:].decode("utf-8", "replace").strip().splitlines()
            )
        except (OSError, Untrusted):
            tail = []
        return "the checking server stopped" + (f": {clean_text(tail[-1], 200)}" if tail else "")

    def wait_ready(self, timeout: float = 600) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.ready or self.dead, timeout)

    def check(
        self, exercises: list, cells: list, cwd: Path, cell_timeout: float, limit: float, tmp: Path
    ) -> dict:
        """Every exercise's worker report, by id (``{"failure": why}`` where there is none)."""
        job = str(next(self.jobs))
        out = Path(tempfile.mkdtemp(prefix=f"out-{job}-", dir=tmp))
        spec = {
            "job": job,
            "exercises": [ex.id for ex in exercises],
            "cells": cells,
            "cwd": str(cwd),
            "cell_timeout": cell_timeout,
            "limit": limit,
            "out": str(out),
        }
        with self.cond:
            self.cond.wait_for(lambda: self.ready or self.dead, 600)
            try:
                if self.dead or not self.ready:
                    raise BrokenPipeError
                self.proc.stdin.write((json.dumps(spec) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                why = self._why_dead()
                return {ex.id: {"failure": why} for ex in exercises}
            finished = self.cond.wait_for(lambda: job in self.replies or self.dead, 2 * limit + 60)
        if not finished and not self.dead:  # never wait on a stuck server again: end it
            self.stop()
        reports = {ex.id: read_outcomes(out / f"{ex.id}.pt") for ex in exercises}
        reply = self.replies.pop(job, None)
        if reply is None:
            why = f"timeout: checking ran past {2 * limit + 60:g} s" if not finished else self._why_dead()
        elif reply.get("exit") != 0:
            why = (
                f"timeout: checking ran past {2 * limit + 30:g} s"
                if reply.get("exit") == "killed"
                else f"the checking process failed (exit {clean_text(reply.get('exit'), 40)})"
            )
        else:
            return reports
        return {i: r if "failure" not in r else {"failure": why} for i, r in reports.items()}

    def stop(self) -> None:
        """End the server (idle once every job has its reply: nothing to finish)."""
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait()


def read_outcomes(path: Path) -> dict:
    """A worker's report for one exercise, loaded as data only; ``{"failure": why}`` if unusable."""
    import torch

    if not os.path.lexists(path):
        return {"failure": "the checking process ended without a report"}
    try:
        data = read_regular(path, OUTCOME_LIMIT)
        check_archive(data)
        report = torch.load(io.BytesIO(data), weights_only=True)
        assert isinstance(report, dict)
        if isinstance(report.get("failure"), str):
            return {"failure": report["failure"]}
        assert isinstance(report.get("yours"), list)
        assert all(
            isinstance(o, dict) and o.get("kind") in {"value", "raised", "not attempted", "timeout"}
            for o in report["yours"]
        )
        return report
    except Untrusted as e:
        return {"failure": f"the checking process reported something unreadable ({e})"}
    except Exception as e:
        return {"failure": f"the checking process reported something unreadable ({type(e).__name__})"}


def check_archive(data: bytes) -> None:
    """An outcome file (a ``torch.save`` zip) that unpacks to more than the cap, or is
    compressed at all (``torch.save`` never compresses), is refused before it is decoded."""
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
    if any(i.compress_type != zipfile.ZIP_STORED for i in infos):
        raise Untrusted("a compressed archive, which torch.save never writes")
    if sum(i.file_size for i in infos) > OUTCOME_UNPACKED_LIMIT:
        raise Untrusted(f"unpacks to more than {OUTCOME_UNPACKED_LIMIT} bytes")


def run_worker(
    exercises: list, cells: list, cwd: Path, cell_timeout: float, limit: float, tmp: Path, extra=None
) -> dict:
    """Where there is no fork: one fresh worker process for one exercise; its report by id.
    ``extra``: (path, sha256) of the instructor's extra cases, loaded by that process too."""
    (ex,) = exercises
    spec, out, err = (
        tmp / f"{ex.id}.json",
        Path(tempfile.mkdtemp(prefix=f"out-{ex.id}-", dir=tmp)),
        tmp / f"{ex.id}.err",
    )
    spec.write_text(
        json.dumps(
            {
                "exercises": [ex.id],
                "cells": cells,
                "cwd": str(cwd),
                "cell_timeout": cell_timeout,
                "limit": limit,
                "extra": extra,
            }
        )
    )
    with open(err, "wb") as stderr:
        try:
            proc = subprocess.run(
                python_command("course.grading.worker", str(spec), str(out)),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=tmp / "cwd",
                env=child_env(tmp / "tmp"),
                timeout=limit + 120,
            )
        except subprocess.TimeoutExpired:
            return {ex.id: {"failure": f"timeout: checking ran past {limit:g} s"}}
    report = read_outcomes(out / f"{ex.id}.pt")
    if proc.returncode != 0 and "failure" in report:
        report = {"failure": f"the checking process failed (exit {proc.returncode})"}
    return {ex.id: report}
