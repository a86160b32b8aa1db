"""`course gradebook`: one table for a whole class, and the misconceptions the class met.

``ROSTER`` holds one folder per learner (the folder's name is the learner). Each folder holds
that learner's notebooks, or the signed ``course grade --json`` report a CI job made for them
(format ``course-grade/1``, signed with the instructor's key: ``--key-file`` or
``$COURSE_GRADE_KEY``), or both (a report that checks wins: nothing is graded again)::

    roster/
      ada/      00_warmup.ipynb 01_autograd_graph.ipynb ...
      alan/     autograd-course/00_warmup.ipynb ...   # a clone of the Classroom template, a hub home
      grace/    report.json          # signed by CI; a hand-written one is ignored, with the reason
      linus/                         # empty: listed as "no lesson notebook", never a silent 0

The notebooks are those of ``<learner>/`` or, when it holds none, of
``<learner>/autograd-course/`` (the folder ``course start`` makes, in the Classroom template
and in a hub home). A second notebook of one lesson (JupyterLab's ``00_warmup-Copy1.ipynb``)
is ignored and named in the row's note: the lesson's own ``NN_slug.ipynb`` is graded.
``--expect FILE`` (one learner a line) names who should have handed work in: a learner with
no folder gets a row that says so.

Notebooks are graded by ``course grade --no-run`` itself, one learner at a time (``-j N``
learners at once), each in a sandbox of its own (``course.grading.sandbox.run_untrusted``:
bubblewrap, nothing of the host but an allow-list; without it a loud warning and a separate
process with limits),
see the NOTE below and docs/grading.md; it skips the headless "Run All", which never changes
a score. Its reports are cached in ``ROSTER/.course-gradebook/``, signed, under the hash of
the learner's notebooks, the lessons chosen and the grader's fingerprint (version and
checks): run it again after every push and only changed learners are graded.

What it writes:

- stdout: per exercise, the pass rate and the misconceptions met (the known wrong answer a
  learner's answer matched, with its hint), most common first; learners who did not attempt
  the exercise are counted apart;
- ``--csv OUT``: one row per learner (``learner`` first), one column per exercise id with the
  points scored, then ``total``, ``max`` and ``note`` (why a row is empty). An exercise the
  learner did not attempt is an empty cell; one attempted and failed (or that raised) is ``0``,
  so a spreadsheet's ``COUNTBLANK`` counts who has not started and ``AVERAGE`` averages over
  those who tried;
- ``--json OUT``: the same as stdout, as data (format ``course-gradebook/1``);
- ``--html OUT``: the report with a bar chart of pass rates, readable without Jupyter.

A misconception is recognised by the hint in the report: the grader gives a wrong answer the
hint of the known wrong answer it behaves like (``course.checks``), and the gradebook looks
that hint up in the exercise's catalogue.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import csv
import hashlib
import html
import io
import json
import os
import secrets
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from course.grading.files import GRADEBOOK_FORMAT, REPORT_FORMAT, grader_fingerprint, write_atomically
from course.grading.isolation import python_command
from course.grading.names import is_offered_copy, lesson_number
from course.grading.options import positive_seconds
from course.grading.sandbox import run_untrusted
from course.grading.signing import file_sha256, parse, problems, read_key, rejected, sign, verify
from course.grading.untrusted import Untrusted, clean_text, csv_cell, read_regular

__all__ = [
    "Learner",
    "Report",
    "build",
    "cache_key",
    "collect",
    "expected_learners",
    "grade_sandboxed",
    "learner_notebooks",
    "main",
    "notebook_folder",
    "same_learner",
]

CACHE_DIR = ".course-gradebook"
REPORT_LIMIT = 16 << 20  # bytes: a grade report larger than this is not read


@dataclass
class Learner:
    """One learner's results: ``{exercise id: exercise entry of the grade report}``."""

    name: str
    exercises: dict[str, dict] = field(default_factory=dict)
    note: str = ""  # why the row is empty or partial ("no notebooks", "unreadable: ...")
    isolation: str = ""  # how its notebooks were graded: "bubblewrap", "none (...)", "cached"; "" if not
    empty: bool = False  # nothing to grade: no folder, or no lesson notebook and no report in it


@dataclass
class Report:
    learners: list[Learner]
    exercise_ids: list[str]
    points: dict[str, int]
    per_exercise: list[dict]

    def to_json(self) -> dict:
        return {
            "format": GRADEBOOK_FORMAT,
            "learners": [
                {
                    "learner": x.name,
                    "note": x.note,
                    "isolation": x.isolation,
                    # null where the CSV leaves the cell empty: not attempted (0: tried, failed)
                    "scores": {i: _json_score(x.exercises.get(i)) for i in self.exercise_ids},
                    "total": total(x, self.exercise_ids),
                    "max": sum(self.points.values()),
                }
                for x in self.learners
            ],
            "exercises": self.per_exercise,
        }


def _json_score(entry: dict | None) -> float | None:
    """The points of one exercise entry; None when not attempted (the CSV's empty cell)."""
    if entry is None or entry.get("status", "not attempted") == "not attempted":
        return None
    return entry.get("score", 0)


def total(learner: Learner, ids: list[str]) -> float:
    return sum(learner.exercises.get(i, {}).get("score", 0) for i in ids)


# --- reading a roster -----------------------------------------------------------------------
#
# NOTE [Nothing a learner wrote is trusted]
# 1. A report in a learner's folder counts only when it parses as a report (signing.problems),
#    its signature checks with the instructor's key as a grade (not a cache entry), it names
#    the folder's learner and this course version, and (in a folder of notebooks) every
#    notebook it graded is there with the sha256 it names. Else it is ignored, and the row's note says why (the
#    notebooks are graded instead).
# 2. Notebooks are graded by `course grade` in a sandbox per learner (run_untrusted: an
#    allow-list of read-only binds, so neither the roster, the cache, the key nor the home
#    folder is there; an unprivileged uid, limits, no network, its own PID namespace, NOTE
#    [What bubblewrap gives, and what the fallback gives]). The sandboxed grader signs its report
#    with a one-time key sent on its stdin (read before any learner code, in a process learner
#    code cannot read); a report without that signature is "grading did not finish".
# 3. Cache entries are signed with the gradebook's key for the purpose "cache" (so no reader
#    takes one for a learner's grade), bound to the notebooks' bytes, and written 0600.
# 4. Whatever goes wrong for one learner costs that learner's row, never the gradebook.


def _exercises(lessons: set[int] | None) -> list:
    from course import checks

    checks.load_all()
    return [ex for ex in checks.all_exercises() if lessons is None or ex.lesson in lessons]


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
    (the folder's), by this course version, and, in a folder that holds notebooks, every
    notebook it graded (of ``lessons``) must be there with the bytes it graded. With ``extra``
    (``--extra-cases``), only a report graded with that very file counts."""
    import course

    why = rejected(data, key, learner)
    if why:
        return why
    if data["course_version"] != course.__version__:
        return f"made by course {data['course_version']}, not {course.__version__}"
    if extra is not None and (data.get("extra_cases") or {}).get("sha256") != _sha256(extra):
        return "not graded with the --extra-cases file given"
    for nb in data["notebooks"]:
        name = Path(nb["path"]).name
        if nb.get("note") or (lessons is not None and lesson_number(name) not in lessons):
            continue  # a lesson the report found no notebook for, or one not asked for
        if not notebooks:
            continue  # a folder of CI reports alone (their artifacts): bound by the learner
        if name not in notebooks:
            return f"{clean_text(name, 80)} is not in the folder"
        if nb.get("sha256") != file_sha256(notebooks[name]):
            return f"{clean_text(name, 80)} changed since it was graded"
    return ""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _reports(
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


def _fingerprint(
    notebooks: dict[str, bytes], lessons: set[int] | None = None, extra: Path | None = None
) -> str:
    # The grader's own fingerprint (version and the checks' code): a fixed check grades again.
    chosen = "all" if lessons is None else ",".join(map(str, sorted(lessons)))
    cases = f" extra {_sha256(extra)}" if extra is not None else ""  # other extra cases, another grade
    h = hashlib.sha256(f"{grader_fingerprint()} lessons {chosen}{cases}".encode())
    for name, data in sorted(notebooks.items()):
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + data + b"\0")
    return h.hexdigest()[:24]


def cache_key(cache: Path, key: bytes | None) -> bytes:
    """The instructor's key, else one kept in the cache folder (made on first use, 0600).
    ``course room`` signs its cache with the same key, and grades in :func:`grade_sandboxed`."""
    if key is not None:
        return key
    cache.mkdir(mode=0o700, exist_ok=True)
    path = cache / "key"
    try:
        return read_regular(path, 4096).strip() or _new_key(path)
    except (OSError, Untrusted):
        return _new_key(path)


def _new_key(path: Path) -> bytes:
    value = secrets.token_hex(32).encode()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(value)
    return value


def grade_sandboxed(
    notebooks: dict[str, bytes], timeout: float, lessons: set[int] | None, hide: list[Path] = (), extra=None
) -> tuple[dict, str]:
    """(the grade report of ``notebooks``, the isolation used); runs ``course grade --no-run``
    on a private copy through :func:`course.grading.sandbox.run_untrusted` (bubblewrap where it
    runs: nothing of the host but the allow-list is visible, so ``hide`` needs no entry; its
    paths are kept for the callers that name what must never be seen)."""
    del hide  # the allow-list shows none of them (NOTE [An allow-list, not a deny-list])
    with tempfile.TemporaryDirectory(prefix="course-gradebook-") as tmp:
        inputs = Path(tmp) / "in"
        inputs.mkdir()
        for name, data in notebooks.items():  # only the selected lessons, under their own names
            (inputs / name).write_bytes(data)
        once = secrets.token_hex(32)  # the sandboxed grader signs with this: learner code never sees it

        def args(folder: str) -> list[str]:
            cmd = [
                "course",
                "grade",
                folder,
                "--json",
                "-",
                "--key-file",
                "-",
                "-q",
                "--no-run",
                "--timeout",
                f"{timeout:g}",
            ]
            if lessons is not None:  # only their checks are prepared (and missing ones reported)
                cmd += ["--lessons", ",".join(f"{n:02d}" for n in sorted(lessons))]
            if extra is not None:  # read, then removed, before any learner code runs
                cmd += ["--extra-cases", f"{folder}/../secret.py"]
            return python_command(*cmd)

        # Bounded: a sandbox stopped by learner code (SIGSTOP) costs this, then it is killed.
        limit = len(notebooks) * (2 * timeout + 90) + 180
        secret = extra.read_bytes() if extra is not None else None  # the instructor's extra cases
        run = run_untrusted(
            args, inputs, stdin=once.encode(), timeout=limit, stdout_limit=REPORT_LIMIT, secret=secret
        )
    if run.timed_out:
        raise RuntimeError(f"grading did not finish in time ({limit:g} s)")
    said = f": {clean_text(run.said, 300)}" if run.said else ""
    try:
        report = parse(run.stdout)
    except ValueError:
        raise RuntimeError(f"grading did not finish (exit {run.returncode}){said}") from None
    if problems(report) or not verify(report, once.encode()):
        raise RuntimeError(
            f"grading did not finish (exit {run.returncode}{said}): no report signed by the grader"
        )
    for nb in report["notebooks"]:  # a notebook that scored must be the one we gave
        name = Path(nb["path"]).name
        scored = sum(e["score"] for e in nb["exercises"]) > 0
        if scored and (name not in notebooks or nb.get("sha256") != file_sha256(notebooks[name])):
            raise RuntimeError(f"grading did not finish: {name} is not the notebook given")
    return report, run.isolation


def _graded(
    name: str,
    notebooks: dict[str, bytes],
    cache: Path,
    key: bytes,
    timeout: float,
    quiet: bool,
    lessons: set[int] | None,
    hide: list[Path],
    extra: Path | None = None,
) -> tuple[dict, str]:
    """The grade report of one learner's ``notebooks``: from the cache (signed by ``key``)
    or a fresh sandboxed run; and how it was isolated ("cached" for a cache hit)."""
    entry = (
        cache / f"{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}-"
        f"{_fingerprint(notebooks, lessons, extra)}.json"
    )
    try:
        cached = parse(read_regular(entry, REPORT_LIMIT))
        if not problems(cached) and verify(cached, key, purpose="cache"):
            return cached, "cached"
    except (OSError, Untrusted, ValueError):
        pass  # no entry, a half-written or a forged one: grade again
    report, isolation = grade_sandboxed(notebooks, timeout, lessons, hide, extra)
    report = sign(report, key, purpose="cache")  # never a learner's grade (NOTE [A signature has a purpose])
    cache.mkdir(mode=0o700, exist_ok=True)
    write_atomically(entry, json.dumps(report), mode=0o600)
    if not quiet:
        print(f"graded {clean_text(name, 80)}", file=sys.stderr, flush=True)
    return report, isolation


def _learner(
    folder: Path,
    lessons: set[int] | None,
    cache: Path,
    keys: tuple,
    timeout: float,
    quiet: bool,
    hide: list[Path],
    extra: Path | None = None,
) -> Learner:
    learner = Learner(clean_text(folder.name, 200))
    notes: list[str] = []
    try:
        notebooks = learner_notebooks(folder, lessons, notes)
        reports = _reports(folder, keys[0], notebooks, notes, extra, lessons)
        if not reports and notebooks:
            report, learner.isolation = _graded(
                folder.name, notebooks, cache, keys[1], timeout, quiet, lessons, hide, extra
            )
            reports = [report]
        elif not reports:
            learner.empty = True
            notes.append(
                f"no lesson notebook in {folder.name}/ nor {folder.name}/{TEMPLATE_DIR}/ (and no report)"
            )
        for report in reports:
            for item in report.get("ignored", []):
                if "another notebook of lesson" in item.get("reason", ""):
                    notes.append(f"{Path(item['path']).name} ignored: {item['reason']}")
            for nb in report["notebooks"]:
                if nb.get("error"):
                    notes.append(f"{Path(nb['path']).name}: {nb['error']}")
                for entry in nb["exercises"]:
                    learner.exercises[entry["id"]] = entry
    except Exception as e:  # one learner's trouble is that learner's row only
        notes.append(f"not graded: {clean_text(e, 300)}")
    learner.note = clean_text("; ".join(notes), 1000)
    return learner


def collect(
    roster: Path,
    lessons: set[int] | None = None,
    jobs: int = 1,
    timeout: float = 300,
    quiet: bool = True,
    key: bytes | None = None,
    extra: Path | None = None,
    expected: list[str] = (),
) -> list[Learner]:
    """Every learner folder of ``roster``, in name order, graded or read from their signed reports;
    and a row for each learner of ``expected`` without a folder ("missing").

    ``key``: the instructor's key (what CI signed the learners' reports with); without one,
    no report is trusted and every learner's notebooks are graded. ``extra``: the instructor's
    extra cases (``course grade --extra-cases``): a report counts only if graded with them.
    """
    folders = sorted(
        p for p in roster.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    )
    cache = roster / CACHE_DIR
    keys = (key, cache_key(cache, key))
    hide = [roster.resolve(), cache.resolve(), Path.home()]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        found = list(
            pool.map(lambda f: _learner(f, lessons, cache, keys, timeout, quiet, hide, extra), folders)
        )
    have = [x.name for x in found]
    found += [
        Learner(name, note=f"missing: no folder {name}/ in the roster", empty=True)
        for name in expected
        if not any(same_learner(name, learner) for learner in have)
    ]
    return sorted(found, key=lambda x: x.name)


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


# --- the report -------------------------------------------------------------------------------


def build(learners: list[Learner], lessons: set[int] | None = None) -> Report:
    """Pass rates and misconceptions per exercise, from the learners' grade entries."""
    exercises = _exercises(lessons)
    ids = [ex.id for ex in exercises]
    per_exercise = []
    for ex in exercises:
        statuses = Counter(x.exercises.get(ex.id, {}).get("status", "not attempted") for x in learners)
        known = {w.hint for w in ex.wrong}
        met = Counter(
            x.exercises[ex.id].get("hint", "")
            for x in learners
            if x.exercises.get(ex.id, {}).get("status") in ("failed", "error")
            and x.exercises[ex.id].get("hint", "") in known
        )
        attempted = len(learners) - statuses["not attempted"]
        per_exercise.append(
            {
                "id": ex.id,
                "name": ex.name,
                "title": ex.title,
                "points": ex.points,
                "learners": len(learners),
                "attempted": attempted,
                "not_attempted": statuses["not attempted"],
                "passed": statuses["passed"],
                "failed": statuses["failed"],
                "error": statuses["error"],
                "revealed": statuses["revealed"],
                "pass_rate": statuses["passed"] / len(learners) if learners else 0.0,
                "misconceptions": [
                    {"hint": h, "learners": n} for h, n in sorted(met.items(), key=lambda kv: (-kv[1], kv[0]))
                ],
                "unrecognised_wrong": statuses["failed"] + statuses["error"] - sum(met.values()),
            }
        )
    return Report(learners, ids, {ex.id: ex.points for ex in exercises}, per_exercise)


def text(report: Report) -> str:
    lines = [f"{len(report.learners)} learners, {len(report.exercise_ids)} exercises", ""]
    for x in report.learners:
        note = f"  ({x.note})" if x.note else ""
        points = "-" if x.empty else f"{total(x, report.exercise_ids):g}/{sum(report.points.values())}"
        lines.append(f"  {x.name:<20} {points}{note}")
    lines.append("")
    for e in report.per_exercise:
        lines.append(
            f"{e['id']:<5} {e['name']:<28} passed {e['passed']}/{e['learners']} "
            f"({e['pass_rate']:.0%}); not attempted {e['not_attempted']}"
        )
        for m in e["misconceptions"]:
            lines.append(f"        {m['learners']} x {m['hint']}")
        if e["unrecognised_wrong"]:
            lines.append(
                f"        {e['unrecognised_wrong']} x a wrong answer that matched no known misconception"
            )
    return "\n".join(lines)


def write_csv(report: Report, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["learner", *report.exercise_ids, "total", "max", "note"])
        for x in report.learners:
            scores = [_csv_score(x.exercises.get(i)) for i in report.exercise_ids]
            w.writerow(
                [
                    csv_cell(x.name),
                    *scores,
                    f"{total(x, report.exercise_ids):g}",
                    sum(report.points.values()),
                    csv_cell(x.note),
                ]
            )


def _csv_score(entry: dict | None) -> str:
    """The points of one exercise entry; "" when not attempted (no entry, or that status)."""
    if entry is None or entry.get("status", "not attempted") == "not attempted":
        return ""
    return f"{entry.get('score', 0):g}"


def write_html(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = report.exercise_ids
    rates = [e["pass_rate"] * 100 for e in report.per_exercise]
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(ids)), 3.5), layout="constrained")
    ax.bar(ids, rates, color="#4c72b0")
    ax.set_ylim(0, 100)
    ax.set_ylabel("learners who passed (%)")
    ax.set_xlabel("exercise")
    ax.set_title(f"Pass rate per exercise ({len(report.learners)} learners)")
    ax.tick_params(axis="x", rotation=90)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    chart = base64.b64encode(buf.getvalue()).decode()
    top = sorted(
        ((m["learners"], e["id"], m["hint"]) for e in report.per_exercise for m in e["misconceptions"]),
        key=lambda t: (-t[0], t[1]),
    )[:15]
    esc = html.escape
    rows = "".join(f"<tr><td>{n}</td><td>{esc(i)}</td><td>{esc(h)}</td></tr>" for n, i, h in top)
    learners = "".join(
        f"<tr><td>{esc(x.name)}</td><td>{total(x, ids):g}</td><td>{esc(x.note)}</td></tr>"
        for x in report.learners
    )
    path.write_text(
        "<!doctype html><meta charset='utf-8'><title>Gradebook</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:.2em .6em;"
        "border-bottom:1px solid #ddd;text-align:left}</style>"
        f"<h1>Gradebook</h1><img alt='pass rate per exercise' src='data:image/png;base64,{chart}'>"
        "<h2>Misconceptions the class met</h2><table><tr><th>learners</th><th>exercise</th><th>hint</th></tr>"
        f"{rows or '<tr><td colspan=3>none</td></tr>'}</table>"
        f"<h2>Learners</h2><table><tr><th>learner</th><th>total / {sum(report.points.values())}</th>"
        f"<th>note</th></tr>{learners}</table>\n",
        encoding="utf-8",
    )


def _lessons(value: str | None) -> set[int] | None:
    if not value:
        return None
    try:
        return {int(part) for part in value.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lessons takes numbers like 00,01, not {value!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course gradebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("roster", type=Path, help="a folder with one folder per learner")
    parser.add_argument(
        "--csv", type=Path, help="one row per learner, one column per exercise (points; empty: not attempted)"
    )
    parser.add_argument("--json", type=Path, help="the report as JSON")
    parser.add_argument("--html", type=Path, help="the report with a pass-rate chart, as one HTML file")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="learners graded at once (default 1)")
    parser.add_argument("--lessons", type=_lessons, default=None, help="only these lessons, e.g. 00,01")
    parser.add_argument(
        "--timeout", type=positive_seconds, default=300, help="seconds per notebook run (default 300)"
    )
    parser.add_argument(
        "--key-file",
        default=None,
        help="the key CI signed reports with (-: stdin; default $COURSE_GRADE_KEY)",
    )
    parser.add_argument(
        "--extra-cases",
        type=Path,
        default=None,
        metavar="FILE.py",
        help="the instructor's extra hidden cases",
    )
    parser.add_argument(
        "--expect",
        type=Path,
        default=None,
        metavar="FILE",
        help="who should have handed work in: one learner a line (or a CSV, name first)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.expect is not None and not args.expect.is_file():
        print(f"course gradebook: --expect: no such file: {args.expect}", file=sys.stderr)
        return 2
    if not args.roster.is_dir():
        print(f"course gradebook: no such roster folder: {args.roster}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("course gradebook: -j needs a positive number of learners", file=sys.stderr)
        return 2
    from course.grading.plan import lesson_numbers

    unknown = sorted(set(args.lessons or ()) - set(lesson_numbers()))
    if unknown:  # as `course grade` says it: a typo must not print a 0/0 table
        print(
            f"course gradebook: --lessons: the course has no lesson {', '.join(f'{n:02d}' for n in unknown)}",
            file=sys.stderr,
        )
        return 2
    for out in (args.csv, args.json, args.html):
        if out is not None and not out.parent.is_dir():
            print(f"course gradebook: the folder for {out} does not exist", file=sys.stderr)
            return 2
        if out is not None and out.is_dir():
            print(f"course gradebook: {out} is a folder; give a file name", file=sys.stderr)
            return 2
    try:
        key = read_key(args.key_file)
    except OSError as e:
        print(f"course gradebook: --key-file: {e.strerror or e}", file=sys.stderr)
        return 2
    extra = args.extra_cases.resolve() if args.extra_cases else None
    if extra is not None:  # its errors now, before any learner is graded
        from course.checks.extra import ExtraCasesError, load_extra_cases

        try:
            load_extra_cases(extra)
        except ExtraCasesError as e:
            print(f"course gradebook: --extra-cases: {e}", file=sys.stderr)
            return 2
    expected = expected_learners(args.expect) if args.expect else []
    learners = collect(args.roster, args.lessons, args.jobs, args.timeout, args.quiet, key, extra, expected)
    if not learners:
        print(f"course gradebook: no learner folders in {args.roster}", file=sys.stderr)
        return 2
    report = build(learners, args.lessons)
    unsandboxed = [x.name for x in learners if x.isolation.startswith("none")]
    if unsandboxed:
        print(
            f"course gradebook: WARNING: bubblewrap is not available here, so {len(unsandboxed)} learner(s) were "
            "graded WITHOUT a sandbox (a separate process, a private copy and resource limits only): a hostile "
            "notebook could read or change other learners' files. Install bubblewrap (apt-get install bubblewrap) "
            "or run the gradebook in a container (docs/grading.md).",
            file=sys.stderr,
        )
    print(text(report))
    code = 0
    empty = [x.name for x in learners if x.empty]
    if empty:
        print(
            f"course gradebook: nothing to grade for {len(empty)} of {len(learners)} learner(s): "
            f"{', '.join(empty)} (their rows say why; a row of '-' is not a score)",
            file=sys.stderr,
        )
    if len(empty) == len(learners):  # a wrong folder, more likely than a class that did nothing
        code = 1
    for out, write in ((args.csv, write_csv), (args.json, _write_json), (args.html, write_html)):
        if out is None:
            continue
        try:
            write(report, out)
        except OSError as e:  # every learner is graded: say what could not be written, keep the rest
            print(f"course gradebook: cannot write {out}: {e.strerror or e}", file=sys.stderr)
            code = 1
    return code


def _write_json(report: Report, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
