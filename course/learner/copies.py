"""A lesson's copies in a learner's folder: the version we ship, how we tell an edit from a run,
and how we find a copy that was renamed or offered beside an edited one. Reads only; the writes
are :mod:`course.learner.workspace`'s.

NOTE [What counts as an edit]
    We hash the *sources* of a notebook's cells (cell type and text), not the file. Outputs,
    execution counts and metadata are left out, so a learner who only ran the cells has not
    edited the notebook, and ``update`` may replace it with a newer version (its outputs go,
    which re-running restores). Anything typed into a cell is an edit, and edits are never
    overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path, PurePosixPath

from course import lessons as course_lessons
from course.grading import cells
from course.grading.names import COURSE_LESSON, OFFERED_COPY, offered_name
from course.learner.manifest import WorkspaceError, workspace_notebooks

__all__ = [
    "DEFAULT_DIR",
    "adopted_file",
    "adopted_offer",
    "cells_hash",
    "course_stamp",
    "find_renamed",
    "find_source",
    "free_name",
    "kernel_language_info",
    "lesson_files",
    "shipped_copy",
    "written_before",
]

DEFAULT_DIR = "autograd-course"
LESSON_RE = COURSE_LESSON  # 03_saved_tensors.ipynb; not *.updated.ipynb (course.grading.names)
OFFERED_RE = OFFERED_COPY  # what free_name writes


def cells_hash(path: Path, cell_types: tuple[str, ...] = ("markdown", "code", "raw")) -> str:
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
    >>> cells_hash(d / "a.ipynb") == cells_hash(d / "b.ipynb")
    True
    """
    data = Path(path).read_bytes()
    try:
        found = cells.cells(data)
        text = [(c.get("cell_type"), cells.source(c)) for c in found if c.get("cell_type") in cell_types]
    except ValueError:
        return "raw:" + hashlib.sha256(data).hexdigest()
    return "sha256:" + hashlib.sha256(json.dumps(text, ensure_ascii=False).encode()).hexdigest()


def find_source(source: str | Path | None = None) -> Path:
    """The folder of learner notebooks to copy from.

    Args:
        source: an explicit folder (``--source``); otherwise the notebooks this install
            carries (``course.lessons.notebook_folders()``: inside a wheel, or ``notebooks/``
            of a checkout).
    Returns:
        The folder, holding at least one ``NN_slug.ipynb``.
    Raises:
        WorkspaceError: none found; the message names both fixes.
    """
    candidates = [Path(source)] if source else course_lessons.notebook_folders()
    for folder in candidates:
        if lesson_files(folder):
            return folder.resolve()
    looked = ", ".join(str(c) for c in candidates)
    raise WorkspaceError(
        f"cannot find the course notebooks (NN_slug.ipynb files); looked in {looked}.\n"
        "Fix: reinstall the course (pip install autograd-course, or pip install -e . in a "
        "checkout), or pass --source DIR naming a folder of lesson notebooks."
    )


def lesson_files(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and LESSON_RE.match(p.name))


def shipped_copy(src: Path, lesson: str) -> bytes:
    """The upstream notebook, stamped ``metadata.course`` with its lesson (so a rename can be
    traced) and the hash of this version (so a lost manifest can be rebuilt, see NOTE
    [Rebuilding a lost manifest]; the hash leaves metadata out, so the stamp does not change it)."""
    nb = json.loads(src.read_bytes())
    stamp = nb.setdefault("metadata", {}).setdefault("course", {})
    stamp.update(lesson=lesson, shipped=cells_hash(src))
    nb["metadata"]["language_info"] = kernel_language_info()
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()


def kernel_language_info() -> dict:
    """What the kernel in this Python (ipykernel, which ``course lab`` opens the lessons with)
    reports of its language, the Python version included.

    JupyterLab writes that report into a notebook it opens and marks the tab unsaved when it
    differs from what the file holds, so every copy we write holds exactly it. Measured in
    headless Chromium (JupyterLab 4): a copy holding the kernel's report opened clean 4 times of
    4 (the first notebook of a fresh server among them); one without the version, or with another
    Python's, was marked unsaved on 2 opens of 2 (tests/test_browser.py opens a copy).
    """
    from ipykernel.ipkernel import IPythonKernel

    return json.loads(json.dumps(IPythonKernel.language_info))


def free_name(root: Path, folder: Path, stem: str, claimed: set[str]) -> Path:
    """``updated-stem.ipynb``, else ``updated-2-stem.ipynb``, ...: never an existing file, nor
    a name the manifest gives another lesson (whose file may come back)."""
    n = 1
    while True:
        path = folder / offered_name(stem, n)
        if not path.exists() and path.relative_to(root).as_posix() not in claimed:
            return path
        n += 1


def course_stamp(path: Path) -> dict:
    """``metadata.course`` of a copy we made (``{}`` for any other file)."""
    with contextlib.suppress(ValueError, KeyError, TypeError, OSError):  # unstamped, or not JSON
        stamp = json.loads(path.read_bytes())["metadata"]["course"]
        return stamp if isinstance(stamp, dict) else {}
    return {}


def find_renamed(root: Path, lesson: str, entry: dict, claimed: set[str]) -> str | None:
    """A notebook (not claimed by another lesson) that is this lesson under another name."""
    stamped = None
    for path in workspace_notebooks(root):
        rel = path.relative_to(root).as_posix()
        if rel in claimed:
            continue
        if cells_hash(path) == entry["shipped"]:
            return rel
        if stamped is None and course_stamp(path).get("lesson") == lesson:
            stamped = rel
    return stamped


def written_before(root: Path, folder: Path, lesson: str, up_hash: str, claimed: set[str]) -> Path | None:
    """An unclaimed offered copy (``updated*-stem.ipynb``, or the old ``stem.updated*.ipynb``)
    in ``folder`` that is exactly the new version of
    ``lesson``: written by an update that was killed before it saved the manifest."""
    stem = Path(lesson).stem
    for path in sorted([*folder.glob(f"updated*-{stem}.ipynb"), *folder.glob(f"{stem}.updated*.ipynb")]):
        rel = path.relative_to(root).as_posix()
        if (
            rel not in claimed
            and OFFERED_RE.match(path.name)
            and course_stamp(path).get("lesson") == lesson
            and cells_hash(path) == up_hash
        ):
            return path
    return None


def adopted_file(
    root: Path, lesson: str, notebooks: list[str], claimed: set[str], up_hash: str
) -> str | None:
    """The learner's copy of ``lesson``: the file of that name, else a copy stamped with the
    lesson (not an offered ``.updated`` one, if there is another), else an exact copy."""
    free = [rel for rel in notebooks if rel not in claimed]
    stamped = [rel for rel in free if course_stamp(root / rel).get("lesson") == lesson]
    for rel in ([lesson] if lesson in free else []) + sorted(
        stamped, key=lambda rel: bool(OFFERED_RE.match(PurePosixPath(rel).name))
    ):
        return rel
    return next((rel for rel in free if cells_hash(root / rel) == up_hash), None)


def adopted_offer(
    root: Path, lesson: str, notebooks: list[str], claimed: set[str], up_hash: str
) -> str | None:
    return next(
        (
            rel
            for rel in notebooks
            if rel not in claimed
            and OFFERED_RE.match(PurePosixPath(rel).name)
            and course_stamp(root / rel).get("lesson") == lesson
            and cells_hash(root / rel) == up_hash
        ),
        None,
    )
