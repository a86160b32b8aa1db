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
version we last gave you (``shipped``)::

    {"format": 1, "source": "/repo/notebooks", "lessons": {
        "01_graph.ipynb": {"file": "01_graph.ipynb", "shipped": "sha256:6f1c..."}}}

NOTE [What counts as an edit]
    We hash the *sources* of a notebook's cells (cell type and text), not the file. Outputs,
    execution counts and metadata are left out, so a learner who only ran the cells has not
    edited the notebook, and ``update`` may replace it with a newer version (its outputs go,
    which re-running restores). Anything typed into a cell is an edit, and edits are never
    overwritten.

NOTE [Update, lesson by lesson]
    1. A lesson not in the manifest is new: copy it in.
    2. The file is where the manifest says, and its hash equals ``shipped`` (unedited):
       if the course's version changed, replace it.                       # OK: nothing of yours
    3. It is edited and the course changed: keep it, save the new version beside it as
       ``NN_slug.updated.ipynb`` (``.updated-2`` and so on if that name is taken), and say so.
    4. The file is gone: look for it under another name, first by hash, then by the
       ``metadata.course.lesson`` stamp we put in every copy (so an edited, renamed notebook
       is found too). Found: track it there (a rename, not a deletion; no duplicate).
    5. Not found: you deleted it. We do not bring it back silently; we say how:
       ``course update DIR --restore NN_slug.ipynb``.

Every write is atomic (a temporary file in the same folder, then ``os.replace``), so a crash
or a full or read-only disk leaves each notebook either as it was or fully new, never half
written; the error says what to do.

Differences from nbgrader: nbgrader's ``fetch_assignment`` refuses to fetch over an existing
folder; ``update`` merges lesson by lesson instead.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Change", "WorkspaceError", "find_source", "locate", "main", "notebook_hash",
           "start", "update"]

DEFAULT_DIR = "autograd-course"
MANIFEST = Path(".course") / "manifest.json"
LESSON_RE = re.compile(r"^\d\d_[^.]+\.ipynb$")  # 03_saved_tensors.ipynb; not *.updated.ipynb


class WorkspaceError(Exception):
    """A problem the learner can fix; the message says how."""


@dataclass(frozen=True)
class Change:
    """One line of what ``start`` / ``update`` did: ``kind`` is new, updated, kept, offered,
    renamed, deleted, restored, present or retired."""

    kind: str
    lesson: str
    detail: str = ""

    def line(self) -> str:
        return f"  {self.kind:<9} {self.lesson}{': ' + self.detail if self.detail else ''}"


def notebook_hash(path: Path, cell_types: tuple[str, ...] = ("markdown", "code", "raw")) -> str:
    """Hash the cell sources of a notebook, ignoring outputs, execution counts and metadata.

    Args:
        path: the ``.ipynb`` file.
        cell_types: which cells count (``progress`` hashes only ``("code",)``).
    Returns:
        ``"sha256:<hex>"``; ``"raw:<hex>"`` (the bytes' hash) if the file is not a notebook.
    Raises:
        OSError: the file cannot be read.

    >>> import nbformat, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    >>> nbformat.write(nb, d / "a.ipynb")
    >>> nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="ran")]
    >>> nbformat.write(nb, d / "b.ipynb")  # only ran: same hash
    >>> notebook_hash(d / "a.ipynb") == notebook_hash(d / "b.ipynb")
    True
    """
    data = Path(path).read_bytes()
    try:
        cells = json.loads(data)["cells"]
        text = [(c["cell_type"], _source(c.get("source", ""))) for c in cells
                if c["cell_type"] in cell_types]
    except (ValueError, KeyError, TypeError):
        return "raw:" + hashlib.sha256(data).hexdigest()
    return "sha256:" + hashlib.sha256(json.dumps(text, ensure_ascii=False).encode()).hexdigest()


def _source(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)  # .ipynb stores lines or text


def find_source(source: str | Path | None = None) -> Path:
    """The folder of learner notebooks to copy from.

    Args:
        source: an explicit folder (``--source``); otherwise ``notebooks/`` beside the
            installed ``course`` package (a checkout or ``pip install -e .``), then
            ``course/data/notebooks`` (a wheel that ships them).
    Returns:
        The folder, holding at least one ``NN_slug.ipynb``.
    Raises:
        WorkspaceError: none found; the message names both fixes.
    """
    package = Path(__file__).resolve().parent
    candidates = [Path(source)] if source else [package.parent / "notebooks", package / "data" / "notebooks"]
    for folder in candidates:
        if _lessons(folder):
            return folder.resolve()
    looked = ", ".join(str(c) for c in candidates)
    raise WorkspaceError(
        f"cannot find the course notebooks (NN_slug.ipynb files); looked in {looked}.\n"
        "Fix: run from a checkout of the course (git clone ..., then pip install -e .), "
        "or pass --source DIR naming a folder of lesson notebooks."
    )


def _lessons(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and LESSON_RE.match(p.name))


# --- writing: atomic, and the only place that writes -------------------------------------

def _write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a crash leaves the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, _mode_for(path))  # mkstemp makes 0o600; keep what the learner would get
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mode_for(path: Path) -> int:
    """The existing file's permissions, or what ``open()`` would give a new file."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _shipped_copy(src: Path, lesson: str) -> bytes:
    """The upstream notebook, stamped ``metadata.course.lesson`` so a rename can be traced."""
    nb = json.loads(src.read_bytes())
    nb.setdefault("metadata", {}).setdefault("course", {})["lesson"] = lesson
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()


def _copy_lesson(src: Path, dest: Path, lesson: str) -> None:
    _write_bytes(dest, _shipped_copy(src, lesson))


def _free_name(root: Path, folder: Path, stem: str, claimed: set[str]) -> Path:
    """``stem.updated.ipynb``, else ``stem.updated-2.ipynb``, ...: never an existing file, nor
    a name the manifest gives another lesson (whose file may come back)."""
    n = 1
    while True:
        path = folder / f"{stem}.updated{'' if n == 1 else f'-{n}'}.ipynb"
        if not path.exists() and path.relative_to(root).as_posix() not in claimed:
            return path
        n += 1


def _write_failed(exc: OSError, root: Path, done: list[Change]) -> WorkspaceError:
    why = {errno.EROFS: "the disk is read-only", errno.ENOSPC: "the disk is full"}.get(
        exc.errno, "permission denied" if isinstance(exc, PermissionError) else exc.strerror)
    made = f"{len(done)} change(s) were made before the error; " if done else "nothing was changed; "
    return WorkspaceError(
        f"cannot write to {root}: {why} ({exc}).\n"
        f"Nothing of yours was lost: {made}every notebook is either as it was or fully written.\n"
        f"Fix: make {root} writable, or copy it somewhere writable (cp -r {root} ~/{DEFAULT_DIR}) "
        "and run `course update` on the copy."
    )


# --- the manifest ------------------------------------------------------------------------

def _load_manifest(root: Path) -> dict:
    path = root / MANIFEST
    if not path.is_file():
        raise WorkspaceError(f"{root} is not a course folder (no {MANIFEST}).\n"
                             f"Fix: `course start {root}` creates one.")
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest.get("lessons"), dict):
            raise ValueError("no 'lessons' table")
        return manifest
    except (ValueError, AttributeError) as exc:
        raise WorkspaceError(f"{path} is damaged ({exc}). Fix: move it away and run "
                             f"`course start` in a new folder, then copy your notebooks in.") from exc


def _save_manifest(root: Path, manifest: dict) -> None:
    _write_bytes(root / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())


def _workspace_notebooks(root: Path) -> list[Path]:
    """Every notebook under ``root``, except in hidden folders (.course, .ipynb_checkpoints)."""
    return sorted(p for p in root.rglob("*.ipynb")
                  if not any(part.startswith(".") for part in p.relative_to(root).parts[:-1]))


def _find_renamed(root: Path, lesson: str, entry: dict, claimed: set[str]) -> str | None:
    """A notebook (not claimed by another lesson) that is this lesson under another name."""
    stamped = None
    for path in _workspace_notebooks(root):
        rel = path.relative_to(root).as_posix()
        if rel in claimed:
            continue
        if notebook_hash(path) == entry["shipped"]:
            return rel
        if stamped is None and _stamp(path) == lesson:
            stamped = rel
    return stamped


def _stamp(path: Path) -> str | None:
    with contextlib.suppress(ValueError, KeyError, TypeError, OSError):  # unstamped, or not JSON
        return json.loads(path.read_bytes())["metadata"]["course"]["lesson"]
    return None


def _claimed(manifest: dict) -> set[str]:
    claimed = set()
    for entry in manifest["lessons"].values():
        claimed.add(entry["file"])
        if "offered" in entry:
            claimed.add(entry["offered"]["file"])
    return claimed


def locate(root: str | Path) -> list[tuple[str, Path | None]]:
    """Where each lesson of a course folder is now, following renames; writes nothing.

    Returns:
        ``[(lesson, path or None if deleted), ...]`` in lesson order. A folder without a
        manifest lists its ``NN_slug.ipynb`` files.
    """
    root = Path(root)
    if not (root / MANIFEST).is_file():
        return [(name, root / name) for name in _lessons(root)]
    manifest = _load_manifest(root)
    claimed, found = _claimed(manifest), []
    for lesson, entry in sorted(manifest["lessons"].items()):
        rel = entry["file"] if (root / entry["file"]).is_file() else \
            _find_renamed(root, lesson, entry, claimed)
        if rel:
            claimed.add(rel)
        found.append((lesson, root / rel if rel else None))
    return found


# --- start and update --------------------------------------------------------------------

def start(root: str | Path = DEFAULT_DIR, source: str | Path | None = None) -> list[Change]:
    """Copy every lesson into ``root`` and write its manifest; never overwrite a notebook.

    Args:
        root: the folder to create or fill (it may exist, but must hold no notebooks).
        source: the folder to copy from (see ``find_source``).
    Returns:
        One ``Change("new", lesson)`` per lesson copied.
    Raises:
        WorkspaceError: ``root`` already holds notebooks (use ``course update``), the
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
        raise WorkspaceError(f"{root} is a file, not a folder. Fix: name a new folder, "
                             f"e.g. course start {DEFAULT_DIR}")
    existing = _workspace_notebooks(root) if root.is_dir() else []
    if existing or (root / MANIFEST).exists():
        names = ", ".join(p.relative_to(root).as_posix() for p in existing[:3]) or MANIFEST.as_posix()
        raise WorkspaceError(f"{root} already has notebooks ({names}{', ...' if len(existing) > 3 else ''}); "
                             "start never overwrites them.\n"
                             f"To bring in new or changed lessons: course update {_q(root)}")
    try:  # an empty manifest first: a start cut short is finished by `course update`
        _save_manifest(root, {"format": 1, "source": str(src), "lessons": {}})
    except OSError as exc:
        raise _write_failed(exc, root, []) from exc
    return update(root, source=src)


def update(root: str | Path = DEFAULT_DIR, source: str | Path | None = None,
           restore: tuple[str, ...] | list[str] = ()) -> list[Change]:
    """Bring new and changed lessons into ``root`` without overwriting the learner's edits.

    Args:
        root: a folder made by ``start``.
        source: the folder to copy from; by default the one recorded in the manifest
            (the last one used), else the package's notebooks (``find_source``).
        restore: lessons the learner deleted and wants back (``--restore NAME``).
    Returns:
        What changed, one ``Change`` per event (see the module's NOTE [Update, lesson by
        lesson]); an empty list when everything was up to date.
    Raises:
        WorkspaceError: no manifest, an unknown ``restore`` name, the notebooks cannot be
            found, or ``root`` cannot be written (nothing is half written; see the message).
    """
    root = Path(root)
    manifest = _load_manifest(root)
    as_loaded = json.dumps(manifest, sort_keys=True)
    src = _update_source(source, manifest)
    lessons = _lessons(src)
    wanted = {_lesson_named(name, lessons) for name in restore}
    claimed, changes = _claimed(manifest), []
    manifest["source"] = str(src)
    try:
        for lesson in lessons:
            changes += _update_one(root, src, lesson, manifest, claimed, lesson in wanted)
        if json.dumps(manifest, sort_keys=True) != as_loaded:  # a no-op update writes nothing
            _save_manifest(root, manifest)
    except OSError as exc:
        with contextlib.suppress(OSError):  # record what did go through, if we can
            _save_manifest(root, manifest)
        raise _write_failed(exc, root, [c for c in changes if c.kind in _WRITES]) from exc
    retired = sorted(set(manifest["lessons"]) - set(lessons))
    return changes + [Change("retired", name, "no longer in the course; your copy stays") for name in retired]


_WRITES = {"new", "updated", "offered", "restored"}


def _update_source(source: str | Path | None, manifest: dict) -> Path:
    """``--source``, else the folder the manifest recorded (a checkout's ``notebooks/``
    after ``git pull``, or a shared folder on a JupyterHub), else ``find_source()``."""
    recorded = Path(manifest.get("source") or "")
    if not source and manifest.get("source") and _lessons(recorded):
        return recorded
    return find_source(source)


def _lesson_named(name: str, lessons: list[str]) -> str:
    matches = [n for n in lessons if name in (n, n.removesuffix(".ipynb"))] or \
        [n for n in lessons if n.startswith(name)]
    if len(matches) != 1:
        raise WorkspaceError(f"--restore {name}: {'no' if not matches else 'more than one'} lesson "
                             f"of that name; the lessons are: {', '.join(lessons)}")
    return matches[0]


def _update_one(root: Path, src: Path, lesson: str, manifest: dict, claimed: set[str],
                restore: bool) -> list[Change]:
    up, entries = src / lesson, manifest["lessons"]
    up_hash, entry = notebook_hash(up), entries.get(lesson)
    if entry is None:
        return [_add(root, up, lesson, up_hash, entries, claimed, "new")]
    changes = []
    if not (root / entry["file"]).is_file():
        rel = _find_renamed(root, lesson, entry, claimed)
        if rel is None and restore:
            return [_add(root, up, lesson, up_hash, entries, claimed, "restored")]
        if rel is None:
            entry["deleted"] = True
            return [Change("deleted", lesson, f"not brought back; to restore it: "
                                              f"course update {_q(root)} --restore {lesson}")]
        changes.append(Change("renamed", lesson, f"found as {rel}; tracking it there"))
        entry["file"] = rel
        entry.pop("deleted", None)
        claimed.add(rel)
    if restore:
        changes.append(Change("present", lesson, f"not restored: your copy is at {entry['file']}"))
    path = root / entry["file"]
    current = notebook_hash(path)
    if current == up_hash:  # up to date (perhaps the learner adopted the offered version)
        entry["shipped"] = up_hash
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


def _add(root: Path, up: Path, lesson: str, up_hash: str, entries: dict, claimed: set[str],
         kind: str) -> Change:
    """Copy a lesson to ``root/lesson``, or beside it if a different file has that name."""
    dest, detail = root / lesson, ""
    if dest.exists() and notebook_hash(dest) == up_hash:
        detail = "already in place"  # e.g. a `start` cut short after copying it
    else:
        if dest.exists():
            dest = _free_name(root, root, Path(lesson).stem, claimed)
            detail = f"saved as {dest.name}: a file of yours is already called {lesson}"
        _copy_lesson(up, dest, lesson)
    entries[lesson] = {"file": dest.name, "shipped": up_hash}
    claimed.add(dest.name)
    return Change(kind, lesson, detail)


def _offer(root: Path, path: Path, up: Path, lesson: str, up_hash: str, entry: dict,
           claimed: set[str]) -> Change:
    """Keep the learner's edited notebook; put the course's new version beside it."""
    offered = entry.get("offered")
    if offered and offered["hash"] == up_hash and (root / offered["file"]).is_file() \
            and notebook_hash(root / offered["file"]) == up_hash:
        return Change("kept", lesson, f"yours is edited; the new version is still at {offered['file']}")
    beside = _free_name(root, path.parent, Path(lesson).stem, claimed)
    _copy_lesson(up, beside, lesson)
    rel = beside.relative_to(root).as_posix()
    entry["offered"] = {"file": rel, "hash": up_hash}
    claimed.add(rel)
    return Change("offered", lesson, f"yours is edited, so we kept it; the new version is beside it: {rel}")


def _q(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def main(argv: list[str] | None = None) -> int:
    """``course start [DIR] [--source S]`` / ``course update [DIR] [--source S] [--restore NAME]``."""
    parser = argparse.ArgumentParser(prog="course", description=start.__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb, help_ in (("start", "copy the learner notebooks into a folder you own"),
                        ("update", "bring in new lessons without overwriting your work")):
        p = verbs.add_parser(verb, help=help_, description=help_)
        p.add_argument("dir", nargs="?", default=DEFAULT_DIR, help=f"your folder (default: {DEFAULT_DIR})")
        p.add_argument("--source", help="the folder of lesson notebooks to copy from")
        if verb == "update":
            p.add_argument("--restore", action="append", default=[], metavar="NAME",
                           help="bring back a lesson you deleted (repeatable)")
    args = parser.parse_args(argv)
    root = Path(args.dir)
    try:
        if args.verb == "start":
            changes = start(root, args.source)
            print(f"copied {len(changes)} lessons into {root}")
            print("\n".join(f"  {c.lesson}" for c in changes))
            print(f"They are yours to edit: `course update {_q(root)}` brings in new lessons "
                  "and never overwrites your edits.")
            print(f"open them with:\n  jupyter lab {_q(root)}")
            return 0
        changes = update(root, args.source, args.restore)
    except WorkspaceError as exc:
        print(f"course {args.verb}: {exc}", file=sys.stderr)
        return 1
    others = set(_load_manifest(root)["lessons"]) - {c.lesson for c in changes}
    print(f"course update {root} (lessons from {_load_manifest(root)['source']})")
    print("\n".join(c.line() for c in changes) or "  everything is up to date")
    if changes:
        print(f"the other {len(others)} lesson(s) are up to date.")
    return 0
