"""The feedback file an instructor hands back: per exercise, the verdict and what to work on.

::

    course grade homework/03_saved_tensors.ipynb --feedback ada-03.md
    course grade homework/ --feedback feedback/      # one NN_slug.feedback.md per notebook
    course grade homework/ --json out/report.json --feedback   # beside the report

``feedback_markdown(notebook)`` turns one notebook's entry of the ``--json`` report into
Markdown: the score, a table of every exercise (verdict, points, cases passed, partial credit)
and, for each exercise that did not pass, either the misconception its answer met (the known
wrong answer it behaves like) with that hint, or, for a wrong answer the catalogue does not
know, the first case it gets wrong as the notebook shows it (yours against expected) and the
exercise's hint.

What it never holds (a learner may pass the file on)::

    expected: 12                 # OK: what the oracle returns on a case, as check() prints it
    answer:   (1, 2, 3)          # BAD: a prediction's truth, even when the learner revealed it
    return sum(sizes.values())   # BAD: a line of the reference solution (no field carries it)
"""

from __future__ import annotations

import re
from pathlib import Path

from course.grading.untrusted import clean_text

__all__ = ["FIELDS_SHOWN", "feedback_markdown", "feedback_name", "feedback_target", "fields", "markdown_text"]

#: The fields of a verdict (as ``check`` prints them) a feedback file shows for a failed case;
#: ``answer`` (a prediction's truth) and ``hint`` (shown on its own) are never among them.
FIELDS_SHOWN = ("case", "left", "why", "yours", "expected", "wrong", "cost", "notes")

_FIELD = re.compile(r"^  ([a-z]+):\s{1,}(.*)$")
_CONTINUED = " " * len("  expected: ")


def fields(message: str) -> list[tuple[str, str]]:
    """(field, text) of each field of a verdict message, after its first line; a field's
    continuation lines (indented to the field's column) belong to it.

    Example:
        >>> fields("[9.1 double] failed: 0/1 cases\\n  case:     double(3)\\n  yours:    4\\n"
        ...        "  hint:     add, don't\\n            multiply?")
        [('case', 'double(3)'), ('yours', '4'), ('hint', "add, don't\\nmultiply?")]
    """
    found: list[list[str]] = []
    for line in message.splitlines()[1:]:
        m = _FIELD.match(line)
        if m:
            found.append([m.group(1), m.group(2)])
        elif found and line.startswith(_CONTINUED):
            found[-1][1] += "\n" + line[len(_CONTINUED) :]
    return [(name, text) for name, text in found]


def feedback_name(notebook_path: str) -> str:
    """The feedback file's name for a notebook.

    Example:
        >>> feedback_name("homework/03_saved_tensors.ipynb")
        '03_saved_tensors.feedback.md'
    """
    return Path(notebook_path).stem + ".feedback.md"


def feedback_target(value: str, folder: bool, beside: list) -> Path:
    """Where ``--feedback`` writes: the file (a notebook) or the folder (a folder of them),
    created now so that a bad path fails before grading. ``value`` "" (the flag alone): the
    folder of the first report file in ``beside`` (``--json``, ``--junit``).

    Raises:
        ValueError: the path cannot be used; the message names the fix.
    """
    if value == "":
        files = [Path(b) for b in beside if b not in (None, "-")]
        if not files:
            raise ValueError(
                "--feedback without a PATH writes beside the --json or --junit file: give one, or a PATH"
            )
        return files[0].parent
    target = Path(value)
    if folder and target.exists() and not target.is_dir():
        raise ValueError(f"--feedback {value}: a folder is graded, so give a folder (one file per notebook)")
    if not folder and target.is_dir():
        raise ValueError(f"--feedback {value} is a folder; give a file name (a notebook is graded)")
    try:
        (target if folder else target.parent).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--feedback: cannot create the folder for {value}: {e.strerror or e}") from None
    return target


def markdown_text(value: object, limit: int = 600) -> str:
    """``value`` (a file name, an error: perhaps the learner's) as plain text on one line of
    Markdown: no control character, no HTML, no Markdown syntax (each is escaped).

        >>> print(markdown_text("00_<img src=x onerror=alert(1)>*[me](javascript:x).ipynb"))
        00\\_&lt;img src=x onerror=alert\\(1\\)&gt;\\*\\[me\\]\\(javascript:x\\).ipynb
    """
    text = " ".join(clean_text(value, limit).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_{}\[\]()#+!|~-])", r"\\\1", text)


def _fenced(text: str) -> str:
    """``text`` (perhaps the learner's) in a code block no backtick run of it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _misconceptions(exercise_id: str) -> set[str]:
    """The hints of the known wrong answers of ``exercise_id`` (empty if it is unknown)."""
    from course import checks

    try:
        return {w.hint for w in checks.get(exercise_id).wrong}
    except KeyError:
        return set()


def _cases(e: dict) -> str:
    text = f"{e['cases_passed']}/{e['cases_total']}"
    return text + (" (partial credit)" if e.get("partial") else "")


def _section(e: dict) -> list[str]:
    """What one exercise that did not pass says: the misconception met, else the first failing case."""
    lines = [
        f"### {e['id']} {e['name']}: {e['title']}",
        "",
        f"**{e['status']}**: {e['score']:g} of {e['points']:g} points; {e['cases_passed']} of "
        f"{e['cases_total']} cases passed" + ("; partial credit." if e.get("partial") else "."),
        "",
    ]
    if e["status"] == "not attempted":
        return lines + [f"Define `{e['name']}` in the notebook and run its check.", ""]
    if e["status"] == "revealed":
        return lines + ["You asked to see the answer of this prediction, so it earns no points.", ""]
    hint = e.get("hint", "")
    if hint and hint in _misconceptions(e["id"]):
        return lines + ["**Misconception met:** " + clean_text(hint, 1000), ""]
    shown = [(k, v) for k, v in fields(e["message"]) if k in FIELDS_SHOWN]
    if shown:
        width = max(len(k) for k, _ in shown) + 2
        block = "\n".join(f"{k + ':':<{width}}" + v.replace("\n", "\n" + " " * width) for k, v in shown)
        lines += ["Your answer matches none of the known misconceptions. Where it goes wrong:", ""]
        lines += [_fenced(clean_text(block, 4000)), ""]
    elif e["status"] == "error":
        lines += [_fenced(clean_text(e["message"].splitlines()[0] if e["message"] else "error", 600)), ""]
    if hint:
        lines += ["**Hint:** " + clean_text(hint, 1000), ""]
    return lines


def feedback_markdown(notebook: dict, extra_cases: dict | None = None) -> str:
    """The Markdown feedback on one notebook (an entry of the report's ``notebooks``).

    ``extra_cases``: the report's record of the instructor's extra cases, if any were used
    (the feedback says so, with their count only)."""
    name = Path(notebook["path"]).name
    exercises = notebook["exercises"]
    score, most = sum(e["score"] for e in exercises), sum(e["points"] for e in exercises)
    lines = [f"# Feedback on {markdown_text(name, 300)}", ""]
    lines.append(
        f"Score: **{score:g} / {most:g}** points"
        + (f" (lesson {notebook['lesson']})." if notebook.get("lesson") is not None else ".")
    )
    if extra_cases:
        lines.append(
            f"Graded on the course's cases and {extra_cases['count']} extra hidden case(s) your instructor holds."
        )
    if notebook.get("error"):
        lines += [
            "",
            "The grader could not grade all of this notebook: " + markdown_text(notebook["error"], 600),
        ]
    lines += ["", "| exercise | verdict | points | cases passed |", "|---|---|---|---|"]
    for e in exercises:
        lines.append(
            f"| {e['id']} {e['name']} | {e['status']} | {e['score']:g}/{e['points']:g} | {_cases(e)} |"
        )
    lines.append("")
    todo = [e for e in exercises if e["status"] != "passed"]
    if todo:
        lines += ["## What to work on", ""]
        for e in todo:
            lines += _section(e)
    else:
        lines += ["Every exercise passed.", ""]
    return "\n".join(lines).rstrip() + "\n"
