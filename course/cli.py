"""The `course` command. Each subcommand lives in its own module with a `main(argv)`."""

from __future__ import annotations

import importlib
import os
import sys

# subcommand -> (module, one-line help). Modules are imported only when used, so
# `course --version` stays fast and a broken lesson module cannot break `course doctor`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    # for learners
    "lab": ("course.lab", "open your copy of the course in JupyterLab (start or update it first)"),
    "start": ("course.learner.workspace_command", "copy the learner notebooks into a folder you own"),
    "update": (
        "course.learner.workspace_command",
        "bring new lessons into your folder without overwriting your work",
    ),
    "progress": ("course.learner.progress", "a table of your exercises and their status"),
    "doctor": ("course.doctor", "check torch, the widgets extension, your course folder and a kernel"),
    # for instructors
    "grade": ("course.grading.grade", "grade a learner notebook (or a folder of them)"),
    "gradebook": ("course.classroom.gradebook", "grade a class: scores, pass rates and misconceptions met"),
    "room": ("course.classroom.room_view", "a live learner x exercise grid: who is stuck on what"),
    "collect": ("course.classroom.collect", "a class's signed CI reports in one table, late work marked"),
    "regrade": ("course.classroom.regrade", "grade signed reports again at their commits, after a check fix"),
    "slides": ("course.slides", "a lesson's key cells as reveal.js slides, for the instructor"),
    "hub-start": ("course.hub", "JupyterHub start hook: start or update ~/autograd-course, never failing"),
    # for authors
    "assign": ("course.house.assign", "generate notebooks/ (learner copies) from solutions/"),
}
#: The headings of `course --help`: who each group of commands is for (docs/commands.md alike).
AUDIENCES = (("for learners", "lab"), ("for instructors", "grade"), ("for authors", "assign"))


def usage() -> str:
    """What ``course --help`` prints: the commands under who they are for, learners first."""
    lines = ["usage: course [--version] <command> [args]"]
    starts = dict((first, heading) for heading, first in AUDIENCES)
    for name, (_, help_) in SUBCOMMANDS.items():
        if name in starts:
            lines += ["", f"{starts[name]}:"]
        lines.append(f"  {name:<10} {help_}")
    lines += ["", "`course <command> --help` for a command's options; docs/commands.md for all of them."]
    return "\n".join(lines)


def version() -> str:
    """``course <version> (<the lesson set>)``: which course a learner has, in one line.

    The lesson set is the one this version teaches (``course.lessons``); a folder made by an
    older version gets the newer lessons with ``course update``.
    """
    import course
    from course import lessons

    return f"course {course.__version__} ({lessons.lesson_set()})"


#: Commands that load torch: run from the command line, they leave as soon as they are done.
#: Torch's teardown at interpreter exit takes about half a second, after everything the
#: command writes is written, flushed and closed.
QUICK_EXIT = {"grade", "gradebook", "progress", "regrade", "room"}


def main(argv: list[str] | None = None) -> int:
    from_command_line = argv is None  # in-process callers (tests, notebooks) get a return value
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(usage())
        return 0
    if argv[0] in {"--version", "-V"}:
        print(version())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"course: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    if name in {"start", "update"}:
        rest = [name, *rest]  # the workspace module takes the verb as its first argument
    try:
        code = int(module.main(rest) or 0)
    except BrokenPipeError:  # `course progress | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet too
        return 1
    if from_command_line and name in QUICK_EXIT:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader that left, a closed stream: nothing to lose
                pass
        os._exit(code)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
