"""What every command agrees on about the files it writes and trusts: one home, torch-free.

Three facts used to be spelled in several modules, slightly differently each time:

- **the grader's fingerprint**: :func:`package_digest` hashes every file of the ``course``
  package; :func:`grader_fingerprint` folds it into one line. ``course progress``'s cache,
  ``course gradebook``'s cache and ``course grade``'s tamper check all start from it, so a
  fixed check (in ``course/checks/``), a changed lesson program (``course/content/``) or a
  changed reference implementation (an oracle) voids every cached result alike;
- **atomic writes**: :func:`write_atomically` is the only way the course writes a file a
  learner or an instructor keeps (a crash leaves the old file or the new one, never half);
- **the report formats**: :data:`REPORT_FORMAT` (``course grade --json``, signed) and
  :data:`GRADEBOOK_FORMAT` (``course gradebook --json``).

::

    write_atomically(Path("report.json"), json.dumps(report))   # str or bytes
    grader_fingerprint()      # 'course 0.9.0 sha256:3f2a...' (16 hex digits)
    changed_files(before, package_digest())   # ['checks/lesson03/ex3_4_compress_hooks.py'] if one changed

    # OK:  write_atomically(path, text)        temp file beside it, fsync, os.replace
    # BAD: path.write_text(text)               a crash or a full disk leaves half a report
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

__all__ = [
    "GRADEBOOK_FORMAT",
    "REPORT_FORMAT",
    "changed_files",
    "grader_fingerprint",
    "package_digest",
    "write_atomically",
]

REPORT_FORMAT = "course-grade/1"  # what `course grade --json` writes and the gradebook accepts
GRADEBOOK_FORMAT = "course-gradebook/1"  # what `course gradebook --json` writes


# NOTE [One course, one fingerprint]
# A wheel carries the learner notebooks inside the package (course/lessons_data/); a checkout
# keeps them beside it (notebooks/). They are the same lessons, and no verdict depends on
# them (the checks in course/checks/ decide): counting lessons_data/ gave the same course two
# fingerprints, and `course collect` flagged every CI report for regrade when the instructor
# ran it from a checkout. So the digest leaves lessons_data/ out, however the course is installed:
#   yes: checks/lesson03/ex3_4_compress_hooks.py, content/zoo.py    (a change changes the verdicts)
#   no:  lessons_data/03_saved_tensors.ipynb, __pycache__/...         (not the grader)
_NOT_THE_GRADER = ("__pycache__", "lessons_data")


def package_digest() -> dict[str, str]:
    """sha256 of every file of the ``course`` package by relative path, the bytecode caches and
    the wheel's copy of the lessons aside (NOTE [One course, one fingerprint])."""
    import course

    root = Path(course.__file__).resolve().parent
    digest = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not any(part in _NOT_THE_GRADER for part in p.relative_to(root).parts):
            try:
                digest[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
            except OSError as e:
                digest[p.relative_to(root).as_posix()] = f"unreadable: {type(e).__name__}"
    return digest


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths whose digest differs between two :func:`package_digest` results.

    Example:
        >>> changed_files({"a.py": "1", "b.py": "2"}, {"a.py": "1", "c.py": "3"})
        ['b.py', 'c.py']
    """
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def grader_fingerprint(digest: dict[str, str] | None = None) -> str:
    """``course <version> sha256:<16 hex digits>``, from :func:`package_digest`.

    The whole package counts, not only the grader and the checks: an exercise's truth can be
    a program of ``course/content/`` or an oracle of the reference implementation, and a
    change there changes what a check expects.

    Example:
        >>> grader_fingerprint({"checks/lesson03/__init__.py": "ab"}).split()[0]
        'course'
        >>> grader_fingerprint({"a.py": "1"}) == grader_fingerprint({"a.py": "2"})
        False
    """
    import course

    digest = package_digest() if digest is None else digest
    h = hashlib.sha256()
    for path, value in sorted(digest.items()):
        h.update(path.encode() + b"\0" + value.encode() + b"\0")
    return f"course {course.__version__} sha256:{h.hexdigest()[:16]}"


def write_atomically(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Write ``data`` (text is written as UTF-8) to ``path`` all at once.

    A temporary file with an unpredictable name (``mkstemp``, so nothing planted beside
    ``path`` can take its place) in the same folder, flushed to disk, then ``os.replace``: a
    reader sees the old file or the new one. An existing file keeps its permissions; a new one
    gets what ``open()`` would give it (``mkstemp`` alone would make it 0600); ``mode``, when
    given, is the file's mode whatever was there (0o600: for its owner alone).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, _mode_for(path) if mode is None else mode)
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
