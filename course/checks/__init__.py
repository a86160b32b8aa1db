"""Instant checks for the lessons' exercises, and the machinery the grader shares with them.

In a notebook, an exercise is three cells: the spec, the stub the learner fills in, and::

    from course.checks import check
    check("0.1")            # finds the answer by the exercise's name in your notebook
    check("0.1", leaf_grad) # or pass it explicitly

``check`` never raises (so "Run All" goes top to bottom on a fresh copy). It prints one of

- ``passed``: every visible and hidden case agrees with the oracle (and the cost is within
  budget, for a cost-graded exercise);
- ``failed``: the first case that disagrees, yours against expected, and a hint keyed to
  the misconception your answer matches (each exercise lists its known wrong answers);
- ``not attempted``: the stub still raises ``NotImplementedError("exercise N.M")``, or a
  prediction still holds the learner copy's placeholder ``...`` (or is not defined).

What the check's own probes print (the oracle, the known wrong answers it compares yours
with, your answer run on every case) is captured, not shown: the cell shows the verdict only,
at most about 15 lines, with tensors summarized (shape, dtype, first values, max error).

How an answer is judged, in three steps shared by the notebook and the grader:

1. :func:`outcomes_of` runs the answer on every case and records plain-data outcomes;
2. :func:`expected_outcomes` runs the oracle (torch or course's reference) on the same cases;
3. :func:`judge` compares them and builds a :class:`Result`.

The grader runs step 1 in a separate process against the learner's definitions and steps
2-3 in a process that never runs learner code (see ``course/grading/grade.py``).

Lesson authors register exercises in ``course/checks/lessonNN.py`` with :func:`exercise` and
:func:`predict`; ``docs/authoring.md`` walks through a complete example.

Example:
    >>> ex = Exercise(id="9.1", name="double", title="Double it", solution=lambda x: 2 * x,
    ...               cases=[case(3)], wrong=[wrong(lambda x: x + 1, "add, don't multiply?")])
    >>> print(grade_answer(ex, lambda x: x + 1).message)
    [9.1 double] failed: 0/1 cases
      case:     double(3)
      yours:    4
      expected: 6
      hint:     add, don't multiply?
"""

from __future__ import annotations

import contextlib
import io
import random
import sys
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import torch

from course.checks._exercise import (
    Case,
    Exercise,
    Wrong,
    all_exercises,
    by_name,
    case,
    exercise,
    get,
    lesson_modules,
    load_all,
    predict,
    wrong,
)
from course.checks._outcomes import (
    describe_form,
    differing_part,
    is_not_attempted_error,
    raised_outcome,
    same,
    same_but_for_form,
    show,
    value_outcome,
)
from course.timeouts import CaseTimeout, time_limit

__all__ = [
    "MISSING",
    "PLACEHOLDER",
    "Case",
    "Exercise",
    "Result",
    "Wrong",
    "all_exercises",
    "by_name",
    "case",
    "check",
    "exercise",
    "expected_outcomes",
    "get",
    "grade_answer",
    "judge",
    "lesson_modules",
    "load_all",
    "measure_cost",
    "outcomes_of",
    "predict",
    "wrong",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: Stands for an answer the learner has not defined (the name does not exist).
MISSING: Any = _Missing()

#: What a learner copy's prediction stub holds until the learner writes an answer
#: (``predicted_a_grad = ...``): a check reports it as not attempted.
PLACEHOLDER: Any = Ellipsis


def _unanswered(answer: Any) -> bool:
    return answer is MISSING or answer is PLACEHOLDER


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Swallow what probes print (stdout, stderr, warnings) while a check runs them."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _attempt(thunk: Callable[[], Any], timeout: float | None = None) -> dict:
    """Run ``thunk`` with fixed seeds (restoring the caller's RNG state) and record what happened."""
    with torch.random.fork_rng(devices=[]), torch.enable_grad():
        torch.manual_seed(0)
        state = random.getstate()
        random.seed(0)
        try:
            with time_limit(timeout):
                return value_outcome(thunk())
        except CaseTimeout:
            return {"kind": "timeout", "seconds": float(timeout or 0)}
        except Exception as e:
            if is_not_attempted_error(e):
                return {"kind": "not attempted"}
            return raised_outcome(e)
        finally:
            random.setstate(state)


def _call(ex: Exercise, answer: Any, c: Case) -> Any:
    args, kwargs = c.materialize()
    if ex.run is not None:
        return ex.run(answer, *args, **kwargs)
    return answer(*args, **kwargs)


def outcomes_of(ex: Exercise, answer: Any, timeout: float | None = None) -> list[dict]:
    """Run ``answer`` on every case of ``ex`` (visible, then hidden).

    Args:
        ex: the exercise.
        answer: the learner's callable (function exercise) or value (prediction), or MISSING.
        timeout: seconds per case (used by the grader's worker; None in notebooks).

    Returns:
        One outcome per case (see ``course.checks._outcomes``).
    """
    if _unanswered(answer):
        return [{"kind": "not attempted"} for _ in ex.all_cases]
    if ex.kind == "predict":
        return [_prediction_outcome(ex, answer)]
    if ex.run is None and not callable(answer):
        error = TypeError(f"{ex.name} should be callable, not {type(answer).__name__}")
        return [raised_outcome(error) for _ in ex.all_cases]
    outcomes: list[dict] = []
    for c in ex.all_cases:
        if outcomes and outcomes[-1]["kind"] == "timeout":  # one endless case is enough
            outcomes.append(outcomes[-1])
            continue
        outcomes.append(_attempt(lambda c=c: _call(ex, answer, c), timeout))
    return outcomes


def _prediction_outcome(ex: Exercise, answer: Any) -> dict:
    """A prediction's outcome: its value, read by ``ex.parse`` first when the exercise has one
    (a spelling ``parse`` cannot read becomes a raised ``ValueError`` that the check reports)."""
    if ex.parse is None:
        return value_outcome(answer)
    try:
        return value_outcome(ex.parse(answer))
    except Exception as e:
        return raised_outcome(ValueError(f"cannot read your answer: {e}"))


def expected_outcomes(ex: Exercise) -> list[dict]:
    """What the oracle says, case by case. A prediction's truth that raises ``E`` makes the
    expected answer the exception class ``E``. What the oracle prints is not shown."""
    with _quiet():
        if ex.kind == "predict":
            out = _attempt(ex.oracle)
            if out["kind"] == "raised":
                out = {"kind": "value", "value": {"exception": out["type"]}}
            return [out]
        return outcomes_of(ex, ex.oracle if ex.oracle is not None else ex.solution)


def measure_cost(ex: Exercise, answer: Any, timeout: float | None = None) -> dict[str, float]:
    """The largest value of each cost figure over all cases ({} when not cost-graded or when
    the answer raises while measuring)."""
    if ex.cost is None or _unanswered(answer):
        return {}
    worst: dict[str, float] = {}
    for c in ex.all_cases:
        args, kwargs = c.materialize()
        out = _attempt(lambda: dict(ex.cost(answer, *args, **kwargs)), timeout)
        if out["kind"] != "value":
            return {}
        for key, number in out["value"]["dict"]:
            worst[key] = max(worst.get(key, float("-inf")), float(number))
    return worst


@dataclass
class Result:
    """The verdict on one exercise. ``status`` is "passed", "failed", "not attempted" or
    "error" (the answer raised, timed out, or could not be run)."""

    id: str
    name: str
    title: str
    status: str
    points: int
    score: float
    cases_passed: int
    cases_total: int
    message: str
    hint: str = ""
    cost: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def _over_budget(ex: Exercise, cost: dict) -> list[str]:
    return [k for k, cap in ex.budget.items() if k not in cost or cost[k] > cap]


def _match_wrong(ex: Exercise, yours: list[dict], expected: list[dict], cost: dict) -> str:
    """The hint for ``yours``: the known wrong answer that behaves exactly like it; else, when
    every case holds the right value in another form, what form to give it in; else the
    exercise's conceptual hint. The probes run quietly."""
    with _quiet():
        for w in ex.wrong:
            theirs = outcomes_of(ex, w.answer)
            if all(same(y, t, ex.rtol, ex.atol)[0] for y, t in zip(yours, theirs)):
                if not ex.cost or measure_cost(ex, w.answer) == cost:
                    return w.hint
    pairs = list(zip(yours, expected))
    if all(same(y, e, ex.rtol, ex.atol)[0] or same_but_for_form(y, e, ex.rtol, ex.atol) for y, e in pairs):
        first = next(e for y, e in pairs if not same(y, e, ex.rtol, ex.atol)[0])
        verb = "give it as" if ex.kind == "predict" else "return it as"
        return f"right value, {verb} {describe_form(first)}."
    if ex.kind == "predict" and yours and yours[0]["kind"] == "raised":
        return yours[0]["message"]
    return ex.hint


def judge(ex: Exercise, yours: list[dict], expected: list[dict], cost: dict | None = None) -> Result:
    """Compare outcomes case by case and build the :class:`Result` (with its message).

    Args:
        ex: the exercise.
        yours: :func:`outcomes_of` the learner's answer.
        expected: :func:`expected_outcomes` of ``ex``.
        cost: :func:`measure_cost` of the learner's answer (cost-graded exercises).
    """
    cost = dict(cost or {})
    head = f"[{ex.id} {ex.name}]"
    base = dict(id=ex.id, name=ex.name, title=ex.title, points=ex.points, cost=cost, budget=dict(ex.budget))
    total = len(expected)
    if len(yours) != total or all(y.get("kind") == "not attempted" for y in yours):
        todo = "write your prediction in place of ..." if ex.kind == "predict" else "replace the NotImplementedError"
        msg = f"{head} not attempted: define {ex.name} ({todo}) and run it again"
        return Result(status="not attempted", score=0, cases_passed=0, cases_total=total, message=msg, **base)
    verdicts = [same(y, e, ex.rtol, ex.atol) for y, e in zip(yours, expected)]
    passed = sum(ok for ok, _ in verdicts)
    cost_lines = [f"  cost:     {k} {cost.get(k, 'unknown')} (budget {cap})" for k, cap in ex.budget.items()]
    if passed == total and not _over_budget(ex, cost):
        msg = "\n".join([f"{head} passed: {passed}/{total} cases ({_points(ex.points)})", *cost_lines])
        return Result(status="passed", score=ex.points, cases_passed=passed, cases_total=total, message=msg, **base)
    hint = _match_wrong(ex, yours, expected, cost)
    if passed == total:  # correct, but too expensive
        lines = [f"{head} failed: correct on {passed}/{total} cases but over budget", *cost_lines]
        status = "failed"
    else:
        i = next(i for i, (ok, _) in enumerate(verdicts) if not ok)
        y, e = yours[i], expected[i]
        where = ex.describe(ex.all_cases[i]) + (" (hidden case)" if ex.is_hidden(i) else "")
        y_part, e_part = differing_part(y, e, ex.rtol, ex.atol) or (y, e)  # only where they differ
        lines = [f"{head} failed: {passed}/{total} cases", f"  case:     {_clip(where, 1)}",
                 f"  yours:    {_indent(_clip(show(y_part)))}", f"  expected: {_indent(_clip(show(e_part)))}", *cost_lines]
        if verdicts[i][1] not in ("values differ", "different outcome", ""):
            lines.insert(2, f"  why:      {_clip(verdicts[i][1], 1)}")
        errored = y["kind"] in ("raised", "timeout") and e["kind"] != "raised" and ex.kind != "predict"
        status = "error" if errored else "failed"
    if hint:
        lines.append(f"  hint:     {_indent(_clip(hint, 6, 600))}")
    return Result(status=status, score=0, cases_passed=passed, cases_total=total,
                  message="\n".join(lines), hint=hint, **base)


def _points(n: float) -> str:
    return f"{n:g} point" + ("" if n == 1 else "s")


def _clip(text: str, max_lines: int = 3, max_chars: int = 300) -> str:
    """At most ``max_lines`` lines and ``max_chars`` characters of ``text`` (a failing check
    prints about 15 lines in all, whatever the answer returned)."""
    lines = text.splitlines() or [""]
    out = "\n".join(lines[:max_lines])
    if len(out) > max_chars:
        out = out[: max_chars - 3] + "..."
    elif len(lines) > max_lines:
        out += " ..."
    return out


def _indent(text: str) -> str:
    return text.replace("\n", "\n            ")


def grade_answer(ex: Exercise, answer: Any, timeout: float | None = None) -> Result:
    """Run, compare and judge ``answer`` in this process (what :func:`check` does)."""
    yours = outcomes_of(ex, answer, timeout)
    return judge(ex, yours, expected_outcomes(ex), measure_cost(ex, answer, timeout))


def check(exercise_id: str, answer: Any = MISSING) -> None:
    """Check your answer to exercise ``exercise_id`` and print the verdict. Never raises.

    Args:
        exercise_id: ``"N.M"``, as in the stub's ``NotImplementedError("exercise N.M")``.
        answer: your function or value; by default the exercise's name is looked up in the
            namespace that calls ``check`` (your notebook).

    Example:
        >>> check("99.9")
        [99.9] could not be checked: KeyError: "no exercise '99.9' is registered in course.checks"
    """
    try:
        ex = get(exercise_id)
        if answer is MISSING:
            answer = sys._getframe(1).f_globals.get(ex.name, MISSING)
        with _quiet():  # the probes' prints and warnings stay out of the learner's cell
            message = grade_answer(ex, answer).message
        print(message)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a check never raises: report and carry on
        print(f"[{exercise_id}] could not be checked: {type(e).__name__}: {e}")
