"""``course collect``: a class's signed grade reports in one table, with late work marked.

::

    course collect REPORTS... [--deadline 2026-12-01T23:59:00+01:00] [--csv class.csv] [--expect roster.txt]

``REPORTS`` are report files or folders searched for them (the artifacts a grading workflow
uploaded, downloaded with ``gh run download``; clones that hold reports): every
``course-grade/1`` JSON file below them counts, the rest is skipped. Each report is checked as
the gradebook checks one (:func:`course.grading.signing.rejected`: a report, signed with the
instructor's key, ``--key-file`` or ``$COURSE_GRADE_KEY``), then gives one row per learner::

    learner        points  late  commit        committed             graded                flags
    autograd-ada   3/3     no    06d91c2421ff  2026-11-30T20:00:00Z  2026-12-02T00:00:05Z
    autograd-bob   0/3     yes   5b1e0c9a77d2  2026-12-01T12:00:00Z  2026-12-02T00:00:07Z  another grader: regrade
    report-eve     -       -                                                               report.json ignored: ...
    autograd-fay   -       -                                                               missing: no report

- the learner is the one the report names (``course grade --learner``, signed); a report
  that names none is ignored (never credited to the folder it sits in: a gradebook's cache
  entry or a report copied there); a learner with several reports gets the one graded last;
- **late**: the later of the report's notebook commits and HEAD is after ``--deadline``
  (``yes``); ``no`` only when the report was also graded by the deadline; ``unknown`` when a
  notebook was graded outside git or from uncommitted changes, or the report was graded
  after the deadline (a backdated commit says "before"; only ``graded_at`` proves it);
- **flags**: a report made by another course version or another grader (its fingerprint
  covers the checks' code: a fixed check changes it), which ``course regrade`` grades again;
  notebooks that could not be graded; reports that were ignored, and why; with
  ``--deadline``, a score that **rose after the deadline**: the report taken (graded last)
  scores more than the last one graded by the deadline;
- the instructor's policy (:mod:`course.classroom.policy`): ``--extensions FILE`` (a learner's
  own deadline), ``--late-penalty P`` (a fraction of the score per started day late),
  ``--weights FILE`` (points per exercise, without a fork of the course); the final score is a
  flag on the row, and ``--lms-csv OUT`` writes ``learner,points,max`` for an LMS's CSV import;
- ``--expect FILE``: who should have handed work in (one learner a line, or a CSV whose first
  column is the learner, as GitHub Classroom's roster export); a learner it names with no
  report gets a row ``missing: no report``. A roster line ``ada`` also matches the
  repository name ``autograd-ada`` (Classroom's ``<assignment prefix>-<login>``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path

from course.classroom.gradebook import REPORT_LIMIT, expected_learners, same_learner
from course.classroom.policy import Policy, PolicyError, days_late, final_score, read_policy, write_lms_csv
from course.grading.files import REPORT_FORMAT, grader_fingerprint
from course.grading.provenance import parse_utc
from course.grading.signing import parse, read_key, rejected
from course.grading.untrusted import Untrusted, clean_text, csv_cell, read_regular

__all__ = ["Row", "collect", "find_reports", "instructor_key", "lateness", "main", "write_csv"]


@dataclass
class Row:
    """One learner's line: the report taken (None when every report was ignored) and why not."""

    learner: str
    report: dict | None = None
    source: str = ""  # the report file taken
    late: str = ""  # "yes", "no", "unknown"; "" without a deadline
    flags: list[str] = field(default_factory=list)

    @property
    def commit(self) -> dict:
        """The git record of the notebook committed last (empty: none recorded)."""
        records = [nb.get("git") or {} for nb in _graded(self.report)]
        dated = [g for g in records if _when(g.get("commit_time"))]
        return max(dated, key=lambda g: _when(g["commit_time"])) if dated else {}


def _when(text: object):
    """``text`` as an aware datetime, or None (absent, or not a time with a zone)."""
    try:
        return parse_utc(text) if isinstance(text, str) and text else None
    except ValueError:
        return None


def _graded(report: dict | None) -> list[dict]:
    """The notebooks a report graded (not the rows of lessons it found no notebook for)."""
    return [nb for nb in (report or {}).get("notebooks", []) if not nb.get("note")]


def find_reports(paths: list[Path]) -> list[Path]:
    """Every ``*.json`` file given or below the folders given (hidden folders and symlinks skipped)."""
    found = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        for p in sorted(path.rglob("*.json")):
            parts = p.relative_to(path).parts
            if not any(part.startswith(".") for part in parts) and not p.is_symlink():
                found.append(p)
    return found


def lateness(report: dict, deadline) -> str:
    """``"yes"`` when a notebook of ``report`` was committed after ``deadline`` (an aware
    datetime), or HEAD was; ``"no"`` when every one was committed by then and the report was
    graded by then too; ``"unknown"`` otherwise: a notebook has no commit time, was graded
    from bytes no commit holds, or the report was graded after the deadline (a commit time
    is what the committer's clock or ``GIT_COMMITTER_DATE`` says: only ``graded_at``, the
    grader's clock under the signature, proves the work existed by then)::

        >>> git = {"commit_time": "2026-12-01T12:00:00Z", "modified": False}
        >>> report = {"graded_at": "2026-12-01T12:30:00Z", "notebooks": [{"git": git}]}
        >>> lateness(report, parse_utc("2026-12-01T00:00Z")), lateness(report, parse_utc("2026-12-01T13:30+01:00"))
        ('yes', 'no')
        >>> lateness(report, parse_utc("2026-12-01T12:10Z"))    # committed "before", graded after
        'unknown'
        >>> lateness({"notebooks": [{"git": None}]}, parse_utc("2026-12-01T00:00:00Z"))   # graded outside git
        'unknown'
    """
    times = []
    for nb in _graded(report):
        git = nb.get("git") or {}
        when = _when(git.get("commit_time"))
        if when is None or git.get("modified", True):
            return "unknown"
        times += [when] + ([head] if (head := _when(git.get("head_time"))) else [])
    if not times:
        return "unknown"
    if max(times) > deadline:
        return "yes"
    graded = _when(report.get("graded_at"))
    return "no" if graded is not None and graded <= deadline else "unknown"


def _flags(report: dict) -> list[str]:
    import course

    flags = []
    if report["course_version"] != course.__version__:
        flags.append(f"graded by course {report['course_version']}, not {course.__version__}: regrade")
    elif report.get("grader_fingerprint") != grader_fingerprint():
        made = clean_text(report.get("grader_fingerprint") or "no fingerprint", 80)
        flags.append(f"graded by another grader ({made}): regrade")
    for nb in report["notebooks"]:
        name = Path(nb["path"]).name
        if nb.get("error"):
            flags.append(f"{name}: {clean_text(nb['error'], 200)}")
        elif not nb.get("note") and not nb.get("git"):
            flags.append(f"{name}: graded outside git, no commit recorded")
        elif not nb.get("note") and nb["git"].get("modified"):
            flags.append(f"{name}: graded with changes its commit does not hold")
    return flags


def _one_line(value: object, limit: int) -> str:
    """``value`` as text for one line of the table: control characters gone, breaks as spaces."""
    return " ".join(clean_text(value, limit).split())


def _graded_at(report: dict):
    return _when(report.get("graded_at")) or parse_utc("1970-01-01T00:00:00Z")


def collect(paths: list[Path], key: bytes | None, deadline=None, expected: list[str] = ()) -> list[Row]:
    """One :class:`Row` per learner, in name order, from the reports found below ``paths``;
    a ``missing`` row for each learner of ``expected`` no report names."""
    taken: dict[str, list[tuple[Path, dict]]] = {}
    ignored: dict[Path, list[str]] = {}  # folder -> why its reports were not taken
    whose: dict[Path, str] = {}  # folder -> the learner of a report taken from it
    for path in find_reports(paths):
        name = _one_line(path.name, 200)  # a planted file name is text, never a terminal command
        try:
            data = parse(read_regular(path, REPORT_LIMIT))
        except (OSError, Untrusted, ValueError) as e:
            why = f"unreadable ({clean_text(e, 200)})"
            ignored.setdefault(path.parent, []).append(f"{name} ignored: {why}")
            continue
        if not (isinstance(data, dict) and data.get("format") == REPORT_FORMAT):
            continue  # some other JSON file
        why = rejected(data, key)
        if why:
            ignored.setdefault(path.parent, []).append(f"{name} ignored: {why}")
            continue
        learner = _one_line(data["learner"], 200)  # rejected() refused a report that names none
        whose[path.parent] = learner
        taken.setdefault(learner, []).append((path, data))
    # A folder's ignored reports go to the learner of a report taken from that same folder (the
    # same artifact), else to a row of their own named by the folder, with a "/" no learner's
    # name has: a folder named after a classmate never puts its note on that classmate's row.
    notes: dict[str, list[str]] = {}
    for folder, why in ignored.items():
        notes.setdefault(whose.get(folder) or _one_line(folder.name, 200) + "/", []).extend(why)
    rows = []
    for learner in sorted(set(taken) | set(notes)):
        row = Row(learner, flags=list(notes.get(learner, [])))
        if learner in taken:
            reports = sorted(taken[learner], key=lambda pr: _graded_at(pr[1]))
            path, row.report = reports[-1]
            row.source = str(path)
            row.flags = _flags(row.report) + row.flags
            if len(reports) > 1:
                row.flags.append(f"{len(reports)} reports: the one graded last is taken")
            if deadline is not None:
                row.late = lateness(row.report, deadline)
                row.flags += _rose_after(reports, deadline)
        rows.append(row)
    have = set(taken) | set(notes)
    for name in expected:
        if not any(same_learner(name, learner) for learner in have):
            rows.append(Row(name, flags=["missing: no report"]))
    return sorted(rows, key=lambda r: r.learner)


def _rose_after(reports: list[tuple[Path, dict]], deadline) -> list[str]:
    """A flag when the report taken (graded last) scores more than the last one graded by the
    deadline: work improved after it, which only ``graded_at`` (signed) can show."""
    by_then = [r for _, r in reports if _graded_at(r) <= deadline]
    last = reports[-1][1]
    if not by_then or _graded_at(last) <= deadline or last["score"] <= by_then[-1]["score"]:
        return []
    before = by_then[-1]
    return [
        f"score rose after the deadline: {before['score']:g} (graded {clean_text(before.get('graded_at'), 40)})"
        f" -> {last['score']:g}"
    ]


_COLUMNS = [
    "learner",
    "score",
    "max_score",
    "late",
    "commit",
    "commit_time",
    "graded_at",
    "course_version",
    "flags",
    "report",
]


def _cells(row: Row) -> list[str]:
    r, git = row.report or {}, row.commit
    score = [f"{r['score']:g}", f"{r['max_score']:g}"] if r else ["", ""]
    return [
        row.learner,
        *score,
        row.late,
        git.get("commit") or "",
        git.get("commit_time") or "",
        clean_text(r.get("graded_at") or "", 40),
        clean_text(r.get("course_version") or "", 40),
        "; ".join(row.flags),
        row.source,
    ]


def write_csv(rows: list[Row], path: Path) -> None:
    """One line per learner (the columns of :data:`_COLUMNS`), every cell spreadsheet-safe."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(_COLUMNS)
        w.writerows([csv_cell(c) for c in _cells(row)] for row in rows)


def print_rows(rows: list[Row]) -> None:
    width = max([len(r.learner) for r in rows] + [8])
    print(
        f"{'learner':<{width}}  {'points':>9}  {'late':<7}  {'commit':<12}  {'committed':<20}  "
        f"{'graded':<20}  flags"
    )
    for row in rows:
        cells = {k: _one_line(v, 4000) for k, v in zip(_COLUMNS, _cells(row))}
        points = f"{cells['score']}/{cells['max_score']}" if row.report else "-"
        print(
            f"{row.learner:<{width}}  {points:>9}  {row.late or '-':<7}  {cells['commit'][:12]:<12}  "
            f"{cells['commit_time']:<20}  {cells['graded_at'][:20]:<20}  {cells['flags']}".rstrip()
        )


def instructor_key(command: str, key_file: str | None) -> bytes | None:
    """The key reports are checked and signed with (``--key-file``, else ``$COURSE_GRADE_KEY``);
    None, once the reason is on stderr, when there is none: nothing can be checked without it."""
    try:
        key = read_key(key_file)
    except OSError as e:
        print(f"{command}: --key-file: {e.strerror or e}", file=sys.stderr)
        return None
    if key is None:
        print(
            f"{command}: no instructor key (--key-file or $COURSE_GRADE_KEY): no report can be checked",
            file=sys.stderr,
        )
    return key


def deadline_arg(value: str):
    try:
        return parse_utc(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course collect", description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", type=Path, nargs="+", help="report files, or folders holding them")
    parser.add_argument(
        "--deadline", type=deadline_arg, help="ISO 8601 with a time zone: later commits are late"
    )
    parser.add_argument("--csv", type=Path, help="write one row per learner here")
    parser.add_argument(
        "--expect", type=Path, metavar="FILE", help="who should have handed work in (one learner a line)"
    )
    # the instructor's policy (course.classroom.policy): extensions, late penalty, weights, LMS export
    parser.add_argument(
        "--extensions", type=Path, metavar="FILE", help="learner,deadline lines: own deadlines"
    )
    parser.add_argument(
        "--late-penalty", type=float, default=0.0, metavar="P", help="fraction of the score lost per day late"
    )
    parser.add_argument(
        "--weights", type=Path, metavar="FILE", help="exercise,weight lines (default weight 1)"
    )
    parser.add_argument(
        "--lms-csv", type=Path, metavar="OUT", help="learner,points,max for an LMS's CSV import"
    )
    parser.add_argument(
        "--key-file",
        default=None,
        help="the key CI signed reports with (-: stdin; default $COURSE_GRADE_KEY)",
    )
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.reports if not p.exists()]
    if missing:
        print(f"course collect: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.expect is not None and not args.expect.is_file():
        print(f"course collect: --expect: no such file: {args.expect}", file=sys.stderr)
        return 2
    key = instructor_key("course collect", args.key_file)
    if key is None:
        return 2
    expected = expected_learners(args.expect) if args.expect else []
    try:
        policy = read_policy(args.extensions, args.weights, args.late_penalty)
    except (OSError, PolicyError) as e:
        print(f"course collect: {e}", file=sys.stderr)
        return 2
    rows = collect(args.reports, key, args.deadline, expected)
    finals = _apply_policy(rows, policy, args.deadline)
    if not rows:
        print("course collect: no grade reports found", file=sys.stderr)
        return 2
    print_rows(rows)
    missing = [r.learner for r in rows if "missing: no report" in r.flags]
    if missing:
        print(
            f"course collect: no report from {len(missing)} learner(s): {', '.join(missing)}", file=sys.stderr
        )
    for out, write in (
        (args.csv, lambda path: write_csv(rows, path)),
        (args.lms_csv, lambda path: write_lms_csv(finals, path)),
    ):
        if out is None:
            continue
        try:
            write(out)
        except OSError as e:
            print(f"course collect: cannot write {out}: {e.strerror or e}", file=sys.stderr)
            return 1
    return 0


def _apply_policy(rows: list[Row], policy: Policy, deadline) -> list[tuple[str, str, str]]:
    """Each learner's own deadline (an extension), lateness against it, and the final score
    (weights, late penalty), as a flag when the policy changes anything; the LMS export's rows."""
    finals = []
    for row in rows:
        if row.report is None:
            finals.append((row.learner, "", ""))
            continue
        own = policy.deadline_for(row.learner, deadline)
        if own is not None and own != deadline:
            row.late = lateness(row.report, own)
            row.flags.append(f"extension to {own.isoformat()}")
        days = days_late(_when(row.commit.get("commit_time")), own) if row.late == "yes" else 0
        try:
            score, most = final_score(row.report, policy, days)
        except PolicyError as e:
            row.flags.append(f"no final score: {e}")
            finals.append((row.learner, "", ""))
            continue
        if (score, most) != (row.report["score"], row.report["max_score"]):
            late = f", {days} day(s) late: -{min(1.0, policy.late_penalty * days):.0%}" if days else ""
            row.flags.append(f"final {score:g}/{most:g}{late}")
        finals.append((row.learner, f"{score:g}", f"{most:g}"))
    return finals


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
