"""Instructor-held extra cases: hidden cases that learners do not have, added for one grading run.

Every learner's install holds each exercise's visible and hidden cases (docs/grading.md, "What a
learner can see"). An instructor who grades homework keeps a Python file of further cases, out
of the course and out of the learners' reach, and gives it to the grader::

    # extra_cases_2026.py, kept by the instructor (never committed to the course)
    import torch
    from course.checks import case, extra_cases

    extra_cases("3.3", case([torch.zeros(7, dtype=torch.int16)], label="one int16 tensor"))
    extra_cases("5.3", case("b[2:]", "b[:1]"), case("b.t()", "b[0]"))

    $ course grade homework/03_saved_tensors.ipynb --extra-cases extra_cases_2026.py

The grader adds them to the exercises' hidden cases for that run, in the grading process and
in the checking server alike, before any learner code runs; the oracle judges them as it
judges the shipped ones. The report records that extra cases were used (how many, for which
exercises, and the file's sha256), never what they are; a case without a label is named
"instructor's extra case N" in messages, so its arguments are not printed.

Loading the file, step by step::

    extra = load_extra_cases(Path("extra_cases_2026.py"))   # runs the file; checks every call
    extra.count, extra.by_exercise                          # 3, {"3.3": 1, "5.3": 2}
    with applied(extra):                                     # the registry holds the extra cases
        ...                                                  # grade
    # OK: outside the block every exercise is what its lesson registered

What the file gets wrong is an :class:`ExtraCasesError` that says how to put it right::

    extra_cases("3.9", case(1))       # BAD: no exercise '3.9' (the message lists lesson 3's)
    extra_cases("3.1", case(1))       # BAD: 3.1 is a prediction, it has no cases
    extra_cases("3.3", [torch.ones(2)])  # BAD: give each case as case(...)
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from course.checks.registry import Case, all_exercises, get, substitute

__all__ = ["ExtraCases", "ExtraCasesError", "add_to_registry", "applied", "extra_cases", "load_extra_cases"]


class ExtraCasesError(ValueError):
    """An extra-cases file that cannot be used; the message says what to change."""


@dataclass
class ExtraCases:
    """The extra cases one instructor's file defines: by exercise id, in the file's order."""

    path: str
    sha256: str
    cases: dict[str, tuple[Case, ...]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(c) for c in self.cases.values())

    @property
    def by_exercise(self) -> dict[str, int]:
        return {i: len(c) for i, c in self.cases.items()}

    def record(self) -> dict:
        """What a report says of them: how many, where, and the file's hash (not the cases).

        Example:
            >>> ExtraCases("x.py", "ab12", {"3.3": (Case(),)}).record()
            {'count': 1, 'exercises': {'3.3': 1}, 'sha256': 'ab12'}
        """
        return {"count": self.count, "exercises": self.by_exercise, "sha256": self.sha256}


#: The file :func:`load_extra_cases` is running, if any: where :func:`extra_cases` adds.
_loading: contextvars.ContextVar[ExtraCases | None] = contextvars.ContextVar("extra_cases_file", default=None)


def _exercise_for(exercise_id: object):
    where = f"extra_cases({exercise_id!r}, ...)"
    try:
        ex = get(str(exercise_id))
    except KeyError:
        lesson = str(exercise_id).split(".")[0]
        known = [e.id for e in all_exercises(int(lesson))] if lesson.isdigit() else []
        listed = (
            f"lesson {lesson} has {', '.join(known)}"
            if known
            else "ids look like '3.3' (lesson 3, exercise 3)"
        )
        raise ExtraCasesError(f"{where}: the course has no exercise {exercise_id!r}; {listed}") from None
    if ex.kind == "predict":
        raise ExtraCasesError(
            f"{where}: {ex.id} ({ex.name}) is a prediction: it has one answer and no cases. "
            "Give extra cases to function exercises only."
        )
    return ex


def extra_cases(exercise_id: str, *cases: Case) -> None:
    """Add ``cases`` (each made with :func:`case`) to the hidden cases of exercise ``exercise_id``
    for the grading run that loads this file (``course grade --extra-cases FILE``).

    Called from an instructor's extra-cases file only; anywhere else it raises.

    Raises:
        ExtraCasesError: not inside such a file, an unknown exercise, a prediction, no case,
            or an argument that is not a :class:`Case`.
    """
    extra = _loading.get()
    if extra is None:
        raise ExtraCasesError(
            "extra_cases() belongs in an instructor's extra-cases file, which "
            "`course grade --extra-cases FILE` loads; it does nothing in a notebook"
        )
    ex = _exercise_for(exercise_id)
    if not cases:
        raise ExtraCasesError(f"extra_cases({ex.id!r}): give at least one case(...) after the id")
    for c in cases:
        if not isinstance(c, Case):
            raise ExtraCasesError(
                f"extra_cases({ex.id!r}, ...): {type(c).__name__} is not a case; give each one as "
                f"case(arguments..., label='...'), with case from course.checks"
            )
    have = extra.cases.get(ex.id, ())
    named = tuple(
        c if c.label else dataclasses.replace(c, label=f"instructor's extra case {len(have) + k}")
        for k, c in enumerate(cases, 1)
    )
    extra.cases[ex.id] = have + named


def load_extra_cases(path: Path, sha256: str | None = None) -> ExtraCases:
    """Run the instructor's file ``path`` and gather the cases its :func:`extra_cases` calls add.

    Args:
        path: the file (Python), trusted as the instructor's own code.
        sha256: when given, the file must still have this hash (the checking server loads the
            file the grading process loaded, not another one put in its place).

    Raises:
        ExtraCasesError: the file cannot be read, raises, defines no extra case, or has changed.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ExtraCasesError(f"cannot read {path}: {e.strerror or e}") from None
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise ExtraCasesError(
            f"{path} changed while grading started (sha256 {digest[:12]}, not {sha256[:12]})"
        )
    extra = ExtraCases(str(path), digest)
    token = _loading.set(extra)
    try:
        code = compile(data, str(path), "exec")
        exec(code, {"__name__": "__extra_cases__", "__file__": str(path)})
    except ExtraCasesError as e:
        raise ExtraCasesError(f"{path}: {e}") from None
    except Exception as e:
        raise ExtraCasesError(f"{path} raised {type(e).__name__}: {e}") from None
    finally:
        _loading.reset(token)
    if not extra.cases:
        raise ExtraCasesError(
            f'{path} defines no extra cases: call extra_cases("N.M", case(...)) in it '
            "(from course.checks import case, extra_cases)"
        )
    return extra


def add_to_registry(extra: ExtraCases) -> list:
    """Give each exercise of ``extra`` its extra cases after its hidden ones, in the registry;
    returns the exercises as they were (what :func:`applied` puts back)."""
    replaced = []
    for exercise_id, cases in extra.cases.items():
        ex = get(exercise_id)
        replaced.append(substitute(dataclasses.replace(ex, hidden=ex.hidden + cases)))
    return replaced


@contextlib.contextmanager
def applied(extra: ExtraCases | None) -> Iterator[None]:
    """Within the block, each exercise of ``extra`` has the extra cases after its hidden ones
    (``None``: nothing changes); afterwards the registry holds what the lessons registered."""
    replaced = add_to_registry(extra) if extra else []
    try:
        yield
    finally:
        for old in reversed(replaced):
            substitute(old)
