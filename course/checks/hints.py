"""Which hint a failing answer gets: the mistake it behaves like, else what its outcome shows.

Each exercise lists known wrong answers, each with the hint for its misconception
(:func:`course.checks.wrong`). :func:`match_wrong` picks the hint for a learner's outcomes, the
first rule that applies winning:

1. a known wrong answer that behaves exactly like yours on every case (and costs the same, for
   a cost-graded exercise): its hint;
2. an answer that ran out of time: what to look for (a loop that never ends);
3. a correct answer over budget: the exercise's cost hint;
4. an answer that left state behind: what it left and how not to (:mod:`course.checks.leftovers`);
5. a prediction with an item that is no possible answer, or a dict where a list belongs: the
   form to give it in (:mod:`course.checks.wrong_items`);
6. the right value in another form: the form (:mod:`course.checks.forms`);
7. else the exercise's conceptual hint.

Known wrong answers are matched lazily: one runs only when the ones before it do not explain
the failure, and on the failing case first, stopping at the first case where it differs from
yours; its outcomes are computed once per process (``ex.memo``).

Example:
    >>> from course.checks import Exercise, case, wrong
    >>> from course.checks.running import expected_outcomes, outcomes_of
    >>> ex = Exercise(id="9.1", name="double", title="Double it", solution=lambda x: 2 * x,
    ...               cases=[case(3)], wrong=[wrong(lambda x: x + 1, "add, don't multiply?")],
    ...               hint="double means times two")
    >>> match_wrong(ex, outcomes_of(ex, lambda x: 1 + x), expected_outcomes(ex), {})
    "add, don't multiply?"
    >>> match_wrong(ex, outcomes_of(ex, lambda x: 3 * x), expected_outcomes(ex), {})
    'double means times two'
"""

from __future__ import annotations

import copy
from typing import Any

from course.checks.comparison import differing_part, same
from course.checks.forms import describe_form, same_but_for_form
from course.checks.leftovers import ADVICE
from course.checks.registry import Exercise
from course.checks.running import (
    KEEPS_STATE,
    measure_cost,
    memoized,
    outcomes_of,
    quiet,
    run_again,
    run_case,
    unanswered,
)
from course.checks.wrong_items import item_options, outside_domain

__all__ = ["match_wrong"]


def _wrong_outcome(ex: Exercise, index: int, case_index: int, again: bool = False) -> dict:
    """Known wrong answer ``index``'s outcome on case ``case_index``, computed once per process;
    with ``again`` (the first case only), run a second time as :func:`outcomes_of` does, so an
    answer that keeps state between calls says so."""

    def compute() -> dict:
        answer = ex.wrong[index].answer
        if ex.kind == "predict" or unanswered(answer) or (ex.run is None and not callable(answer)):
            return outcomes_of(ex, answer)[case_index]
        if again:
            out = copy.deepcopy(_wrong_outcome(ex, index, 0))
            run_again(ex, answer, out, None)
            return out
        return run_case(ex, answer, ex.all_cases[case_index], None)

    return memoized(("wrong", index, case_index, again), ex, compute)


def _wrong_cost(ex: Exercise, index: int) -> dict:
    """Known wrong answer ``index``'s cost figures, measured once per process."""
    return memoized(("wrong cost", index), ex, lambda: measure_cost(ex, ex.wrong[index].answer))


def _int_for_a_float(yours: Any, theirs: Any) -> bool:
    """Does a known wrong answer hold an int where ``yours`` holds a float (anywhere)? Such an
    entry stands for "cut to an int" and must not catch the float ``69.0``."""
    if isinstance(theirs, (list, tuple)) and isinstance(yours, (list, tuple)):
        return any(_int_for_a_float(y, t) for y, t in zip(yours, theirs))
    if isinstance(theirs, dict) and isinstance(yours, dict) and "dict" in theirs and "dict" in yours:
        mine = {repr(k): v for k, v in yours["dict"]}
        return any(_int_for_a_float(mine.get(repr(k)), t) for k, t in theirs["dict"])
    return type(theirs) is int and type(yours) is float


def _behaves_like(ex: Exercise, yours: list[dict], index: int, first: int) -> bool:
    """Does ``yours`` behave exactly like known wrong answer ``index`` on every case? Lazily:
    the case ``first`` (where yours fails: the one that tells answers apart most often) first,
    then the others from the last (the hidden cases an author adds to tell a mistake apart
    come last), stopping at the first case where they differ; the first case's second run
    only when everything else agrees."""
    if len(yours) != len(ex.all_cases):
        return False
    keeps_state = yours[0].get("left") == [list(KEEPS_STATE)]
    order = [first, *(i for i in reversed(range(len(yours))) if i != first)]
    if not keeps_state and ex.kind == "function" and ex.repeatable:
        order.append(-1)  # the first case's second run, last
    for i in order:
        theirs = _wrong_outcome(ex, index, max(i, 0), again=i == -1 or (i == 0 and keeps_state))
        y = yours[max(i, 0)]
        if not same(y, theirs, ex.rtol, ex.atol)[0] or _int_for_a_float(y.get("value"), theirs.get("value")):
            return False
    return True


def _known_wrong(ex: Exercise, yours: list[dict], expected: list[dict], cost: dict) -> str | None:
    """The hint of the first known wrong answer that behaves exactly like ``yours`` (None if
    none does). The probes run quietly, with no time limit: they are the author's code."""
    first = next(
        (i for i, (y, e) in enumerate(zip(yours, expected)) if not same(y, e, ex.rtol, ex.atol)[0]), 0
    )
    with quiet():
        for index, w in enumerate(ex.wrong):
            if _behaves_like(ex, yours, index, first):
                if not ex.cost or _wrong_cost(ex, index) == cost:
                    return w.hint
    return None


def _too_slow_hint(ex: Exercise) -> str:
    return (
        f"your answer ran past the {ex.timeout:g} s this exercise allows on one case (the "
        "reference takes a fraction of that): look for a loop that never ends (a hook that "
        "calls itself, an unpack that waits for something that never comes) or work repeated "
        "for every element."
    )


def match_wrong(ex: Exercise, yours: list[dict], expected: list[dict], cost: dict) -> str:
    """The hint for ``yours``: the known wrong answer that behaves exactly like it; else, for
    an answer that ran out of time, what to look for; else, for a correct answer over budget,
    the cost hint; else what it left behind and how not to; else, for a prediction with an
    item that is no possible answer, what each item may be; else, when every differing item is
    the right value in another form, what form to give it in; else the exercise's conceptual
    hint."""
    known = _known_wrong(ex, yours, expected, cost)
    if known is not None:
        return known
    if any(y.get("kind") == "timeout" for y in yours):
        return _too_slow_hint(ex)
    bad = [(y, e) for y, e in zip(yours, expected) if not same(y, e, ex.rtol, ex.atol)[0]]
    if not bad:  # every case right: over budget
        return ex.cost_hint or ex.hint
    left = next((y["left"] for y, e in bad if y.get("left") and not e.get("left")), None)
    if left:
        return ADVICE[left[0][0]]
    if ex.kind == "predict":
        form = _prediction_form_hint(ex, yours[0], expected[0])
        if form:
            return form
    parts = [differing_part(y, e, ex.rtol, ex.atol) or (y, e) for y, e in bad]
    if all(same_but_for_form(y, e, ex.rtol, ex.atol) for y, e in parts):
        if all(isinstance(e.get("value"), str) and isinstance(y.get("value"), str) for y, e in parts):
            return _SPELLING
        verb = "give it as" if ex.kind == "predict" else "return it as"
        return f"right value, {verb} {describe_form(parts[0][1], secret=ex.kind == 'predict')}."
    if ex.kind == "predict" and yours and yours[0]["kind"] == "raised":
        return yours[0]["message"]
    return ex.hint


def _prediction_form_hint(ex: Exercise, y: dict, e: dict) -> str:
    """For a prediction not in the truth's form: an item outside what it may be (its
    domain), or a dict where a list belongs (one hint, never the values)."""
    options = item_options(e, ex.options)
    if outside_domain(y, e, options) and not same_but_for_form(y, e, ex.rtol, ex.atol):
        if options:
            return f"write each item as one of {', '.join(repr(o) for o in options)}."
        return "write each number as a number (8.0, not '8.0'); the check compares values, not text."
    yv, ev = y.get("value"), e.get("value")
    if isinstance(yv, dict) and "dict" in yv and isinstance(ev, (list, tuple)):
        values = [v for _, v in yv["dict"]]
        form = describe_form(e, secret=True)
        if (
            len(values) == len(ev)
            and same(
                {"kind": "value", "value": list(values)},
                {"kind": "value", "value": list(ev)},
                ex.rtol,
                ex.atol,
            )[0]
        ):
            return f"right values, give them as {form}, in the exercise's order (not a dict)."
        return f"give your prediction as {form}, in the exercise's order, not a dict."
    return ""


_SPELLING = (
    "the right words, spelled differently: write each one exactly as the exercise spells it "
    "(case and spaces count)."
)
