"""The judge: run an answer on an exercise's cases, compare with the oracle, print the verdict.

The whole engine of the checks lives here, in four steps (about 840 lines, a third of them
the verdict's wording); :mod:`course.checks` re-exports its public names:

1. :func:`outcomes_of` runs the answer on every case, each within the exercise's ``timeout``,
   seeded and on one of torch's threads (as the grader's worker runs it), watching what it
   leaves behind (:mod:`course.checks.leftovers`), and records plain-data outcomes
   (:mod:`course.checks.outcomes`);
2. :func:`expected_outcomes` runs the oracle on the same cases (cached per exercise);
3. :func:`judge` compares them: passed, or the first case that differs, with the hint of the
   first known wrong answer that behaves the same (matched lazily: a wrong answer runs only
   when the ones before it do not explain the failure), else the form's or the fallback hint;
4. :func:`check` (the notebook's face) and :func:`grade_answer` print that :class:`Result`.

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

import ast
import contextlib
import copy
import inspect
import io
import os
import random
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from course.checks.extra import extra_cases
from course.checks.leftovers import ADVICE, collecting, handed, left_behind, snapshot
from course.checks.outcomes import (
    describe_form,
    differing_part,
    is_not_attempted_error,
    item_options,
    left_text,
    outside_domain,
    raised_outcome,
    same,
    same_but_for_form,
    show,
    value_outcome,
    wrong_places,
)
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
    "reveals_in",
    "reveals_recorded",
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


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch's ops on one thread for the block (the caller's count is put back after).

    A check's tensors are small: torch's intra-op threads cost more than they save there,
    and on a 2-core machine shared with other processes its OpenMP threads spin waiting for
    each other. Lesson 8's 8.3, a failing check in a fresh kernel at load average 13: 19.5 s
    (4.4 s of CPU) with torch's default 2 threads, 0.9 s (0.2 s of CPU) with one
    (``benchmarks/checks.py``). The grader's worker runs every answer on one thread already
    (``course/grading/worker.py``): the notebook's check now runs it as the grader does.
    Nothing is changed where the count is already one (switching rebuilds a thread pool)."""
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def _seed() -> None:
    """``torch.manual_seed(0)``, and ``random.seed(0)``. Where no accelerator is available,
    only the CPU's generator is seeded: there ``torch.manual_seed`` also queues a seeding of
    CUDA for an initialization that cannot come, with a formatted stack trace each time (a
    few ms a call, about 40 calls a check)."""
    if torch.accelerator.is_available() or torch.cuda.is_initialized():
        torch.manual_seed(0)
    else:
        torch.default_generator.manual_seed(0)
    random.seed(0)


def _attempt(
    thunk: Callable[[], Any],
    timeout: float | None = None,
    watched: dict | None = None,
    may_leave: frozenset = frozenset(),
) -> dict:
    """Run ``thunk`` with fixed seeds (restoring the caller's RNG state) and record what happened.

    With ``watched`` (a :func:`leftovers.snapshot` of what the call is handed), what the call
    left behind is recorded in the outcome as ``"left": [[kind, sentence], ...]``; the
    process-wide state is put back either way."""
    with (
        _one_thread(),
        torch.random.fork_rng(devices=[]),
        torch.enable_grad(),
        collecting(may_leave) as inside_run,
    ):
        state = random.getstate()
        _seed()
        before = watched or snapshot([], (), {})
        try:
            with time_limit(timeout):
                out = value_outcome(thunk())
        except CaseTimeout:
            out = {"kind": "timeout", "seconds": float(timeout or 0)}
        except Exception as e:
            out = {"kind": "not attempted"} if is_not_attempted_error(e) else raised_outcome(e)
        finally:
            random.setstate(state)
        left = left_behind(before, may_leave) + inside_run  # process-wide state is put back here
        if left and watched is not None and out["kind"] != "not attempted":
            out["left"] = [list(pair) for pair in left]
        return out


def _call(ex: Exercise, answer: Any, args: tuple, kwargs: dict) -> Any:
    if ex.run is not None:
        return ex.run(answer, *args, **kwargs)
    return answer(*args, **kwargs)


def _parameter_names(ex: Exercise) -> list[str]:
    """The names of the answer's arguments, for messages ("W1.requires_grad changed ...")."""
    try:
        names = list(inspect.signature(ex.run or ex.solution).parameters)
    except (TypeError, ValueError):
        return []
    return names[1:] if ex.run is not None else names


def _run_case(ex: Exercise, answer: Any, c: Case, timeout: float | None) -> dict:
    args, kwargs = c.materialize()
    watched = snapshot(_parameter_names(ex), args, kwargs)
    return _attempt(lambda: _call(ex, answer, args, kwargs), timeout, watched, ex.may_leave)


_KEEPS_STATE = (
    "repeat",
    "called a second time on the same case, it gave another outcome: it keeps state between calls",
)


def outcomes_of(ex: Exercise, answer: Any, timeout: float | None = None) -> list[dict]:
    """Run ``answer`` on every case of ``ex`` (visible, then hidden).

    Args:
        ex: the exercise.
        answer: the learner's callable (function exercise) or value (prediction), or MISSING.
        timeout: seconds per case (used by the grader's worker; None in notebooks).

    Returns:
        One outcome per case (see ``course.checks.outcomes``).
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
        outcomes.append(_run_case(ex, answer, c, timeout))
    _run_again(ex, answer, outcomes[0], timeout)
    return outcomes


def _run_again(ex: Exercise, answer: Any, first: dict, timeout: float | None) -> None:
    """Run the first case once more: an answer that gives another outcome then keeps state
    between calls (``first`` gets a ``left`` entry that says so)."""
    if ex.repeatable and first["kind"] in ("value", "raised") and "left" not in first:
        again = _run_case(ex, answer, ex.all_cases[0], timeout)  # the same call, once more
        if not same(again, first, ex.rtol, ex.atol)[0]:
            first["left"] = [list(_KEEPS_STATE)]


def _case_outcome(ex: Exercise, answer: Any, index: int, timeout: float | None) -> dict:
    """The outcome of case ``index`` alone (the first case run twice, as in :func:`outcomes_of`)."""
    out = _run_case(ex, answer, ex.all_cases[index], timeout)
    if index == 0:
        _run_again(ex, answer, out, timeout)
    return out


def _prediction_outcome(ex: Exercise, answer: Any) -> dict:
    """A prediction's outcome: its value, read by ``ex.parse`` first when the exercise has one
    (a spelling ``parse`` cannot read becomes a raised ``ValueError`` that the check reports)."""
    if ex.parse is None:
        return value_outcome(answer)
    try:
        return value_outcome(ex.parse(answer))
    except Exception as e:
        return raised_outcome(ValueError(f"cannot read your answer: {e}"))


def _memo(key: tuple, ex: Exercise, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per exercise object, kept in ``ex.memo``: the oracle's outcomes and a
    known wrong answer's outcome on a case are the same on every check (seeds fixed, arguments
    copied). A copy of ``ex`` (``dataclasses.replace``, extra cases) shares the dict, so each
    entry holds the exercise it was computed for and serves that one only."""
    key = (*key, id(ex))
    hit = ex.memo.get(key)
    if hit is not None and hit[0] is ex:
        return hit[1]
    value = compute()
    ex.memo[key] = (ex, value)
    return value


def forget_cached() -> None:
    """Forget the outcomes computed so far for every registered exercise (the oracles', the
    known wrong answers'): the next check pays for them again, as a learner's first check
    does (``benchmarks/checks.py``)."""
    for ex in all_exercises():
        ex.memo.clear()


def expected_outcomes(ex: Exercise) -> list[dict]:
    """What the oracle says, case by case. A prediction's truth that raises ``E`` makes the
    expected answer the exception class ``E``. What the oracle prints is not shown. Computed
    once per exercise in a process (a copy is returned)."""
    return copy.deepcopy(_memo(("expected",), ex, lambda: _expected_outcomes(ex)))


def _expected_outcomes(ex: Exercise) -> list[dict]:
    with _quiet():
        if ex.kind == "predict":
            out = _attempt(ex.oracle)
            if out["kind"] == "raised":
                out = {"kind": "value", "value": {"exception": out["type"]}}
            return [out]
        return outcomes_of(ex, ex.oracle if ex.oracle is not None else ex.solution)


def _wrong_outcome(ex: Exercise, index: int, case_index: int, again: bool = False) -> dict:
    """Known wrong answer ``index``'s outcome on case ``case_index``, computed once per process;
    with ``again`` (the first case only), run a second time as :func:`outcomes_of` does, so an
    answer that keeps state between calls says so."""

    def compute() -> dict:
        answer = ex.wrong[index].answer
        if ex.kind == "predict" or _unanswered(answer) or (ex.run is None and not callable(answer)):
            return outcomes_of(ex, answer)[case_index]
        if again:
            out = copy.deepcopy(_wrong_outcome(ex, index, 0))
            _run_again(ex, answer, out, None)
            return out
        return _run_case(ex, answer, ex.all_cases[case_index], None)

    return _memo(("wrong", index, case_index, again), ex, compute)


def _wrong_cost(ex: Exercise, index: int) -> dict:
    """Known wrong answer ``index``'s cost figures, measured once per process."""
    return _memo(("wrong cost", index), ex, lambda: measure_cost(ex, ex.wrong[index].answer))


def passes(ex: Exercise, answer: Any) -> bool:
    """Does ``answer`` pass ``ex``'s check? Case by case within the exercise's time limit,
    stopping at the first case it fails, and no hint looked for: the verdict alone, fast
    (what mutation testing asks of every mutant, ``course.checks.mutants``)."""
    expected = expected_outcomes(ex)
    with _quiet():
        if ex.kind == "predict":
            return same(outcomes_of(ex, answer)[0], expected[0], ex.rtol, ex.atol)[0]
        for i, e in enumerate(expected):
            if not same(_case_outcome(ex, answer, i, ex.timeout), e, ex.rtol, ex.atol)[0]:
                return False
        cost = measure_cost(ex, answer, ex.timeout)
    return not _over_budget(ex, cost)


def measure_cost(ex: Exercise, answer: Any, timeout: float | None = None) -> dict[str, float]:
    """The largest value of each cost figure over all cases ({} when not cost-graded or when
    the answer raises while measuring)."""
    if ex.cost is None or _unanswered(answer):
        return {}
    worst: dict[str, float] = {}
    for c in ex.all_cases:
        args, kwargs = c.materialize()
        out = _attempt(lambda: dict(ex.cost(answer, *args, **kwargs)), timeout)  # noqa: B023 (called in this iteration); state put back
        if out["kind"] != "value":
            return {}
        for key, number in out["value"]["dict"]:
            worst[key] = max(worst.get(key, float("-inf")), float(number))
    return worst


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
    keeps_state = yours[0].get("left") == [list(_KEEPS_STATE)]
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
    with _quiet():
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


def _match_wrong(ex: Exercise, yours: list[dict], expected: list[dict], cost: dict) -> str:
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
        msg = "\n".join([f"{head} passed: {passed}/{total} cases ({_points(ex.points)})", *cost_lines])
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
    hint = _match_wrong(ex, yours, expected, cost)
    if hint:
        lines.append(f"  hint:     {_wrapped(_clip(hint, 6, 600))}")
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
    lines = [f"{head} {verdict}: {passed}/{len(expected)} cases", f"  case:     {_clip(where, 1)}"]
    if y.get("left") and not e.get("left"):  # state left behind (maybe what broke the value)
        lines.append(f"  left:     {_indent(_clip(left_text(y), 3, 400))}")
    if not same(_without_left(y), e, ex.rtol, ex.atol)[0]:
        y_part, e_part = differing_part(y, e, ex.rtol, ex.atol) or (y, e)  # only where they differ
        lines += [
            f"  yours:    {_indent(_clip(show(y_part)))}",
            f"  expected: {_indent(_clip(show(e_part)))}",
        ]
        if verdicts[i][1] not in ("values differ", "different outcome", ""):
            lines.insert(2, f"  why:      {_clip(verdicts[i][1], 1)}")
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
    lines = [f"  yours:    {_indent(_clip(show(y)))}"]
    options = item_options(e, ex.options)
    outside = outside_domain(y, e, options)
    if outside:
        return [*lines, f"  why:      {_clip(outside, 2)}"]
    why = same(y, e, ex.rtol, ex.atol)[1]
    if any(word in why for word in _FORM_REASONS):  # about the form, not the value
        lines.append(f"  why:      {_clip(why, 1)}")
    where = wrong_places(y, e, ex.rtol, ex.atol, which=len(options) != 2)
    if where:
        lines.append(f"  wrong:    {_clip(where, 2)}")
    return lines


def _revealed(ex: Exercise, yours: list[dict], expected: list[dict], base: dict) -> Result:
    right = len(yours) == len(expected) and all(
        same(y, e, ex.rtol, ex.atol)[0] for y, e in zip(yours, expected)
    )
    lines = [
        f"[{ex.id} {ex.name}] revealed: the answer is shown, so this prediction earns no points",
        f"  answer:   {_indent(_clip(show(expected[0]), 6, 900))}",
    ]
    if yours and yours[0].get("kind") != "not attempted":
        lines.append(f"  yours:    {'the same' if right else _indent(_clip(show(yours[0])))}")
    return Result(
        status="revealed",
        score=0,
        cases_passed=int(right),
        cases_total=len(expected),
        message="\n".join(lines),
        revealed=True,
        **base,
    )


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
    return text.replace("\n", "\n" + " " * _COLUMN)


_COLUMN = len("  expected: ")  # where the text of every field of a verdict starts
WIDTH = 88  # a verdict's prose wraps here: a JupyterLab output area on a laptop holds about 100


def _wrapped(text: str) -> str:
    """``text`` broken at spaces into lines that end by column :data:`WIDTH`, each line after
    the first indented to the field's column. Words stay whole (a word longer than a line gets
    a line of its own), so a name like ``torch.autograd.graph.saved_tensors_hooks`` is never
    cut, and the browser never has to wrap the line itself (it cuts mid-word).

    Example:
        >>> print("  hint:     " + _wrapped("gradients accumulate: the second .backward() adds "
        ...                                 "its 4 to the 4 already in a.grad, so set_to_none first"))
          hint:     gradients accumulate: the second .backward() adds its 4 to the 4 already in
                    a.grad, so set_to_none first
    """
    lines = [
        part
        for line in text.splitlines() or [""]
        for part in textwrap.wrap(line, WIDTH - _COLUMN, break_long_words=False, break_on_hyphens=False)
        or [""]
    ]
    return _indent("\n".join(lines))


def grade_answer(ex: Exercise, answer: Any, timeout: float | None = None, revealed: bool = False) -> Result:
    """Run, compare and judge ``answer`` in this process (what :func:`check` does).

    The oracle runs first, with no time limit: the first call of many torch functions
    imports ``torch._dynamo`` (1.5 s of CPU), which the answer's first case paid inside its
    time limit before (1.2's, in a fresh lesson-1 kernel at load average 12: "too slow")."""
    expected = expected_outcomes(ex)
    yours = outcomes_of(ex, answer, timeout)
    return judge(ex, yours, expected, measure_cost(ex, answer, timeout), revealed)


#: The environment variable that names the file where :func:`check` writes down each
#: prediction it revealed, one id a line: how ``course grade`` learns of a reveal from what
#: ran in its kernel, whatever the call's spelling (``reveal=show``, ``**{"reveal": True}``).
REVEAL_RECORD = "COURSE_REVEAL_RECORD"


def _record_reveal(exercise_id: str) -> None:
    path = os.environ.get(REVEAL_RECORD)
    if path:
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
            f.write(exercise_id + "\n")


def reveals_recorded(path: str | os.PathLike) -> set[str]:
    """The ids :func:`check` wrote down as revealed in the file ``path`` (see :data:`REVEAL_RECORD`);
    an empty set when there is none.

    Example:
        >>> import tempfile
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
            _record_reveal(ex.id)  # before the answer is shown
        with _quiet():  # the probes' prints and warnings stay out of the learner's cell
            message = grade_answer(ex, answer, timeout=ex.timeout, revealed=revealed).message
        if reveal is not True and reveal is not False and ex.kind == "predict":
            message += f"\n  note:     reveal={reveal!r} is not True: the answer stays hidden"
        print(message)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a check never raises: report and carry on
        print(f"[{exercise_id}] could not be checked: {type(e).__name__}: {e}")
