"""``course regrade``: grade a class's handed-in work again, at the commits its reports name.

::

    course regrade REPORTS... --repos CLONES [--out regraded] [--only-flagged] [--timeout S]

After a check is fixed, the reports CI made before the fix are wrong. For each learner
``course collect`` finds in ``REPORTS`` (signed reports, the one graded last), this command
takes every notebook the report graded **as its recorded commit holds it** (``git cat-file
blob COMMIT:PATH`` in ``CLONES/<learner>``, never the working tree, which may hold newer
work), checks that those are the bytes graded then (their sha256), grades them with this
course (``course grade --no-run`` in the gradebook's sandbox), and writes the new report,
signed with the instructor's key, to ``OUT/<learner>/report.json``, and the learner's feedback
beside it (``OUT/<learner>/NN_slug.feedback.md``, as ``course grade --feedback`` writes it: a
regrade never leaves the old verdicts to hand back). It keeps the old report's git record (so
lateness is unchanged) and says what it replaced (``regraded_from``)::

    autograd-ada  3/3 -> 3/3  unchanged
    autograd-bob  0/3 -> 1/3  changed

``--only-flagged`` regrades only the reports ``course collect`` flags as made by another
course version or grader. Exit status: 0 when every learner was regraded, 1 when one could
not be (the line says why), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from course.classroom.collect import Row, collect, instructor_key
from course.classroom.gradebook import grade_sandboxed
from course.grading.feedback import feedback_markdown, feedback_name
from course.grading.files import write_atomically
from course.grading.isolation import no_dump
from course.grading.options import positive_seconds
from course.grading.provenance import committed_bytes
from course.grading.signing import file_sha256, sign
from course.grading.untrusted import clean_text

__all__ = ["main", "regrade"]


def _committed_notebooks(report: dict, repo: Path) -> dict[str, tuple[bytes, dict]]:
    """file name -> (the bytes its recorded commit holds, the old notebook entry).

    Raises:
        RuntimeError: a notebook with no commit, graded from uncommitted changes, a commit
            the clone lacks, or bytes that are not the ones graded.
    """
    found = {}
    for nb in report["notebooks"]:
        if nb.get("note"):
            continue  # a lesson with no notebook: graded again as missing
        git, name = nb.get("git") or {}, Path(nb["path"]).name
        if not git.get("commit") or git.get("modified", True):
            raise RuntimeError(f"{name} was not graded from a commit: nothing to regrade it at")
        data = committed_bytes(repo, git["commit"], git.get("path") or "")
        if data is None:
            raise RuntimeError(
                f"{repo} holds no {git.get('path')} at {git['commit'][:12]} (fetch the learner's history)"
            )
        if nb.get("sha256") and file_sha256(data) != nb["sha256"]:
            raise RuntimeError(f"{name} at {git['commit'][:12]} is not the file that was graded")
        found[name] = (data, nb)
    return found


def regrade(
    row: Row, repos: Path, out: Path, key: bytes, timeout: float, hide: tuple[Path, ...] = ()
) -> tuple[dict, str]:
    """(the new signed report of ``row``'s learner, how it was isolated). The sandbox shows
    learner code none of the clones, ``out``, the home folder or ``hide`` (the class's
    reports): only its allow-list (:mod:`course.grading.sandbox`)."""
    learner, old = row.learner, row.report
    if Path(learner).name != learner or learner in ("", ".", ".."):
        raise RuntimeError(f"{learner!r} cannot name a folder of {repos}")
    notebooks = _committed_notebooks(old, repos / learner)
    lessons = {nb["lesson"] for nb in old["notebooks"] if isinstance(nb.get("lesson"), int)}
    folders = (p.resolve() if p.is_dir() else p.resolve().parent for p in hide)
    hidden = [repos.resolve(), out.resolve(), Path.home(), *folders]
    new, isolation = grade_sandboxed(
        {n: data for n, (data, _) in notebooks.items()}, timeout, lessons or None, hidden
    )
    for nb in new["notebooks"]:
        _, before = notebooks.get(Path(nb["path"]).name, (None, None))
        if before is not None:  # the same file, graded again: where it came from stays
            nb["path"], nb["git"] = before["path"], before["git"]
    new["learner"] = learner
    new["regraded_from"] = {
        "score": old["score"],
        "max_score": old["max_score"],
        "graded_at": old.get("graded_at"),
        "grader_fingerprint": old.get("grader_fingerprint"),
        "course_version": old["course_version"],
    }
    new = sign(new, key)
    (out / learner).mkdir(parents=True, exist_ok=True)
    write_atomically(out / learner / "report.json", json.dumps(new, indent=2) + "\n")
    for nb in new["notebooks"]:  # the feedback to hand back is the regraded one
        if not nb.get("note"):
            write_atomically(
                out / learner / feedback_name(nb["path"]), feedback_markdown(nb, new.get("extra_cases"))
            )
    return new, isolation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course regrade", description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", type=Path, nargs="+", help="signed report files, or folders holding them")
    parser.add_argument(
        "--repos", type=Path, required=True, help="the learners' clones, one folder per learner"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("regraded"), help="where the new reports go (default regraded/)"
    )
    parser.add_argument(
        "--only-flagged", action="store_true", help="only reports made by another version or grader"
    )
    parser.add_argument(
        "--timeout", type=positive_seconds, default=300, help="seconds per notebook (default 300)"
    )
    parser.add_argument(
        "--key-file", default=None, help="the instructor's key (-: stdin; default $COURSE_GRADE_KEY)"
    )
    args = parser.parse_args(argv)
    no_dump()  # the learner code graded below cannot read the instructor's key from /proc
    if not args.repos.is_dir() or not all(p.exists() for p in args.reports):
        print("course regrade: the reports and --repos must exist", file=sys.stderr)
        return 2
    key = instructor_key("course regrade", args.key_file)
    if key is None:
        return 2
    rows = [r for r in collect(args.reports, key) if r.report is not None]
    if args.only_flagged:
        rows = [r for r in rows if any(f.endswith(": regrade") for f in r.flags)]
    if not rows and args.only_flagged:  # nothing to do is not an error
        print("course regrade: no report is flagged for regrade: every one was made by this grader")
        return 0
    if not rows:
        print("course regrade: no signed report to regrade", file=sys.stderr)
        return 2
    code, width = 0, max(len(r.learner) for r in rows)
    for row in rows:
        before = f"{row.report['score']:g}/{row.report['max_score']:g}"
        try:
            new, isolation = regrade(row, args.repos, args.out, key, args.timeout, tuple(args.reports))
        except Exception as e:  # one learner's trouble is that learner's line
            print(f"{row.learner:<{width}}  {before} -> not regraded: {clean_text(e, 300)}")
            code = 1
            continue
        after = f"{new['score']:g}/{new['max_score']:g}"
        same = (
            "unchanged"
            if (new["score"], new["max_score"]) == (row.report["score"], row.report["max_score"])
            else "changed"
        )
        sandbox = "" if isolation == "bubblewrap" else f"  (WARNING: no sandbox: {isolation})"
        print(f"{row.learner:<{width}}  {before} -> {after}  {same}{sandbox}")
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
