"""Exercises and the registry: one place holds everything about an exercise.

A lesson's check package (``course/checks/lessonNN/``) registers each exercise once, with
its reference solution, its visible and hidden cases, the oracle that says what is right
(torch, or course's reference implementation) and the known wrong answers with the hint each
one deserves. The notebook's instant check, the grader and the generic test
(``tests/test_checks.py``) all read the same registration.

Two kinds of exercise:

- ``exercise(...)``: the learner defines a function (or class, or any callable) named
  ``name``; it runs on every case and its result is compared with the oracle's.
- ``predict(...)``: predict-then-run. The learner writes down a value named ``name`` (what
  will ``x.grad`` hold? which error is raised?); ``truth()`` runs the program with torch and
  its result (or the class of the exception it raises) is the right answer.

Either kind may be cost-graded: ``cost(answer, *args)`` measures a dict of figures (saved
bytes, pack calls, ...) and ``budget`` caps them; the check reports cost beside correctness.

Example:
    >>> ex = Exercise(id="9.1", name="double", title="Double it", solution=lambda x: 2 * x,
    ...               cases=[case(3)], wrong=[wrong(lambda x: x + x + 1, "off by one")])
    >>> ex.kind, ex.lesson, ex.describe(ex.cases[0])
    ('function', 9, 'double(3)')
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course.checks.leftovers import KINDS

__all__ = [
    "Case",
    "Exercise",
    "Wrong",
    "all_exercises",
    "by_name",
    "case",
    "exercise",
    "get",
    "lesson_modules",
    "load_all",
    "predict",
    "substitute",
    "wrong",
]

_ID = re.compile(r"^(\d+)\.(\d+)$")
_LESSON_MODULE = re.compile(r"^lesson(\d\d)$")

_REGISTRY: dict[str, Exercise] = {}


@dataclass(frozen=True)
class Case:
    """One input of a function exercise. Arguments are deep-copied before every call, so an
    answer that mutates its input (or accumulates into a leaf's ``.grad``) cannot leak into
    the next call."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    label: str | None = None

    def materialize(self) -> tuple[tuple, dict]:
        """Fresh copies of the arguments."""
        return copy.deepcopy(self.args), copy.deepcopy(self.kwargs)


def case(*args: Any, label: str | None = None, **kwargs: Any) -> Case:
    """A case calling the answer with ``*args, **kwargs``; ``label`` names it in messages."""
    return Case(tuple(args), dict(kwargs), label)


@dataclass(frozen=True)
class Wrong:
    """A known wrong answer (a callable for a function exercise, a value for a prediction)
    and the hint shown to a learner whose answer behaves exactly like it."""

    answer: Any
    hint: str


def wrong(answer: Any, hint: str) -> Wrong:
    """A known wrong answer and the hint for the misconception it stands for."""
    return Wrong(answer, hint)


@dataclass(frozen=True)
class Exercise:
    """Everything about one exercise. Build it with :func:`exercise` or :func:`predict`.

    Attributes:
        id: ``"N.M"``: lesson N, exercise M. The stub raises ``NotImplementedError("exercise N.M")``.
        name: the name the learner defines; the grader finds the answer by this name.
        title: one line shown in reports.
        solution: the reference answer (a callable, or the value of a prediction). The
            generic test checks that it passes; the solution notebook writes the same code.
        oracle: what is right. For a function exercise a callable with the answer's
            signature (default: ``solution``); for a prediction, ``truth()`` with no arguments.
        cases, hidden: visible and hidden cases (hidden ones are not shown in the notebook).
        wrong: known wrong answers with their hints (at least one): the exercise's catalogue
            of misconceptions, each of which must fail with its own hint.
        right: right answers written differently from ``solution`` (another algorithm,
            another spelling of a prediction); each must pass.
        hint: the hint for a wrong answer that matches none of ``wrong``: conceptual, never
            the reference solution's code.
        parse: for a prediction, ``parse(answer)`` reads the learner's value into the form
            ``truth()`` returns (e.g. a descriptor written as a string or as an object, a letter
            in either case); what it raises is shown as "cannot read your answer: ...".
        options: for a prediction, the values each of its items may take (``("free",
            "slower")``); default: ``(True, False)`` when every item of the truth is a bool,
            else any value. An item outside them is "not one of ..." (never judged as a
            value), and a prediction whose items take one of two values says how many are
            wrong, never which (naming them would give the answer away).
        points: what the exercise is worth.
        run: ``run(answer, *args, **kwargs)`` turns a call into the observable that is
            compared (default: ``answer(*args, **kwargs)``); use it to observe e.g. grads.
        cost, budget: ``cost(answer, *args, **kwargs) -> {figure: number}`` and the caps.
        rtol, atol: tolerances for floating-point comparison.
        timeout: seconds one case may take, in the grader and in the notebook's check (an
            answer that runs past it is "too slow").
        may_leave: what the spec lets the answer change on the tensors, modules, graphs and
            closures it is handed (any of ``course.checks.leftovers.KINDS``: ``"requires_grad"``,
            ``"grad"``, ``"version"``, ``"hooks"``, ``"training"``, ``"attributes"``,
            ``"graph"``); any other change, and any process-wide state left behind (grad mode, saved-tensor
            hooks, modes), fails the case (see ``course.checks.leftovers``).
        repeatable: the answer is called a second time on the first case and must give the
            same outcome (it keeps no state between calls); False where the spec says otherwise.
        cost_hint: the hint for a correct answer over budget (default: ``hint``).
        partial: partial credit: a failing answer scores ``points`` x cases passed / cases
            (visible and hidden) instead of 0. Only for a function exercise whose cases are
            independent of each other and that has no budget; a prediction has one answer,
            right or wrong. Default: all or nothing.
        memo: what the check computed once for this exercise in this process (the oracle's
            outcomes, each known wrong answer's outcome on each case); filled by
            ``course.checks``, never by an author.
    """

    id: str
    name: str
    title: str
    solution: Any
    kind: str = "function"
    oracle: Callable | None = None
    cases: tuple[Case, ...] = ()
    hidden: tuple[Case, ...] = ()
    wrong: tuple[Wrong, ...] = ()
    right: tuple[Any, ...] = ()
    hint: str = ""
    parse: Callable | None = None
    options: tuple = ()
    points: int = 1
    run: Callable | None = None
    cost: Callable | None = None
    budget: dict = field(default_factory=dict)
    rtol: float = 1e-5
    atol: float = 1e-6
    timeout: float = 10.0
    may_leave: frozenset = frozenset()
    repeatable: bool = True
    cost_hint: str = ""
    partial: bool = False
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for attr in ("cases", "hidden", "wrong", "right", "options"):
            object.__setattr__(self, attr, tuple(getattr(self, attr)))
        object.__setattr__(self, "may_leave", frozenset(self.may_leave))
        _validate(self)

    @property
    def lesson(self) -> int:
        return int(_ID.match(self.id).group(1))

    @property
    def all_cases(self) -> tuple[Case, ...]:
        """Visible cases, then hidden ones (a prediction has one implicit case)."""
        return self.cases + self.hidden if self.kind == "function" else (Case(label="prediction"),)

    def is_hidden(self, index: int) -> bool:
        return self.kind == "function" and index >= len(self.cases)

    def describe(self, c: Case) -> str:
        """How a case is named in messages: its label, else the call with its arguments."""
        if c.label:
            return c.label
        parts = [repr(a) for a in c.args] + [f"{k}={v!r}" for k, v in c.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


def _validate(ex: Exercise) -> None:
    where = f"exercise {ex.id!r}"
    if not _ID.match(ex.id):
        raise ValueError(f"{where}: id must look like 'N.M' (lesson N, exercise M)")
    if not ex.name.isidentifier():
        raise ValueError(f"{where}: name {ex.name!r} is not a Python identifier")
    if ex.kind not in ("function", "predict"):
        raise ValueError(f"{where}: kind must be 'function' or 'predict'")
    if ex.kind == "function":
        if ex.run is None and not callable(ex.solution):
            raise TypeError(f"{where}: the solution must be callable (or give run= to apply it)")
        if not ex.cases:
            raise ValueError(f"{where}: give at least one visible case")
    elif not callable(ex.oracle):
        raise TypeError(f"{where}: a prediction needs truth=, a function that runs torch")
    if not ex.wrong:
        raise ValueError(f"{where}: give at least one known wrong answer with its hint")
    unknown = sorted(set(ex.may_leave) - set(KINDS))
    if unknown:
        raise ValueError(f"{where}: may_leave knows {', '.join(KINDS)}, not {unknown}")
    if ex.options and ex.kind != "predict":
        raise ValueError(f"{where}: options= is for a prediction's items")
    if not ex.timeout or ex.timeout <= 0:
        raise ValueError(f"{where}: timeout must be a positive number of seconds")
    if ex.budget and ex.cost is None:
        raise ValueError(f"{where}: a budget needs a cost function")
    if ex.partial and ex.kind == "predict":
        raise ValueError(f"{where}: a prediction is right or wrong as a whole; remove partial=True")
    if ex.partial and ex.budget:
        raise ValueError(f"{where}: partial credit counts cases, a budget judges cost too; keep one of them")


def _register(ex: Exercise) -> Exercise:
    old = _REGISTRY.get(ex.id)
    if old is not None and old.name != ex.name:
        raise ValueError(f"exercise {ex.id!r} registered twice ({old.name!r} and {ex.name!r})")
    _REGISTRY[ex.id] = ex
    return ex


def substitute(ex: Exercise) -> Exercise:
    """Put ``ex`` in the place of the registered exercise with its id; return the one it replaces
    (how an instructor's extra cases join an exercise for one grading run, then leave it).

    Raises:
        KeyError: no exercise with that id is registered.
    """
    old = get(ex.id)
    if old.name != ex.name or old.kind != ex.kind:
        raise ValueError(f"exercise {ex.id!r}: a substitute keeps the name and kind of {old.name!r}")
    _REGISTRY[ex.id] = ex
    return old


def exercise(id: str, name: str, title: str, solution: Callable, **fields: Any) -> Exercise:
    """Register a function exercise. Keyword fields are :class:`Exercise`'s attributes.

    Returns:
        The registered :class:`Exercise`.
    """
    return _register(Exercise(id=id, name=name, title=title, solution=solution, **fields))


def predict(
    id: str, name: str, title: str, truth: Callable[[], Any], solution: Any, **fields: Any
) -> Exercise:
    """Register a predict-then-run exercise: ``truth()`` runs torch; ``solution`` is the
    value the solution notebook writes down (the generic test checks that they agree)."""
    ex = Exercise(id=id, name=name, title=title, solution=solution, kind="predict", oracle=truth, **fields)
    return _register(ex)


def lesson_modules() -> list[str]:
    """Names of every ``course.checks.lessonNN`` module, in lesson order."""
    here = [str(Path(__file__).resolve().parent)]  # the course.checks package folder
    names = [m.name for m in pkgutil.iter_modules(here) if _LESSON_MODULE.match(m.name)]
    return [f"course.checks.{n}" for n in sorted(names)]


def load_all() -> None:
    """Import every lesson's check module (each registers its exercises)."""
    for module in lesson_modules():
        importlib.import_module(module)


def _load_lesson(n: int) -> None:
    try:
        importlib.import_module(f"course.checks.lesson{n:02d}")
    except ModuleNotFoundError as e:
        if e.name != f"course.checks.lesson{n:02d}":
            raise


def get(exercise_id: str) -> Exercise:
    """The registered exercise ``"N.M"`` (importing lesson N's check module if needed).

    Raises:
        KeyError: no such exercise.
    """
    m = _ID.match(str(exercise_id))
    if m and exercise_id not in _REGISTRY:
        _load_lesson(int(m.group(1)))
    if exercise_id not in _REGISTRY:
        raise KeyError(f"no exercise {exercise_id!r} is registered in course.checks")
    return _REGISTRY[exercise_id]


def all_exercises(lesson: int | None = None) -> list[Exercise]:
    """Every registered exercise (after :func:`load_all`), optionally one lesson's, by id."""
    load_all() if lesson is None else _load_lesson(lesson)
    found = [e for e in _REGISTRY.values() if lesson is None or e.lesson == lesson]
    return sorted(found, key=lambda e: tuple(int(p) for p in e.id.split(".")))


def by_name(lesson: int, name: str) -> Exercise | None:
    """The exercise of ``lesson`` whose answer is called ``name``, if any."""
    return next((e for e in all_exercises(lesson) if e.name == name), None)
