"""What a grade report says was graded: the notebook's git commit, that commit's time, and when.

A homework grade is only as good as its answer to "which version of the work, handed in
when?". :func:`git_record` asks git, for the notebook file about to be graded, before any
learner code runs::

    git_record(Path("autograd-ada/notebooks/00_warmup.ipynb"), data)
    # {"head": "3f9c...",            # HEAD of the repository that holds the file
    #  "head_time": "2026-11-30T22:20:00Z",     # HEAD's committer time, UTC
    #  "commit": "a41b...",          # the last commit that touched the file
    #  "commit_time": "2026-11-30T22:14:05Z",   # that commit's committer time, UTC
    #  "path": "notebooks/00_warmup.ipynb",     # the file, relative to the repository
    #  "modified": False}            # the bytes graded are not the committed ones
    git_record(Path("/tmp/loose/00_warmup.ipynb"), data)   # outside git (or no git)
    # None

:func:`committed_bytes` is the other direction: the file as a commit holds it (``git show
COMMIT:PATH``), which is what a regrade grades, never the working tree's newer copy::

    >>> utc_iso(0), utc_iso(1764540845)
    ('1970-01-01T00:00:00Z', '2025-11-30T22:14:05Z')
    >>> parse_utc("2025-11-30T23:14:05+01:00") == parse_utc("2025-11-30T22:14:05Z")   # OK
    True
    >>> parse_utc("2025-11-30 22:14")                      # BAD: no time zone, no deadline
    Traceback (most recent call last):
    ...
    ValueError: '2025-11-30 22:14' has no time zone: add Z (UTC) or an offset such as +01:00

Git runs with the repository's hooks and file-system monitor switched off, so a repository a
learner prepared cannot make the grader run a program of its choosing while it is asked.
The commit time is the one in the commit, which its author's clock (or ``git commit
--date``) set: docs/grading.md says what that proves and what it does not.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["committed_bytes", "git_record", "now_utc", "parse_utc", "utc_iso"]

_GIT_SAFE = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.untrackedCache=false",
)


def utc_iso(epoch: float) -> str:
    """``epoch`` (seconds) as ISO 8601 in UTC, to the second, with a ``Z``."""
    return datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_utc() -> str:
    """This moment, as :func:`utc_iso` writes it."""
    return utc_iso(datetime.now(timezone.utc).timestamp())


def parse_utc(text: str) -> datetime:
    """An ISO 8601 time that names its time zone (``Z`` or an offset), as an aware datetime.

    Raises:
        ValueError: not ISO 8601, or no time zone (a deadline must not depend on the
            machine it is checked on).
    """
    when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone: add Z (UTC) or an offset such as +01:00")
    return when


def _git(folder: Path, *args: str) -> bytes | None:
    """git's stdout for ``args`` run in ``folder``; None when git fails or is absent."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", *_GIT_SAFE, "-C", str(folder), *args],
            capture_output=True,
            timeout=60,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_record(path: Path, data: bytes) -> dict | None:
    """Which commit holds the notebook at ``path`` (whose graded bytes are ``data``), and when.

    Returns:
        ``{"head", "head_time", "commit", "commit_time", "path", "modified"}`` (see the module's
        docstring; ``commit`` and ``commit_time`` are None for a file never committed), or
        None when ``path`` is not in a git repository git can read.
    """
    folder = Path(path).resolve().parent
    head = _git(folder, "log", "-1", "--format=%H %ct", "--no-show-signature", "HEAD")
    prefix = _git(folder, "rev-parse", "--show-prefix")
    if head is None or prefix is None:
        return None
    relative = prefix.decode("utf-8", "surrogateescape").strip() + Path(path).name
    last = _git(folder, "log", "-1", "--format=%H %ct", "--no-show-signature", "--", Path(path).name)
    commit, when = (last.decode().split() + [None, None])[:2] if last and last.strip() else (None, None)
    blob = committed_bytes(folder, commit, relative) if commit else None
    head_commit, head_when = (head.decode().split() + [None, None])[:2]
    return {
        "head": head_commit,
        "head_time": utc_iso(int(head_when)) if head_when else None,
        "commit": commit,
        "commit_time": utc_iso(int(when)) if when else None,
        "path": relative,
        "modified": blob != data,
    }


def committed_bytes(repo: Path, commit: str, path: str) -> bytes | None:
    """The file ``path`` (relative to the repository) as ``commit`` holds it; None if it does not.

    Raw bytes (``git cat-file blob``: no filters, no line-ending conversion).
    """
    if not commit or commit.startswith("-") or ":" in commit:
        return None
    return _git(Path(repo), "cat-file", "blob", f"{commit}:{path}")
