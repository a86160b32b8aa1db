"""`course room HOMES --lesson N`: who is stuck on what, now, as a learner x exercise grid.

Point it at the folder that holds the learners' homes (on a JupyterHub with persistent homes,
where each ``HOMES/<learner>/autograd-course/`` is, as ``course hub-start`` made it) or at a
gradebook roster (``HOMES/<learner>/NN_*.ipynb``); the learner is the folder's name::

    $ course room /srv/homes --lesson 0
    lesson 00: 3 learners; 2 graded, 1 unchanged (6.2 s)

    learner   0.1                      0.2
    ada       passed                   passed
    bob       failed: forgot_backward  not attempted
    cy        failed: unrecognised     passed
    stuck     2 of 3                   0 of 3
    most met  forgot_backward (1)      -

    0.1 cube_sum_grad, 0.2 predicted_a_grad
    0.1 forgot_backward: x.grad stays None until something calls .backward() on a result ...

A cell is ``passed``; ``failed: NAME``, the answer behaves like the known wrong answer NAME of
the exercise's catalogue (the function's name in ``course/checks/lessonNN/`` without its
underscore, as the instructor notes list them; ``wrong answer K`` for a catalogued value);
``failed: unrecognised``, wrong in a way the catalogue does not know; ``error: ...``, the
answer raised or ran out of time; ``revealed``, a prediction whose answer the learner asked to
see; or ``not attempted``, still the stub, or no notebook (the row's note says which).
"stuck" counts the failed and error cells, "most met" names the commonest misconception; under
the grid, each exercise's name, and the hint of each misconception named.

NOTE [A refresh grades only what changed]
    1. Each learner's notebooks of the lesson are read (regular files only, no symlink
       followed) and hashed: the hash of what the grader reads of them, the code cells with
       their places (``course.grading.cells.code_cells``), so running a cell, which changes only outputs,
       grades nothing again (a notebook that is not JSON: the hash of its bytes). A cache
       entry in ``HOMES/.course-room/`` (``--cache DIR``) is named by (learner, notebook name,
       that hash, the grader's fingerprint) and signed with the gradebook's cache key: an
       unchanged notebook costs a read and a hash.
    2. A notebook whose code cells are all the learner copy's is "not attempted" throughout,
       without running (NOTE [Untouched notebooks are not run] in ``progress``).
    3. Every other notebook is graded in a sandbox of its own, ``-j`` at once (default: the
       CPU count): by the command, in a warm sandbox whose checking server was ready before
       the save, judged in the room's process (:mod:`course.classroom.room_grader`: the same
       checking server and the same judge as ``course grade --no-run``); where bubblewrap does
       not run, or for a file that is not a notebook, exactly as ``course gradebook`` grades
       it (``gradebook.grade_sandboxed``). Either way the verdict is decided outside learner
       code.
    4. A grading that did not finish is not cached: the next refresh tries again.
    5. A refresh that grades nothing imports no torch: the exercises are read from the checks'
       source (``lessons.registered_exercises``), the misconceptions' names and hints are
       stored in the entry when the notebook is graded. ``--watch`` is the exception on
       purpose: after its first grid it starts its warm sandboxes and computes the oracles,
       so that the first save shows within seconds.

``--watch S`` refreshes every S seconds until Ctrl-C and then prints only the learners whose
cells changed; ``--html FILE`` writes the grid as a page that reloads itself. This module makes
the grid (:func:`collect`); ``room_view`` draws it and is the command.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from pathlib import Path

from course import lessons
from course.classroom import gradebook
from course.grading.cells import code_cells
from course.grading.files import grader_fingerprint, write_atomically
from course.grading.signing import file_sha256, parse, sign, verify
from course.grading.untrusted import Untrusted, clean_text, read_regular
from course.learner import progress, workspace

__all__ = ["CACHE_DIR", "Cell", "Room", "Row", "collect", "learner_folders", "misconception_names"]

CACHE_DIR = ".course-room"
ENTRY_FORMAT = "course-room/1"
# When a learner has two notebooks of the lesson (a scratch copy), the better verdict shows.
_RANK = ("grading…", "not attempted", "error", "failed", "revealed", "passed")
GRADING = "grading…"  # a straggler: still grading when the refresh's deadline came


@dataclass(frozen=True)
class Cell:
    """One learner's verdict on one exercise.

    >>> str(Cell("failed", "forgot_backward")), str(Cell("passed")), str(Cell())
    ('failed: forgot_backward', 'passed', 'not attempted')
    """

    status: str = "not attempted"
    misconception: str = ""  # failed / error: a catalogued wrong answer's name, or "unrecognised"
    hint: str = field(default="", compare=False)  # that wrong answer's hint, for the legend

    def __str__(self) -> str:
        return f"{self.status}: {self.misconception}" if self.misconception else self.status

    @property
    def stuck(self) -> bool:
        return self.status in ("failed", "error")


@dataclass
class Row:
    learner: str
    cells: dict[str, Cell] = field(default_factory=dict)  # exercise id -> cell; absent: not attempted
    note: str = ""  # why the row is empty or partial

    def cell(self, exercise_id: str) -> Cell:
        return self.cells.get(exercise_id, Cell())


@dataclass
class Room:
    lesson: int
    exercises: list[tuple[str, str]]  # (id, name) in id order
    rows: list[Row]
    graded: int = 0  # notebooks graded by this refresh
    unchanged: int = 0  # notebooks answered from the cache or untouched
    isolation: set[str] = field(default_factory=set)  # how the graded ones were isolated
    seconds: float = 0.0


GradeFn = Callable[[dict, float, set, list], tuple[dict, str]]  # gradebook.grade_sandboxed's shape


def learner_folders(homes: Path) -> list[tuple[str, Path | None, str]]:
    """``(learner, folder of their notebooks or None, note)`` for every learner folder of
    ``homes``, in name order: ``<learner>/autograd-course/`` when there is one (a hub home),
    else ``<learner>/`` itself. A symlinked folder is not followed (it could be a classmate's).
    """
    found = []
    for home in sorted(homes.iterdir()):
        if home.name.startswith(".") or home.is_symlink() or not home.is_dir():
            continue
        course = home / workspace.DEFAULT_DIR
        if course.is_symlink():
            found.append((home.name, None, f"{workspace.DEFAULT_DIR} is a symbolic link (not followed)"))
        else:
            found.append((home.name, course if course.is_dir() else home, ""))
    return found


def misconception_names(lesson: int) -> dict[str, dict[str, str]]:
    """``{exercise id: {hint: name}}`` for the catalogued wrong answers of ``lesson`` (imports
    the checks, hence torch): a function's name without its leading underscore
    (``forgot_backward``), a prediction's value (``predicted 4.0``, ``predicted RuntimeError``),
    else ``wrong answer K``, K its place in the catalogue (a lambda)."""
    from course import checks

    checks.load_all()
    names = {}
    for ex in checks.all_exercises(lesson):
        names[ex.id] = {}
        for k, w in enumerate(ex.wrong, 1):
            right = ex.solution if ex.kind == "predict" else _NOT_PREDICTED
            names[ex.id].setdefault(w.hint, _wrong_name(w.answer, right, k))
    return names


_NOT_PREDICTED = object()


def _wrong_name(answer: object, right: object, k: int) -> str:
    if right is not _NOT_PREDICTED:  # a prediction: the value, or what differs from the right one
        if isinstance(answer, dict) and isinstance(right, dict):
            shown = ", ".join(f"{key}={v!r}" for key, v in answer.items() if right.get(key) != v)
        else:
            shown = answer.__name__ if isinstance(answer, type) else repr(answer)
        return f"predicted {clean_text(re.sub(r' at 0x[0-9a-f]+', '', shown), 28)}"
    name = getattr(answer, "__name__", "<lambda>")
    return name.lstrip("_") if name != "<lambda>" else f"wrong answer {k}"


def _cells(entries: list[dict], names: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """A grade report's exercise entries as ``{id: [status, misconception, hint]}``."""
    out = {}
    for e in entries:
        status, hint = e["status"], e.get("hint", "") or ""
        if status in ("failed", "error"):
            known = names.get(e["id"], {}).get(hint)
            out[e["id"]] = [status, known or "unrecognised", hint if known else ""]
        else:
            out[e["id"]] = [status, "", ""]
    return out


def _entry_path(cache: Path, learner: str, name: str, data: bytes, fingerprint: str) -> Path:
    # NOTE [A refresh grades only what changed], rule 1: (learner, notebook, what the grader reads, grader)
    try:
        read = "code " + json.dumps(code_cells(data))
    except Exception:  # not a notebook (bad UTF-8 or JSON, nesting too deep): its bytes
        read = "bytes " + file_sha256(data)
    h = hashlib.sha256()
    for part in (learner, name, read, fingerprint):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return cache / f"{h.hexdigest()[:40]}.json"


def _cached(path: Path, key: bytes) -> dict | None:
    try:
        entry = parse(read_regular(path, 1 << 20))
    except (OSError, Untrusted, ValueError):
        return None  # no entry, a half-written or a damaged one: grade again
    ok = (
        isinstance(entry, dict)
        and entry.get("format") == ENTRY_FORMAT
        and verify(entry, key, purpose="cache")
    )
    return entry if ok else None


def _untouched(data: bytes, pristine: bytes | None, exercises: list[tuple[str, str]]) -> dict | None:
    """NOTE [A refresh grades only what changed], rule 2: every code cell is the learner copy's."""
    if not progress.edits_nothing(data, pristine):
        return None
    return {
        "cells": {i: ["not attempted", "", ""] for i, _ in exercises},
        "error": "",
        "isolation": "untouched",
    }


def _pristine(lesson: int) -> bytes | None:
    """The bytes of the installed learner copy of ``lesson``, if there is one."""
    try:
        return read_regular(workspace.find_source() / f"{lessons.get(lesson).slug}.ipynb")
    except (workspace.WorkspaceError, KeyError, ValueError, OSError, Untrusted):
        return None


def collect(
    homes: Path,
    lesson: int,
    cache: Path | None = None,
    jobs: int | None = None,
    timeout: float = 300,
    grade: GradeFn | None = None,
    on_graded: Callable[[int, int, str], None] | None = None,
    deadline: float | None = None,
    running: dict | None = None,
) -> Room:
    """The room's grid for ``lesson``: every learner of ``homes``, graded where a notebook changed.

    Args:
        homes: a folder of learners' homes (hub layout) or of learner folders (roster layout).
        cache: where the entries are kept (default ``homes/.course-room``).
        jobs: notebooks graded at once (default: the CPU count).
        timeout: seconds per notebook run, as ``course grade --timeout``.
        grade: grades ``{name: bytes}`` of one learner, as ``gradebook.grade_sandboxed`` (the
            default) does, or a warm grader (:class:`course.classroom.room_grader.WarmGrader`,
            told how many are coming through its ``expect``); a test counts the runs through it.
        on_graded: called with (done, to grade, learner) as each grading finishes.
        deadline: seconds after which the refresh draws what it has: a notebook still being
            graded (a straggler: a sandbox stopped by learner code, say) shows as
            ``grading…`` and goes on grading in the background, into the cache (its own
            sandbox's limit bounds it); None: wait for every one.
        running: the gradings in flight, kept by the caller from one refresh to the next
            (entry path -> future), so a straggler is not started again.
    """
    started = time.monotonic()
    cache = cache or homes / CACHE_DIR
    key = gradebook.cache_key(cache, None)
    room = Room(lesson, lessons.registered_exercises(lesson), [])
    found, todo = _read_class(homes, room, cache, key)
    if todo:
        job = _Grading(room, homes, cache, key, timeout, grade or gradebook.grade_sandboxed, found)
        job.run(
            todo,
            jobs,
            on_graded,
            None if deadline is None else deadline - (time.monotonic() - started),
            running,
        )
    for row, entries in zip(room.rows, found.values()):
        _fill(row, entries)
    room.seconds = time.monotonic() - started
    return room


def _read_class(homes: Path, room: Room, cache: Path, key: bytes) -> tuple[dict[str, list[dict]], list]:
    """Every learner's row (with its note) into ``room``; (learner -> the entries known without
    grading, the notebooks to grade as ``(learner, name, bytes, entry path)``): NOTE [A refresh
    grades only what changed], rules 1 and 2."""
    fingerprint = f"{grader_fingerprint()} lesson {room.lesson:02d}"
    pristine = _pristine(room.lesson)
    found: dict[str, list[dict]] = {}  # learner -> the entries of their notebooks
    todo = []
    for learner, folder, note in learner_folders(homes):
        notes = [note] if note else []
        notebooks = gradebook.learner_notebooks(folder, {room.lesson}, notes) if folder else {}
        if folder and not notebooks and not notes:
            notes.append(f"no notebook of lesson {room.lesson:02d}")
        room.rows.append(Row(clean_text(learner, 200), note="; ".join(notes)))
        found[learner] = []
        for name, data in notebooks.items():
            path = _entry_path(cache, learner, name, data, fingerprint)
            try:
                entry = _cached(path, key)
                if entry is None and (entry := _untouched(data, pristine, room.exercises)) is not None:
                    _save(path, sign({"format": ENTRY_FORMAT, **entry}, key, purpose="cache"))
            except Exception:  # a notebook nested too deep to read, say: the grader says why
                entry = None
            if entry is None:
                todo.append((learner, name, data, path))
            else:
                room.unchanged += 1
                found[learner].append(entry)
    return found, todo


class _Grading:
    """One refresh's gradings: ``-j`` at once, each into the cache and its learner's entries
    (NOTE [A refresh grades only what changed], rules 3 and 4)."""

    def __init__(self, room: Room, homes: Path, cache: Path, key: bytes, timeout: float, grade, found):
        self.room, self.key, self.timeout, self.grade, self.found = room, key, timeout, grade, found
        self.hide = [homes.resolve(), cache.resolve(), Path.home()]
        self.names = misconception_names(room.lesson)
        self.finished: list = []

    def one(self, learner: str, name: str, data: bytes, path: Path) -> dict:
        report, isolation = self.grade({name: data}, self.timeout, {self.room.lesson}, self.hide)
        nb = next(n for n in report["notebooks"] if Path(n["path"]).name == name)
        entry = {
            "cells": _cells(nb["exercises"], self.names),
            "error": nb.get("error", ""),
            "isolation": isolation,
        }
        _save(path, sign({"format": ENTRY_FORMAT, **entry}, self.key, purpose="cache"))
        return entry

    def run(self, todo: list, jobs: int | None, on_graded, left: float | None, running: dict | None) -> None:
        """Grade ``todo``; past ``left`` seconds, the stragglers show as grading and go on."""
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        workers = max(1, min(jobs or cpus or 1, len(todo)))  # the CPUs this process may use
        running = {} if running is None else running
        fresh = [item for item in todo if item[3] not in running]
        if hasattr(self.grade, "expect"):  # a warm grader starts as many sandboxes as are needed
            self.grade.expect(len(fresh))
        pool = ThreadPoolExecutor(max_workers=workers)
        futures = {}
        for item in todo:
            future = running.get(item[3])
            if future is None:
                future = running[item[3]] = pool.submit(self.one, *item)
            futures[future] = item
        try:
            for future in as_completed(futures, timeout=None if left is None else max(0.0, left)):
                self.take(future, futures, running, on_graded)
        except FuturesTimeout:  # the deadline: draw what there is, the stragglers as grading
            for future, (learner, name, _, _) in futures.items():
                if future in self.finished:
                    continue
                if future.done():
                    self.take(future, futures, running, on_graded)
                    continue
                cells = {ex_id: [GRADING, "", ""] for ex_id, _ in self.room.exercises}
                self.found[learner].append({"cells": cells, "error": f"{name}: {GRADING}"})
        pool.shutdown(wait=False)  # a straggler goes on in the background, into the cache

    def take(self, future, futures: dict, running: dict, on_graded) -> None:
        """One finished grading, into its learner's row."""
        learner, name, _, path = futures[future]
        running.pop(path, None)
        try:
            entry = future.result()
            self.room.isolation.add(entry["isolation"])
        except Exception as e:  # one learner's trouble is that learner's row only
            entry = {"cells": {}, "error": f"{name} not graded: {clean_text(e, 300)}"}
        self.found[learner].append(entry)
        self.room.graded += 1
        self.finished.append(future)
        if on_graded:
            on_graded(len(self.finished), len(futures), learner)


def _fill(row: Row, entries: list[dict]) -> None:
    notes = [row.note] if row.note else []
    for entry in entries:
        if entry.get("error"):
            notes.append(clean_text(entry["error"], 300))
        for ex_id, (status, misconception, hint) in entry["cells"].items():
            cell = Cell(status, misconception, hint)
            if ex_id not in row.cells or _RANK.index(status) > _RANK.index(row.cells[ex_id].status):
                row.cells[ex_id] = cell
    row.note = clean_text("; ".join(notes), 1000)


def _save(path: Path, entry: dict) -> None:
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        write_atomically(path, json.dumps(entry), mode=0o600)
    except OSError:
        pass  # a read-only cache folder: the grid is still right, the next refresh grades again
