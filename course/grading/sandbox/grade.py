"""``course grade`` in bubblewrap (its default): the grader outside, learner code inside :func:`run_untrusted`.

::

    course grade learner/autograd-course --sandbox --key-file - --learner autograd-ada \\
        --json reports/report.json --junit reports/junit.xml     # --sandbox: bubblewrap or exit 2

This process reads the key and the notebooks' git records, copies the notebooks to a private
folder, and runs ``course grade`` on the copy in the sandbox (bubblewrap: nothing of the host
but the allow-list, an unprivileged uid, limits), which signs its report with a one-time key
sent on its stdin. Back here, the report is checked (that key, the notebooks' hashes), its
paths become the learner's, the git records, the learner and the time this command began are
added, and it is signed with the instructor's key and written: the report folder is never
in reach of learner code (docs/ci-grading-example.yml uploads only what is written here).
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path

from course.grading.isolation import python_command
from course.grading.sandbox.run import run_untrusted
from course.grading.signing import file_sha256, parse, problems, verify
from course.grading.untrusted import Untrusted, clean_text, read_regular

__all__ = ["grade_in_sandbox"]


def _inner_args(args, folder: str, target: str, extra: bool) -> list[str]:
    cmd = ["course", "grade", f"{folder}/{target}" if target else folder, "--json", "-", "--key-file", "-"]
    cmd += ["-q", "--timeout", f"{args.timeout:g}", "--cell-timeout", f"{args.cell_timeout:g}"]
    cmd += ["-j", str(args.jobs)]
    if args.no_run:
        cmd.append("--no-run")
    if args.lesson is not None:
        cmd += ["--lesson", str(args.lesson)]
    if args.lessons is not None:
        cmd += ["--lessons", ",".join(f"{n:02d}" for n in sorted(args.lessons))]
    if extra:  # read, then removed, before any learner code runs
        cmd += ["--extra-cases", f"{folder}/../secret.py"]
    return python_command(*cmd)


def grade_in_sandbox(args, plan: list, folder: bool) -> tuple[dict, str]:
    """(the inner grader's report, checked, its paths the learner's; the isolation used).

    Raises:
        RuntimeError: the sandboxed grader did not finish or its report does not check.
    """
    with tempfile.TemporaryDirectory(prefix="course-grade-sandbox-") as tmp:
        inputs = Path(tmp) / "in"
        inputs.mkdir()
        where: dict[str, str] = {}  # name in the copy -> the learner's path
        for path, _, _ in plan:
            try:
                (inputs / path.name).write_bytes(read_regular(path))
            except (OSError, Untrusted):
                continue  # the inner grader reports the lesson; the plan already says why
            where[path.name] = str(path)
        once = secrets.token_hex(32)
        target = "" if folder else plan[0][0].name
        limit = max(1, len(plan)) * (2 * args.timeout + 90) + 180  # bounded, as the gradebook's
        run = run_untrusted(
            lambda f: _inner_args(args, f, target, args.extra_cases is not None),
            inputs,
            stdin=once.encode(),
            timeout=limit,
            secret=args.extra_cases.read_bytes() if args.extra_cases is not None else None,
            bubblewrap=True,  # not asked first: course.grading.grade asks why only if this fails
        )
        copies = {name: (inputs / name).read_bytes() for name in where}
    said = f": {clean_text(run.said, 300)}" if run.said else ""
    if run.timed_out:
        raise RuntimeError(f"grading did not finish in time ({limit:g} s)")
    try:
        report = parse(run.stdout)
    except ValueError:
        raise RuntimeError(f"grading did not finish (exit {run.returncode}){said}") from None
    if problems(report) or not verify(report, once.encode()):
        raise RuntimeError(f"grading did not finish (exit {run.returncode}{said}): no report signed by it")
    for nb in report["notebooks"]:
        name = Path(nb["path"]).name
        if name in where and nb.get("sha256") == file_sha256(copies[name]):
            nb["path"] = clean_text(where[name], 500)
        elif not nb.get("note"):
            raise RuntimeError(f"grading did not finish: {clean_text(name, 80)} is not a notebook given")
        else:  # a lesson missing from the folder: named in the learner's folder
            nb["path"] = clean_text(Path(args.path) / name, 500)
    report.pop("signature", None)
    report.pop("purpose", None)
    return report, run.isolation
