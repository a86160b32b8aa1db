"""A class's roster: whose folder holds which notebooks, and which signed reports count.

``ROSTER/<learner>/`` holds that learner's lesson notebooks, or those of its
``autograd-course/`` (a clone of the Classroom template, a hub home: :func:`notebook_folder`),
and maybe the signed report a CI job made for them (:func:`ci_reports`). ``--expect FILE``
names who should have handed work in (:func:`expected_learners`, :func:`same_learner`).
:mod:`course.classroom.gradebook` is the command that reads a roster.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from course.grading.files import REPORT_FORMAT
from course.grading.names import is_offered_copy, lesson_number
from course.grading.signing import file_sha256, parse, rejected
from course.grading.untrusted import Untrusted, clean_text, read_regular

REPORT_LIMIT = 16 << 20  # bytes: a grade report larger than this is not read


@dataclass
class Learner:
    """One learner's results: ``{exercise id: exercise entry of the grade report}``."""

    name: str
    exercises: dict[str, dict] = field(default_factory=dict)
    note: str = ""  # why the row is empty or partial ("no notebooks", "unreadable: ...")
    isolation: str = ""  # how its notebooks were graded: "bubblewrap", "none (...)", "cached"; "" if not
    empty: bool = False  # nothing to grade: no folder, or no lesson notebook and no report in it


# NOTE [Nothing a learner wrote is trusted]
# 1. A report in a learner's folder counts only when it parses as a report (signing.problems),
#    its signature checks with the instructor's key as a grade (not a cache entry), it names
#    the folder's learner and this course version, and every notebook it graded is there with
#    the sha256 it names (a report alone, a classmate's copied in, proves nothing). Else it is
#    ignored, and the row's note says why and what to do (the notebooks are graded instead).
# 2. Notebooks are graded by `course grade` in a sandbox per learner (run_untrusted: an
#    allow-list of read-only binds, so neither the roster, the cache, the key nor the home
#    folder is there; an unprivileged uid, limits, no network, its own PID namespace, NOTE
#    [What bubblewrap gives, and what the fallback gives]). The sandboxed grader signs its report
#    with a one-time key sent on its stdin (read before any learner code, in a process learner
#    code cannot read); a report without that signature is "grading did not finish".
# 3. Cache entries are signed with the gradebook's key for the purpose "cache" (so no reader
#    takes one for a learner's grade), bound to the notebooks' bytes, and written 0600.
# 4. Whatever goes wrong for one learner costs that learner's row, never the gradebook.


TEMPLATE_DIR = "autograd-course"  # what `course start` makes: the Classroom template, a hub home


def notebook_folder(folder: Path) -> Path:
    """Where a learner's notebooks are: ``folder`` itself, or its ``autograd-course/`` (a clone
    of the Classroom template, a hub home) when ``folder`` holds no lesson notebook. A symbolic
    link is never followed (it could be a classmate's)."""
    inner = folder / TEMPLATE_DIR
    if any(lesson_number(p.name) is not None for p in folder.glob("*.ipynb")):
        return folder
    return inner if inner.is_dir() and not inner.is_symlink() else folder


def learner_notebooks(folder: Path, lessons: set[int] | None, notes: list[str]) -> dict[str, bytes]:
    """name -> bytes of the learner's lesson notebooks (symlinks, FIFOs, huge files refused),
    found in :func:`notebook_folder`."""
    found = {}
    for p in sorted(notebook_folder(folder).glob("*.ipynb")):
        if p.name.startswith(".") or is_offered_copy(p.name):
            continue
        if lessons is not None and lesson_number(p.name) not in lessons:
            continue
        try:
            found[p.name] = read_regular(p)
        except (OSError, Untrusted) as e:
            notes.append(f"{p.name} not graded: {e}")
    return found


def _accepted(
    data: object,
    key: bytes | None,
    notebooks: dict[str, bytes],
    extra: Path | None = None,
    learner: str | None = None,
    lessons: set[int] | None = None,
) -> str:
    """Why a report is not taken ("" when it is): it must be a grade signed for ``learner``
    (the folder's), by this course version, and every notebook it graded (of ``lessons``)
    must be in the folder with the bytes it graded (a report alone proves no notebook: a
    classmate's signed report copied into a folder would count). With ``extra``
    (``--extra-cases``), only a report graded with that very file counts."""
    import course

    why = rejected(data, key, learner)
    if why:
        return why
    if data["course_version"] != course.__version__:
        return f"made by course {data['course_version']}, not {course.__version__}"
    if extra is not None and (data.get("extra_cases") or {}).get("sha256") != sha256_of(extra):
        return "not graded with the --extra-cases file given"
    for nb in data["notebooks"]:
        name = Path(nb["path"]).name
        if nb.get("note") or (lessons is not None and lesson_number(name) not in lessons):
            continue  # a lesson the report found no notebook for, or one not asked for
        if name not in notebooks:
            return f"{clean_text(name, 80)} is not in the folder: put the notebooks it graded beside it"
        if nb.get("sha256") != file_sha256(notebooks[name]):
            return f"{clean_text(name, 80)} changed since it was graded"
    return ""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ci_reports(
    folder: Path,
    key: bytes | None,
    notebooks: dict[str, bytes],
    notes: list[str],
    extra: Path | None = None,
    lessons: set[int] | None = None,
) -> list[dict]:
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = parse(read_regular(path, REPORT_LIMIT))
        except (OSError, Untrusted, ValueError) as e:
            notes.append(f"{path.name} ignored: unreadable ({clean_text(e, 200)})")
            continue
        if not (isinstance(data, dict) and data.get("format") == REPORT_FORMAT):
            continue  # some other JSON file of the learner's
        why = _accepted(data, key, notebooks, extra, folder.name, lessons)
        if why:
            notes.append(f"{path.name} ignored: {why}")
        else:
            out.append(data)
    return out


def same_learner(roster_name: str, learner: str) -> bool:
    """A roster's name is the learner's, or the login a Classroom repository name ends with
    (``<assignment prefix>-<login>``).

    Example:
        >>> same_learner("ada", "autograd-ada"), same_learner("ada", "ada"), same_learner("ada", "autograd-adam")
        (True, True, False)
    """
    return learner == roster_name or learner.endswith(f"-{roster_name}")


def expected_learners(path: Path) -> list[str]:
    """The learners of a roster file: one name a line, or a CSV whose first column is the name
    (a header ``identifier``, ``learner``, ``login`` or ``name`` is skipped; GitHub Classroom's
    roster export has ``identifier`` first); blank lines and ``#`` comments skipped."""
    names = []
    for row in csv.reader(path.read_text(encoding="utf-8").splitlines()):
        name = row[0].strip() if row else ""
        if (
            name
            and not name.startswith("#")
            and name.lower() not in ("identifier", "learner", "login", "name")
        ):
            names.append(clean_text(name, 200))
    return list(dict.fromkeys(names))
