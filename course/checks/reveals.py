"""Reveals: a prediction whose answer the learner asked to see earns no points.

``check("7.1", reveal=True)`` shows a prediction's answer in the notebook. ``course grade``
must then report that exercise as revealed, however the call was spelled, so it learns of a
reveal two ways:

- :func:`reveals_in` reads the notebook's code for ``check("N.M", reveal=True)`` calls;
- :func:`course.checks.check` writes each id it reveals to the file named by the environment
  variable :data:`REVEAL_RECORD` (:func:`record_reveal`), which the grader reads back with
  :func:`reveals_recorded` (this catches ``reveal=show`` or ``**{"reveal": True}`` too).

Example:
    >>> sorted(reveals_in('check("7.1", reveal=True); check("7.2", reveal=False)'))
    ['7.1']
"""

from __future__ import annotations

import ast
import contextlib
import os

__all__ = ["REVEAL_RECORD", "record_reveal", "reveals_in", "reveals_recorded"]


def reveals_in(source: str) -> set[str]:
    """The ids of the exercises whose answer ``source`` (a notebook's code) asks to see with
    ``check("N.M", reveal=True)``: what the grader reports as revealed.

    Example:
        >>> sorted(reveals_in('check("7.1", reveal=True); check("7.2"); check("1.3", None, True)'))
        ['1.3', '7.1']
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "check"
        ):
            continue
        flag = next(
            (k.value for k in node.keywords if k.arg == "reveal"),
            node.args[2] if len(node.args) > 2 else None,
        )
        if (
            node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(flag, ast.Constant)
            and flag.value is True
        ):
            found.add(str(node.args[0].value))
    return found


#: The environment variable that names the file where :func:`check` writes down each
#: prediction it revealed, one id a line: how ``course grade`` learns of a reveal from what
#: ran in its kernel, whatever the call's spelling (``reveal=show``, ``**{"reveal": True}``).
REVEAL_RECORD = "COURSE_REVEAL_RECORD"


def record_reveal(exercise_id: str) -> None:
    """Append ``exercise_id`` to the file :data:`REVEAL_RECORD` names (nothing when unset)."""
    path = os.environ.get(REVEAL_RECORD)
    if path:
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
            f.write(exercise_id + "\n")


def reveals_recorded(path: str | os.PathLike) -> set[str]:
    """The ids :func:`check` wrote down as revealed in the file ``path`` (see :data:`REVEAL_RECORD`);
    an empty set when there is none.

    Example:
        >>> import io, tempfile
        >>> from course.checks import check
        >>> with tempfile.TemporaryDirectory() as d:
        ...     os.environ[REVEAL_RECORD] = f"{d}/reveals"
        ...     with contextlib.redirect_stdout(io.StringIO()):
        ...         check("0.2", 8.0, reveal=True)
        ...     found = reveals_recorded(f"{d}/reveals")
        >>> del os.environ[REVEAL_RECORD]
        >>> found
        {'0.2'}
    """
    try:
        with open(path, encoding="utf-8") as f:
            return {line.strip() for line in f if line.strip()}
    except OSError:
        return set()
