"""The judge: compare an answer's outcomes with the oracle's and word the verdict.

The engine of the checks, in four steps over five modules of 90 to 360 lines each (about
1,060 in all; the outcomes it compares are four more, about 740 lines, entered through
:mod:`course.checks.outcomes`). :mod:`course.checks` re-exports their public names, and so
does this module, for code that imports them from here:

1. :func:`outcomes_of` (:mod:`course.checks.running`) runs the answer on every case, each
   within the exercise's ``timeout``, seeded and on one of torch's threads (as the grader's
   worker runs it), watching what it leaves behind (:mod:`course.checks.leftovers`), and
   records plain-data outcomes (:mod:`course.checks.outcomes`);
2. :func:`expected_outcomes` (:mod:`course.checks.running`) runs the oracle on the same cases
   (cached per exercise);
3. :func:`judge` (here) compares them (:mod:`course.checks.comparison`): passed, or the first
   case that differs, with the hint of the first known wrong answer that behaves the same,
   else the form's or the fallback hint (:mod:`course.checks.hints`);
4. :func:`check` (the notebook's face) and :func:`grade_answer` (here) print that
   :class:`Result`, worded by :mod:`course.checks.wording`; a revealed prediction is
   recorded for the grader (:mod:`course.checks.reveals`).

The grader runs step 1 in a process of its own against the learner's definitions and steps 2-3
in one that never runs learner code (``course/grading/judging.py``). :func:`passes` is the
same judgement without the wording, which mutation testing (:mod:`course.checks.mutants`) runs
by the hundred.

Example:
    >>> from course.checks import Exercise, case, wrong
    >>> ex = Exercise(id="9.1", name="double", title="Double it", solution=lambda x: 2 * x,
    ...               cases=[case(3)], wrong=[wrong(lambda x: x + 1, "add, don't multiply?")])
    >>> grade_answer(ex, lambda x: 2 * x).status, passes(ex, lambda x: x + x), passes(ex, abs)
    ('passed', True, False)
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from course.checks.comparison import differing_part, left_text, same
from course.checks.extra import extra_cases
from course.checks.hints import match_wrong
from course.checks.leftovers import handed
from course.checks.registry import (
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
from course.checks.reveals import REVEAL_RECORD, record_reveal, reveals_in, reveals_recorded
from course.checks.running import (
    MISSING,
    PLACEHOLDER,
    case_outcome,
    expected_outcomes,
    forget_cached,
    measure_cost,
    outcomes_of,
    quiet,
)
from course.checks.wording import WIDTH, clip, indent, points_text, show, wrapped
from course.checks.wrong_items import item_options, outside_domain, wrong_places

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
    "extra_cases",
    "forget_cached",
    "get",
    "grade_answer",
    "handed",
    "judge",
    "lesson_modules",
    "load_all",
    "measure_cost",
    "outcomes_of",
    "partial_score",
    "passes",
    "predict",
    "REVEAL_RECORD",
    "WIDTH",
    "reveals_in",
    "reveals_recorded",
    "wrong",
]


@dataclass
class Result:
    """The verdict on one exercise. ``status`` is "passed", "failed", "not attempted",
    "error" (the answer raised, timed out, or could not be run) or "revealed" (a prediction
    whose answer the learner asked to see: it earns no points). ``revealed`` says whether
    the answer was shown; ``partial`` whether partial credit applied (an exercise registered
    with ``partial=True`` that did not pass scores ``points`` x cases passed / cases)."""

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
    revealed: bool = False
    partial: bool = False

    def to_json(self) -> dict:
        return asdict(self)


def _over_budget(ex: Exercise, cost: dict) -> list[str]:
    return [k for k, cap in ex.budget.items() if k not in cost or cost[k] > cap]


def _without_left(outcome: dict) -> dict:
    return {k: v for k, v in outcome.items() if k != "left"}


def judge(
    ex: Exercise, yours: list[dict], expected: list[dict], cost: dict | None = None, revealed: bool = False
) -> Result:
    """Compare outcomes case by case and build the :class:`Result` (with its message).

    Args:
        ex: the exercise.
        yours: :func:`outcomes_of` the learner's answer.
        expected: :func:`expected_outcomes` of ``ex``.
        cost: :func:`measure_cost` of the learner's answer (cost-graded exercises).
        revealed: the learner asked to see a prediction's answer (``check(id, reveal=True)``):
            the message shows it and the status is "revealed", worth no points.

    A failed prediction never shows the expected value unless ``revealed``: it says how
    much is wrong and where (which items, keys or positions), gives a hint and says how to
    ask for the answer.
    """
    cost = dict(cost or {})
    head = f"[{ex.id} {ex.name}]"
    base = dict(id=ex.id, name=ex.name, title=ex.title, points=ex.points, cost=cost, budget=dict(ex.budget))
    total = len(expected)
    if revealed and ex.kind == "predict":
        return _revealed(ex, yours, expected, base)
    if len(yours) != total or all(y.get("kind") == "not attempted" for y in yours):
        todo = (
            "write your prediction in place of ..."
            if ex.kind == "predict"
            else "replace the NotImplementedError"
        )
        msg = f"{head} not attempted: define {ex.name} ({todo}) and run it again"
        return Result(status="not attempted", score=0, cases_passed=0, cases_total=total, message=msg, **base)
    verdicts = [same(y, e, ex.rtol, ex.atol) for y, e in zip(yours, expected)]
    passed = sum(ok for ok, _ in verdicts)
    cost_lines = [f"  cost:     {k} {cost.get(k, 'unknown')} (budget {cap})" for k, cap in ex.budget.items()]
    if passed == total and not _over_budget(ex, cost):
        msg = "\n".join([f"{head} passed: {passed}/{total} cases ({points_text(ex.points)})", *cost_lines])
        return Result(
            status="passed", score=ex.points, cases_passed=passed, cases_total=total, message=msg, **base
        )
    status = "failed"
    if passed == total:  # correct, but too expensive
        lines = [f"{head} failed: correct on {passed}/{total} cases but over budget", *cost_lines]
    elif ex.kind == "predict":
        lines = [
            f"{head} failed: your prediction is not what torch does",
            *_prediction_lines(ex, yours[0], expected[0]),
        ]
    else:
        status, lines = _failed_case_lines(ex, yours, expected, verdicts, head, cost_lines)
    hint = match_wrong(ex, yours, expected, cost)
    if hint:
        lines.append(f"  hint:     {wrapped(clip(hint, 6, 600))}")
    if ex.kind == "predict" and passed < total:
        lines.append(f'  answer:   try again, or check("{ex.id}", reveal=True) to see it (no points then)')
    return Result(
        status=status,
        score=partial_score(ex, passed, total),
        cases_passed=passed,
        cases_total=total,
        message="\n".join(lines),
        hint=hint,
        partial=ex.partial,
        **base,
    )


def _failed_case_lines(
    ex: Exercise, yours: list[dict], expected: list[dict], verdicts: list, head: str, cost_lines: list[str]
) -> tuple[str, list[str]]:
    """A function exercise that failed a case: its status ("error" when the answer raised or
    ran out of time where the oracle returned) and the lines that show the first failing case
    (what it is, what was left behind, yours against expected, where they differ)."""
    passed = sum(ok for ok, _ in verdicts)
    i = next(i for i, (ok, _) in enumerate(verdicts) if not ok)
    y, e = yours[i], expected[i]
    where = ex.describe(ex.all_cases[i]) + (" (hidden case)" if ex.is_hidden(i) else "")
    verdict = "too slow" if y["kind"] == "timeout" else "failed"
    lines = [f"{head} {verdict}: {passed}/{len(expected)} cases", f"  case:     {clip(where, 1)}"]
    if y.get("left") and not e.get("left"):  # state left behind (maybe what broke the value)
        lines.append(f"  left:     {indent(clip(left_text(y), 3, 400))}")
    if not same(_without_left(y), e, ex.rtol, ex.atol)[0]:
        y_part, e_part = differing_part(y, e, ex.rtol, ex.atol) or (y, e)  # only where they differ
        lines += [
            f"  yours:    {indent(clip(show(y_part)))}",
            f"  expected: {indent(clip(show(e_part)))}",
        ]
        if verdicts[i][1] not in ("values differ", "different outcome", ""):
            lines.insert(2, f"  why:      {clip(verdicts[i][1], 1)}")
    lines += cost_lines
    status = "error" if y["kind"] in ("raised", "timeout") and e["kind"] != "raised" else "failed"
    return status, lines


def partial_score(ex: Exercise, passed: int, total: int) -> float:
    """What an answer that did not pass scores: 0, or with partial credit (an exercise
    registered with ``partial=True``) ``points`` x ``passed`` / ``total``, to 4 decimals.

    Example:
        >>> ex = Exercise(id="9.1", name="double", title="Double it", solution=lambda x: 2 * x,
        ...               cases=[case(3)], wrong=[wrong(lambda x: x + 1, "add?")], points=2)
        >>> partial_score(ex, 3, 4), partial_score(Exercise(**{**ex.__dict__, "partial": True}), 3, 4)
        (0, 1.5)
    """
    if not ex.partial or not total:
        return 0
    return round(ex.points * passed / total, 4)


_FORM_REASONS = (
    "dtype",
    "values, expected",
    "is an int, compared exactly",
    "expected a tensor",
    "expected no tensor",
    "not a rectangular",
)


def _prediction_lines(ex: Exercise, y: dict, e: dict) -> list[str]:
    """Yours, and how much of it is wrong and where: never the expected value. An item that is
    no possible answer is named as such (never judged as a value); for items that take one of
    two values, only how many are wrong (which ones would be the answer)."""
    lines = [f"  yours:    {indent(clip(show(y)))}"]
    options = item_options(e, ex.options)
    outside = outside_domain(y, e, options)
    if outside:
        return [*lines, f"  why:      {clip(outside, 2)}"]
    why = same(y, e, ex.rtol, ex.atol)[1]
    if any(word in why for word in _FORM_REASONS):  # about the form, not the value
        lines.append(f"  why:      {clip(why, 1)}")
    where = wrong_places(y, e, ex.rtol, ex.atol, which=len(options) != 2)
    if where:
        lines.append(f"  wrong:    {clip(where, 2)}")
    return lines


def _revealed(ex: Exercise, yours: list[dict], expected: list[dict], base: dict) -> Result:
    right = len(yours) == len(expected) and all(
        same(y, e, ex.rtol, ex.atol)[0] for y, e in zip(yours, expected)
    )
    lines = [
        f"[{ex.id} {ex.name}] revealed: the answer is shown, so this prediction earns no points",
        f"  answer:   {indent(clip(show(expected[0]), 6, 900))}",
    ]
    if yours and yours[0].get("kind") != "not attempted":
        lines.append(f"  yours:    {'the same' if right else indent(clip(show(yours[0])))}")
    return Result(
        status="revealed",
        score=0,
        cases_passed=int(right),
        cases_total=len(expected),
        message="\n".join(lines),
        revealed=True,
        **base,
    )


def passes(ex: Exercise, answer: Any) -> bool:
    """Does ``answer`` pass ``ex``'s check? Case by case within the exercise's time limit,
    stopping at the first case it fails, and no hint looked for: the verdict alone, fast
    (what mutation testing asks of every mutant, ``course.checks.mutants``)."""
    expected = expected_outcomes(ex)
    with quiet():
        if ex.kind == "predict":
            return same(outcomes_of(ex, answer)[0], expected[0], ex.rtol, ex.atol)[0]
        for i, e in enumerate(expected):
            if not same(case_outcome(ex, answer, i, ex.timeout), e, ex.rtol, ex.atol)[0]:
                return False
        cost = measure_cost(ex, answer, ex.timeout)
    return not _over_budget(ex, cost)


def grade_answer(ex: Exercise, answer: Any, timeout: float | None = None, revealed: bool = False) -> Result:
    """Run, compare and judge ``answer`` in this process (what :func:`check` does).

    The oracle runs first, with no time limit: the first call of many torch functions
    imports ``torch._dynamo`` (1.5 s of CPU), which the answer's first case paid inside its
    time limit before (1.2's, in a fresh lesson-1 kernel at load average 12: "too slow")."""
    expected = expected_outcomes(ex)
    yours = outcomes_of(ex, answer, timeout)
    return judge(ex, yours, expected, measure_cost(ex, answer, timeout), revealed)


def check(exercise_id: str, answer: Any = MISSING, reveal: bool = False) -> None:
    """Check your answer to exercise ``exercise_id`` and print the verdict. Never raises.

    Args:
        exercise_id: ``"N.M"``, as in the stub's ``NotImplementedError("exercise N.M")``.
        answer: your function or value; by default the exercise's name is looked up in the
            namespace that calls ``check`` (your notebook).
        reveal: ``True`` (and only ``True``) shows a prediction's answer. A revealed
            prediction earns no points in ``course grade`` (it reports it as revealed).

    Each case runs within the exercise's ``timeout`` (an answer that loops forever is
    stopped and reported as too slow).

    Example:
        >>> check("99.9")
        [99.9] could not be checked: KeyError: "no exercise '99.9' is registered in course.checks"
    """
    try:
        ex = get(exercise_id)
        if answer is MISSING:
            answer = sys._getframe(1).f_globals.get(ex.name, MISSING)
        revealed = reveal is True and ex.kind == "predict"
        if revealed:
            record_reveal(ex.id)  # before the answer is shown
        with quiet():  # the probes' prints and warnings stay out of the learner's cell
            message = grade_answer(ex, answer, timeout=ex.timeout, revealed=revealed).message
        if reveal is not True and reveal is not False and ex.kind == "predict":
            message += f"\n  note:     reveal={reveal!r} is not True: the answer stays hidden"
        print(message)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a check never raises: report and carry on
        print(f"[{exercise_id}] could not be checked: {type(e).__name__}: {e}")
