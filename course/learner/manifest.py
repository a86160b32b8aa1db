"""The manifest of a learner's course folder: which file holds each lesson, and which version of
it we gave. Read and checked here; written only by :mod:`course.learner.workspace`.

``DIR/.course/manifest.json`` looks like::

    {"format": 1, "source": "/repo/notebooks", "lessons": {
        "01_graph.ipynb": {"file": "01_graph.ipynb", "shipped": "sha256:6f1c..."}}}

A manifest whose entries are not what we write is refused with a message that names the fix,
so nothing is ever written outside the folder.

NOTE [Rebuilding a lost manifest]
    ``course update DIR --adopt`` (and ``course start`` on a folder of notebooks without a
    manifest) rebuilds it from the notebooks themselves: each copy carries its lesson and the
    hash of the version we gave it (``metadata.course``), so an unedited copy is recognised
    as such, and every other copy counts as edited and is kept. Lessons found nowhere are
    copied in. A manifest whose entries are not what we write (a ``{}``, a string, a ``file``
    outside the folder) is refused with a message that names ``--adopt``: we never write
    outside the course folder.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath

from course.grading.names import COURSE_LESSON

__all__ = [
    "MANIFEST",
    "WorkspaceError",
    "claimed_files",
    "inside",
    "load_manifest",
    "manifest_problem",
    "new_manifest",
    "shell_quoted",
    "waiting_updates",
    "workspace_notebooks",
]

MANIFEST = Path(".course") / "manifest.json"
LESSON_RE = COURSE_LESSON  # 03_saved_tensors.ipynb; not *.updated.ipynb (course.grading.names)


class WorkspaceError(Exception):
    """A problem the learner can fix; the message says how."""


def shell_quoted(path: Path) -> str:
    return shlex.quote(str(path))


def waiting_updates(root: Path) -> list[tuple[str, str]]:
    """(your notebook, the new version offered beside it) for every lesson whose update
    waits for you: ``course update`` kept your edited copy and saved the new one beside it.
    Nothing (no error) where ``root`` is not a course folder."""
    try:
        entries = load_manifest(root)["lessons"]
    except WorkspaceError:
        return []
    return sorted(
        (entry["file"], entry["offered"]["file"])
        for entry in entries.values()
        if "offered" in entry and (root / entry["offered"]["file"]).is_file()
    )


def load_manifest(root: Path) -> dict:
    """The manifest, checked entry by entry (see ``manifest_problem``).

    Raises:
        WorkspaceError: no manifest (says ``--adopt`` if there are notebooks, else ``start``),
            or a damaged one (says what is wrong and ``--adopt``).
    """
    path = root / MANIFEST
    if not path.is_file():
        if root.is_dir() and workspace_notebooks(root):
            raise WorkspaceError(
                f"{root} has notebooks but no {MANIFEST} (the record of which version of each "
                f"lesson you were given).\nFix: `course update {shell_quoted(root)} --adopt` rebuilds it "
                "from your notebooks and keeps every edit."
            )
        raise WorkspaceError(
            f"{root} is not a course folder (no {MANIFEST}).\n"
            f"Fix: `course start {shell_quoted(root)}` creates one."
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise _damaged(root, str(exc)) from exc
    problem = manifest_problem(root, manifest)
    if problem:
        raise _damaged(root, problem)
    return manifest


def _damaged(root: Path, problem: str) -> WorkspaceError:
    return WorkspaceError(
        f"{root / MANIFEST} is damaged: {problem}.\n"
        f"Fix: `course update {shell_quoted(root)} --adopt` rebuilds it from your notebooks "
        "and keeps every edit."
    )


def manifest_problem(root: Path, manifest: object) -> str:
    """What is wrong with a manifest, or ``""``: every entry must be what ``update`` writes,
    and every file it names must lie inside ``root``."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("lessons"), dict):
        return "no 'lessons' table"
    if not isinstance(manifest.get("source", ""), str):
        return "'source' is not a path"
    for lesson, entry in manifest["lessons"].items():
        if not LESSON_RE.match(lesson):
            return f"{lesson!r} is not a lesson name (NN_slug.ipynb)"
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("file", "shipped")):
            return f'the entry of {lesson} is {json.dumps(entry)}, not {{"file": ..., "shipped": ...}}'
        offered = entry.get("offered", {"file": entry["file"], "hash": ""})
        if not isinstance(offered, dict) or not all(
            isinstance(offered.get(k), str) for k in ("file", "hash")
        ):
            return f'the offered copy of {lesson} is {json.dumps(offered)}, not {{"file": ..., "hash": ...}}'
        for rel in (entry["file"], offered["file"]):
            if not inside(root, rel):
                return f"{lesson} names the file {rel!r}, which is not a notebook inside {root}"
    return ""


def inside(root: Path, rel: str) -> bool:
    """Whether ``rel`` is a relative ``.ipynb`` path that stays in ``root`` (no ``..``, not
    absolute, no link out of the folder): the only files we ever write."""
    parts = PurePosixPath(rel).parts
    if (
        not rel.endswith(".ipynb")
        or not parts
        or PurePosixPath(rel).is_absolute()
        or "\\" in rel
        or any(part in ("..", ".", "") for part in parts)
    ):
        return False
    real_root = root.resolve()
    return (root / rel).parent.resolve().is_relative_to(real_root)


def workspace_notebooks(root: Path) -> list[Path]:
    """Every notebook under ``root``, except in hidden folders (.course, .ipynb_checkpoints)
    and behind links that lead out of ``root``."""
    return sorted(
        p
        for p in root.rglob("*.ipynb")
        if not any(part.startswith(".") for part in p.relative_to(root).parts[:-1])
        and inside(root, p.relative_to(root).as_posix())
    )


def claimed_files(manifest: dict) -> set[str]:
    claimed = set()
    for entry in manifest["lessons"].values():
        claimed.add(entry["file"])
        if "offered" in entry:
            claimed.add(entry["offered"]["file"])
    return claimed


def new_manifest(src: Path, source: str | Path | None) -> dict:
    import course

    # "from": "package" follows the installed course (a newer version brings its lessons);
    # an explicit --source folder (a shared folder on a hub) is used again by later updates.
    return {
        "format": 1,
        "course": course.__version__,
        "source": str(src),
        "from": "folder" if source else "package",
        "lessons": {},
    }
