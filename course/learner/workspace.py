"""`course start` and `course update`: your own copy of the lessons, kept up to date safely.

``course start DIR`` copies the learner notebooks into ``DIR`` (a folder you own) and writes
``DIR/.course/manifest.json``. ``course update DIR`` later brings in new and changed lessons
without ever overwriting a notebook you have edited::

    $ course start autograd-course
    copied 2 lessons into autograd-course
      00_warmup.ipynb
      01_graph.ipynb
    open them with:
      jupyter lab autograd-course

The manifest remembers, for each lesson, which file holds your copy and the hash of the
version we last gave you (``shipped``; :mod:`course.learner.manifest` shows one).

NOTE [Update, lesson by lesson]
    1. A lesson not in the manifest is new: copy it in.
    2. The file is where the manifest says, and its hash equals ``shipped`` (unedited):
       if the course's version changed, replace it.                       # OK: nothing of yours
    3. It is edited and the course changed: keep it, save the new version beside it as
       ``updated-NN_slug.ipynb`` (``updated-2-`` and so on if that name is taken), and say so.
    4. The file is gone: look for it under another name, first by hash, then by the
       ``metadata.course.lesson`` stamp we put in every copy (so an edited, renamed notebook
       is found too). Found: track it there (a rename, not a deletion; no duplicate).
    5. Not found: you deleted it. We do not bring it back silently; we say how:
       ``course update DIR --restore NN_slug.ipynb``.

NOTE [A crash in the middle of an update]
    Every write is atomic (a temporary file in the same folder, then ``os.replace``), so a
    crash or a full or read-only disk leaves each file either as it was or fully new, never
    half written; the error says what to do. The manifest is written again after *each*
    lesson, so at most one lesson's bookkeeping can lag behind its notebook, and the next
    update recognises that lesson's write by content: a notebook already equal to the new
    version is up to date (not "edited"), and an unclaimed ``NN_slug.updated*.ipynb`` that
    is exactly the new version becomes the offered copy instead of a new one being written.
    A lesson has at most one offered copy: a newer version replaces the offered one in place,
    unless the learner has edited it (then it is theirs, and kept).

The folder's other modules: :mod:`course.learner.manifest` (reading and checking the
manifest; NOTE [Rebuilding a lost manifest]), :mod:`course.learner.copies` (finding a lesson's
copies by name, hash or stamp; NOTE [What counts as an edit]) and
:mod:`course.learner.workspace_command` (the command line: arguments in, what changed printed).
Every write is here.

Differences from nbgrader: nbgrader's ``fetch_assignment`` refuses to fetch over an existing
folder; ``update`` merges lesson by lesson instead.
"""

from __future__ import annotations

import contextlib
import errno
import json
from dataclasses import dataclass
from pathlib import Path

from course.grading.files import write_atomically
from course.learner.copies import (
    DEFAULT_DIR,
    adopted_file,
    adopted_offer,
    cells_hash,
    course_stamp,
    find_renamed,
    find_source,
    free_name,
    lesson_files,
    shipped_copy,
    written_before,
)
from course.learner.manifest import (
    MANIFEST,
    WorkspaceError,
    claimed_files,
    load_manifest,
    new_manifest,
    shell_quoted,
    waiting_updates,
    workspace_notebooks,
)

__all__ = [
    "Change",
    "WorkspaceError",
    "adopt",
    "cells_hash",
    "course_stamp",
    "find_source",
    "locate",
    "pristine",
    "shell_quoted",
    "start",
    "update",
    "waiting_updates",
]


@dataclass(frozen=True)
class Change:
    """One line of what ``start`` / ``update`` did: ``kind`` is new, updated, kept, offered,
    renamed, deleted, restored, present, retired or adopted."""

    kind: str
    lesson: str
    detail: str = ""

    def line(self) -> str:
        return f"  {self.kind:<9} {self.lesson}{': ' + self.detail if self.detail else ''}"


# --- writing: every write goes through course.grading.files.write_atomically -----------------


def _copy_lesson(src: Path, dest: Path, lesson: str) -> None:
    write_atomically(dest, shipped_copy(src, lesson))


def _write_failed(exc: OSError, root: Path, done: list[Change]) -> WorkspaceError:
    why = {errno.EROFS: "the disk is read-only", errno.ENOSPC: "the disk is full"}.get(
        exc.errno, "permission denied" if isinstance(exc, PermissionError) else exc.strerror
    )
    made = f"{len(done)} change(s) were made before the error; " if done else "nothing was changed; "
    return WorkspaceError(
        f"cannot write to {root}: {why} ({exc}).\n"
        f"Nothing of yours was lost: {made}every notebook is either as it was or fully written.\n"
        f"Fix: make {root} writable, or copy it somewhere writable (cp -r {root} ~/{DEFAULT_DIR}) "
        "and run `course update` on the copy."
    )


def _save_manifest(root: Path, manifest: dict) -> None:
    write_atomically(root / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())


def locate(root: str | Path) -> list[tuple[str, Path | None]]:
    """Where each lesson of a course folder is now, following renames; writes nothing.

    Returns:
        ``[(lesson, path or None if deleted), ...]`` in lesson order. A folder without a
        manifest lists its ``NN_slug.ipynb`` files.
    Raises:
        WorkspaceError: the manifest is damaged.
    """
    root = Path(root)
    if not (root / MANIFEST).is_file():
        return [(name, root / name) for name in lesson_files(root)]
    manifest = load_manifest(root)
    claimed, found = claimed_files(manifest), []
    for lesson, entry in sorted(manifest["lessons"].items()):
        rel = (
            entry["file"] if (root / entry["file"]).is_file() else find_renamed(root, lesson, entry, claimed)
        )
        if rel:
            claimed.add(rel)
        found.append((lesson, root / rel if rel else None))
    return found


def pristine(root: str | Path, lesson: str) -> Path | None:
    """The course's learner copy of ``lesson`` as ``update`` would bring it into ``root`` (so
    ``progress`` can tell an untouched notebook without running it); ``None`` if not found."""
    root = Path(root)
    try:
        src = _update_source(None, load_manifest(root) if (root / MANIFEST).is_file() else {})
    except WorkspaceError:
        return None
    return src / lesson if (src / lesson).is_file() else None


# --- start, update, adopt ----------------------------------------------------------------


def start(root: str | Path = DEFAULT_DIR, source: str | Path | None = None) -> list[Change]:
    """Copy every lesson into ``root`` and write its manifest; never overwrite a notebook.

    Args:
        root: the folder to create or fill. If it holds notebooks but no manifest (a lost
            manifest), they are adopted (see ``adopt``) instead of copied over.
        source: the folder to copy from (see ``find_source``).
    Returns:
        One ``Change("new", lesson)`` per lesson copied (and ``adopted`` ones, if any).
    Raises:
        WorkspaceError: ``root`` is already a course folder (use ``course update``), the
            notebooks cannot be found, or ``root`` cannot be written.

    >>> import nbformat, tempfile, pathlib
    >>> src = pathlib.Path(tempfile.mkdtemp())
    >>> nbformat.write(nbformat.v4.new_notebook(), src / "00_warmup.ipynb")
    >>> root = pathlib.Path(tempfile.mkdtemp()) / "mine"
    >>> start(root, source=src)
    [Change(kind='new', lesson='00_warmup.ipynb', detail='')]
    >>> update(root, source=src)
    []
    """
    root, src = Path(root), find_source(source)
    if root.exists() and not root.is_dir():
        raise WorkspaceError(
            f"{root} is a file, not a folder. Fix: name a new folder, e.g. course start {DEFAULT_DIR}"
        )
    if (root / MANIFEST).exists():
        existing = workspace_notebooks(root)
        names = ", ".join(p.relative_to(root).as_posix() for p in existing[:3]) or MANIFEST.as_posix()
        raise WorkspaceError(
            f"{root} already has notebooks ({names}{', ...' if len(existing) > 3 else ''}); "
            "start never overwrites them.\n"
            f"To bring in new or changed lessons: course update {shell_quoted(root)}"
        )
    if root.is_dir() and workspace_notebooks(root):
        return adopt(root, source)
    try:  # an empty manifest first: a start cut short is finished by `course update`
        _save_manifest(root, new_manifest(src, source))
    except OSError as exc:
        raise _write_failed(exc, root, []) from exc
    return update(root, source=source)


def update(
    root: str | Path = DEFAULT_DIR,
    source: str | Path | None = None,
    restore: tuple[str, ...] | list[str] = (),
) -> list[Change]:
    """Bring new and changed lessons into ``root`` without overwriting the learner's edits.

    Args:
        root: a folder made by ``start``.
        source: the folder to copy from; by default the installed course's notebooks, or
            the folder an earlier ``--source`` named.
        restore: lessons the learner deleted and wants back (``--restore NAME``).
    Returns:
        What changed, one ``Change`` per event (see the module's NOTE [Update, lesson by
        lesson]); an empty list when everything was up to date.
    Raises:
        WorkspaceError: no manifest or a damaged one (the message names ``--adopt``), an
            unknown ``restore`` name, the notebooks cannot be found, or ``root`` cannot be
            written (nothing is half written; see the message).
    """
    import course

    root = Path(root)
    manifest = load_manifest(root)
    saved = json.dumps(manifest, sort_keys=True)
    src = _update_source(source, manifest)
    lessons = lesson_files(src)
    wanted = {_lesson_named(name, lessons) for name in restore}
    claimed, changes = claimed_files(manifest), []
    manifest["source"] = str(src)
    if source:
        manifest["from"] = "folder"
    try:
        for lesson in lessons:
            done = _update_one(root, src, lesson, manifest, claimed, lesson in wanted)
            changes += done
            if any(c.kind in _WRITES for c in done):
                manifest["course"] = course.__version__
            saved = _save_if_changed(root, manifest, saved)  # NOTE [A crash in the middle of an update]
    except OSError as exc:
        with contextlib.suppress(OSError):  # record what did go through, if we can
            _save_if_changed(root, manifest, saved)
        raise _write_failed(exc, root, [c for c in changes if c.kind in _WRITES]) from exc
    retired = sorted(set(manifest["lessons"]) - set(lessons))
    return changes + [Change("retired", name, "no longer in the course; your copy stays") for name in retired]


_WRITES = {"new", "updated", "offered", "restored"}


def _save_if_changed(root: Path, manifest: dict, saved: str) -> str:
    """Write the manifest if it differs from what is on disk (a no-op update writes nothing)."""
    now = json.dumps(manifest, sort_keys=True)
    if now != saved:
        _save_manifest(root, manifest)
    return now


def adopt(root: str | Path = DEFAULT_DIR, source: str | Path | None = None) -> list[Change]:
    """Rebuild the manifest of ``root`` from its notebooks, then update (NOTE [Rebuilding a
    lost manifest]). Writes no notebook over an existing one; any old manifest is replaced.

    Returns:
        One ``Change("adopted", lesson, where)`` per lesson found, then what ``update`` did.
    Raises:
        WorkspaceError: ``root`` is not a folder, or as ``update``.
    """
    root = Path(root)
    if not root.is_dir():
        raise WorkspaceError(f"{root} is not a folder. Fix: `course start {shell_quoted(root)}` creates it.")
    src = _update_source(source, {})
    manifest, claimed, changes = new_manifest(src, source), set(), []
    notebooks = [p.relative_to(root).as_posix() for p in workspace_notebooks(root)]
    for lesson in lesson_files(src):
        up_hash = cells_hash(src / lesson)
        rel = adopted_file(root, lesson, notebooks, claimed, up_hash)
        if rel is None:
            continue  # found nowhere: update copies it in as new
        claimed.add(rel)
        stamp, current = course_stamp(root / rel), cells_hash(root / rel)
        shipped = stamp.get("shipped") if isinstance(stamp.get("shipped"), str) else up_hash
        entry = manifest["lessons"][lesson] = {"file": rel, "shipped": shipped}
        edited = current not in (shipped, up_hash)
        offered = adopted_offer(root, lesson, notebooks, claimed, up_hash) if edited else None
        if offered:
            entry["offered"] = {"file": offered, "hash": up_hash}
            claimed.add(offered)
        changes.append(Change("adopted", lesson, rel + (" (edited: kept as it is)" if edited else "")))
    try:
        _save_manifest(root, manifest)
    except OSError as exc:
        raise _write_failed(exc, root, []) from exc
    return changes + update(root, source=source)


def _update_source(source: str | Path | None, manifest: dict) -> Path:
    """``--source``; else, for a folder started from an explicit folder (a shared folder on a
    JupyterHub), that folder; else the installed course's notebooks (``find_source()``), so
    a folder made by an older version gets the lessons of the version installed now."""
    recorded = Path(manifest.get("source") or "")
    follows_folder = manifest.get("from", "folder") == "folder"  # older manifests: as before
    if not source and manifest.get("source") and follows_folder and lesson_files(recorded):
        return recorded
    return find_source(source)


def _lesson_named(name: str, lessons: list[str]) -> str:
    matches = [n for n in lessons if name in (n, n.removesuffix(".ipynb"))] or [
        n for n in lessons if n.startswith(name)
    ]
    if len(matches) != 1:
        raise WorkspaceError(
            f"--restore {name}: {'no' if not matches else 'more than one'} lesson "
            f"of that name; the lessons are: {', '.join(lessons)}"
        )
    return matches[0]


def _update_one(
    root: Path, src: Path, lesson: str, manifest: dict, claimed: set[str], restore: bool
) -> list[Change]:
    up, entries = src / lesson, manifest["lessons"]
    up_hash, entry = cells_hash(up), entries.get(lesson)
    if entry is None:
        return [_add(root, up, lesson, up_hash, entries, claimed, "new")]
    changes = []
    if not (root / entry["file"]).is_file():
        rel = find_renamed(root, lesson, entry, claimed)
        if rel is None and restore:
            return [_add(root, up, lesson, up_hash, entries, claimed, "restored")]
        if rel is None:
            entry["deleted"] = True
            return [
                Change(
                    "deleted",
                    lesson,
                    f"not brought back; to restore it: course update {shell_quoted(root)} --restore {lesson}",
                )
            ]
        changes.append(Change("renamed", lesson, f"found as {rel}; tracking it there"))
        entry["file"] = rel
        entry.pop("deleted", None)
        claimed.add(rel)
    if restore:
        changes.append(Change("present", lesson, f"not restored: your copy is at {entry['file']}"))
    path = root / entry["file"]
    current = cells_hash(path)
    if current == up_hash:  # up to date (the learner adopted the offered version, or an
        entry["shipped"] = up_hash  # update was cut short after writing this notebook)
        entry.pop("offered", None)
    elif current == entry["shipped"]:  # unedited: replace it
        _copy_lesson(up, path, lesson)
        entry["shipped"] = up_hash
        entry.pop("offered", None)
        where = "" if entry["file"] == lesson else f" in {entry['file']}"
        changes.append(Change("updated", lesson, f"new version{where} (you had not edited it)"))
    elif up_hash != entry["shipped"]:  # edited, and the course changed
        changes.append(_offer(root, path, up, lesson, up_hash, entry, claimed))
    return changes


def _add(
    root: Path, up: Path, lesson: str, up_hash: str, entries: dict, claimed: set[str], kind: str
) -> Change:
    """Copy a lesson to ``root/lesson``, or beside it if a different file has that name."""
    dest, detail = root / lesson, ""
    if dest.exists() and cells_hash(dest) == up_hash:
        detail = "already in place"  # e.g. a `start` cut short after copying it
    else:
        if dest.exists():
            dest = written_before(root, root, lesson, up_hash, claimed) or free_name(
                root, root, Path(lesson).stem, claimed
            )
            detail = f"saved as {dest.name}: a file of yours is already called {lesson}"
        if not (dest.exists() and cells_hash(dest) == up_hash):
            _copy_lesson(up, dest, lesson)
    entries[lesson] = {"file": dest.name, "shipped": up_hash}
    claimed.add(dest.name)
    return Change(kind, lesson, detail)


def _offer(
    root: Path, path: Path, up: Path, lesson: str, up_hash: str, entry: dict, claimed: set[str]
) -> Change:
    """Keep the learner's edited notebook; put the course's new version beside it, in the
    lesson's one offered copy (NOTE [A crash in the middle of an update])."""
    offered = entry.get("offered")
    old = root / offered["file"] if offered else None
    if old is not None and old.is_file() and cells_hash(old) == up_hash:
        entry["offered"]["hash"] = up_hash
        return Change("kept", lesson, f"yours is edited; the new version is still at {offered['file']}")
    if old is not None and (not old.is_file() or cells_hash(old) == offered["hash"]):
        beside = old  # the offered copy, untouched (or gone): it takes the newer version
    else:  # none yet, or the learner edited the offered one (it is theirs now)
        beside = written_before(root, path.parent, lesson, up_hash, claimed) or free_name(
            root, path.parent, Path(lesson).stem, claimed
        )
    if not (beside.is_file() and cells_hash(beside) == up_hash):
        _copy_lesson(up, beside, lesson)
    rel = beside.relative_to(root).as_posix()
    entry["offered"] = {"file": rel, "hash": up_hash}
    claimed.add(rel)
    return Change("offered", lesson, f"yours is edited, so we kept it; the new version is beside it: {rel}")
