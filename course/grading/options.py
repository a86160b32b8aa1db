"""The options of ``course grade``, each checked as argparse reads it, before anything runs.

A limit that would turn itself off is a usage error naming its flag (exit 2)::

    >>> positive_seconds("2.5")
    2.5
    >>> for bad in ("inf", "nan", "0", "-1"):                 # BAD: no limit at all, or none to meet
    ...     try:
    ...         positive_seconds(bad)
    ...     except argparse.ArgumentTypeError as e:
    ...         print(e)
    must be a finite number of seconds above 0, not 'inf'
    must be a finite number of seconds above 0, not 'nan'
    must be a finite number of seconds above 0, not '0'
    must be a finite number of seconds above 0, not '-1'
    >>> fraction("0.8"), sorted(lesson_list("01,00"))
    (0.8, [0, 1])
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from course.grading import signing

__all__ = ["fraction", "grade_parser", "lesson_list", "output_path", "positive_int", "positive_seconds"]


def output_path(value: str) -> Path | str:
    """``--json`` / ``--junit``: the folder is created now, so a bad path fails before grading
    (``-``: standard output, in place of the text report)."""
    if value == "-":
        return value
    path = Path(value)
    if path.exists() and not path.is_file():
        raise argparse.ArgumentTypeError(f"{value} exists and is not a regular file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot create the folder for {value}: {e.strerror or e}") from None
    return path


def _number_in(value: str, ok, wanted: str) -> float:
    """``value`` as a float for which ``ok`` holds (nan never does), else a usage error."""
    try:
        x = float(value)
    except ValueError:
        x = float("nan")
    if not (math.isfinite(x) and ok(x)):
        raise argparse.ArgumentTypeError(f"must be {wanted}, not {value!r}")
    return x


def positive_seconds(value: str) -> float:
    """A timeout: a finite number of seconds above 0 (``inf``, ``nan``, 0 would turn a limit off)."""
    return _number_in(value, lambda x: x > 0, "a finite number of seconds above 0")


def fraction(value: str) -> float:
    return _number_in(value, lambda x: 0 <= x <= 1, "a fraction from 0 to 1, like 0.8")


def positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {value!r}")
    return int(value)


def lesson_list(value: str) -> set[int]:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected lesson numbers like 00,01, not {value!r}")
    return {int(p) for p in parts}


def grade_parser(description: str) -> argparse.ArgumentParser:
    """The options of ``course grade`` (each checked as it is parsed: a bad one is exit 2)."""
    parser = argparse.ArgumentParser(prog="course grade", description=description)
    parser.add_argument("path", type=Path, help="a notebook, or a folder of notebooks")
    parser.add_argument("--json", type=output_path, help="write the report as JSON here (docs/grading.md)")
    parser.add_argument("--junit", type=output_path, help="write a JUnit XML report here")
    parser.add_argument(
        "--classroom",
        type=output_path,
        help="write GitHub Classroom's runner result here (base64 JSON, one test per exercise; -: to stdout)",
    )
    parser.add_argument(
        "--learner",
        default=None,
        help="whose work this is (e.g. the repository's name), recorded in the report",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=300,
        help="seconds for the whole notebook run (default 300)",
    )
    parser.add_argument(
        "--cell-timeout", type=positive_seconds, default=60, help="seconds per cell (default 60)"
    )
    parser.add_argument(
        "--key-file",
        default=None,
        help=f"sign the --json report with the key in this file (-: stdin; default ${signing.KEY_ENV})",
    )
    parser.add_argument(
        "--min-score",
        type=fraction,
        default=None,
        help="pass when score/max reaches this fraction (default: every exercise must pass)",
    )
    parser.add_argument("--lesson", type=int, default=None, help="lesson number, if the file name lacks NN_")
    parser.add_argument(
        "--lessons",
        type=lesson_list,
        default=None,
        help="folders: grade only these lessons, e.g. 00,01 (default: every lesson of the course)",
    )
    parser.add_argument(
        "-j", "--jobs", type=positive_int, default=1, help="notebooks graded at once (folders)"
    )
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="score only: skip running the notebook in a kernel (the score never depends on it)",
    )
    parser.add_argument(
        "--extra-cases",
        type=Path,
        default=None,
        metavar="FILE.py",
        help="the instructor's extra hidden cases (docs/grading.md, 'What a learner can see')",
    )
    parser.add_argument(
        "--feedback",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="write Markdown feedback for the learner: a FILE for a notebook, a DIR for a folder "
        "(one file per notebook); without PATH, beside the --json or --junit report",
    )
    _isolation_options(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return parser


def _isolation_options(parser: argparse.ArgumentParser) -> None:
    """Where learner code runs: bubblewrap by default wherever it runs (docs/grading.md)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--sandbox",
        action="store_true",
        help="require bubblewrap (course.grading.sandbox): exit 2, running nothing, where it cannot run "
        "(default: bubblewrap wherever it runs, else supervision alone, said on stderr)",
    )
    where.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run learner code without bubblewrap, under supervision alone (it runs with your permissions)",
    )
