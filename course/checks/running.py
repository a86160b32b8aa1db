"""Running an answer: every case, seeded, timed and watched, into plain-data outcomes.

Steps 1 and 2 of a check (:mod:`course.checks.judge` does the rest):

- :func:`outcomes_of` runs the learner's answer on every case of an exercise (visible, then
  hidden), each within the exercise's ``timeout``, with torch's and Python's generators seeded
  (and the caller's state put back), on one of torch's threads, with what the call leaves
  behind watched (:mod:`course.checks.leftovers`); the first case runs twice, since an answer
  that gives another outcome the second time keeps state between calls;
- :func:`expected_outcomes` runs the oracle the same way, once per exercise in a process;
- :func:`measure_cost` runs a cost-graded exercise's cost function on the answer.

An answer that raises, runs out of time or is still the stub is an outcome like any other
(:mod:`course.checks.outcomes`): running never raises on the answer's behalf.

Example:
    >>> from course.checks import Exercise, case, wrong
    >>> ex = Exercise(id="9.1", name="double", title="Double it", solution=lambda x: 2 * x,
    ...               cases=[case(3), case(-1)], wrong=[wrong(lambda x: x + 1, "add?")])
    >>> [o["value"] for o in outcomes_of(ex, lambda x: x + x)], expected_outcomes(ex)[1]
    ([6, -2], {'kind': 'value', 'value': -2})
    >>> outcomes_of(ex, MISSING)[0], outcomes_of(ex, lambda x: 1 / 0)[0]["type"]
    ({'kind': 'not attempted'}, 'ZeroDivisionError')
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import io
import random
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from course.checks.comparison import same
from course.checks.leftovers import collecting, left_behind, snapshot
from course.checks.outcomes import is_not_attempted_error, raised_outcome, value_outcome
from course.checks.registry import Case, Exercise, all_exercises, get
from course.timeouts import CaseTimeout, time_limit

__all__ = [
    "remembered_for",
    "KEEPS_STATE",
    "MISSING",
    "PLACEHOLDER",
    "case_outcome",
    "expected_outcomes",
    "forget_cached",
    "measure_cost",
    "memoized",
    "outcomes_of",
    "quiet",
    "run_again",
    "run_case",
    "unanswered",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: Stands for an answer the learner has not defined (the name does not exist).
MISSING: Any = _Missing()

#: What a learner copy's prediction stub holds until the learner writes an answer
#: (``predicted_a_grad = ...``): a check reports it as not attempted.
PLACEHOLDER: Any = Ellipsis


def unanswered(answer: Any) -> bool:
    """Is ``answer`` no answer yet (:data:`MISSING` or the stub's :data:`PLACEHOLDER`)?"""
    return answer is MISSING or answer is PLACEHOLDER


@contextlib.contextmanager
def quiet() -> Iterator[None]:
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


def run_case(ex: Exercise, answer: Any, c: Case, timeout: float | None) -> dict:
    """``answer``'s outcome on case ``c``, with what it left behind of what it was handed."""
    args, kwargs = c.materialize()
    watched = snapshot(_parameter_names(ex), args, kwargs)
    return _attempt(lambda: _call(ex, answer, args, kwargs), timeout, watched, ex.may_leave)


#: The ``left`` entry of an answer whose second call on the first case gave another outcome.
KEEPS_STATE = (
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
    if unanswered(answer):
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
        outcomes.append(run_case(ex, answer, c, timeout))
    run_again(ex, answer, outcomes[0], timeout)
    return outcomes


def run_again(ex: Exercise, answer: Any, first: dict, timeout: float | None) -> None:
    """Run the first case once more: an answer that gives another outcome then keeps state
    between calls (``first`` gets a ``left`` entry that says so)."""
    if ex.repeatable and first["kind"] in ("value", "raised") and "left" not in first:
        again = run_case(ex, answer, ex.all_cases[0], timeout)  # the same call, once more
        if not same(again, first, ex.rtol, ex.atol)[0]:
            first["left"] = [list(KEEPS_STATE)]


def case_outcome(ex: Exercise, answer: Any, index: int, timeout: float | None) -> dict:
    """The outcome of case ``index`` alone (the first case run twice, as in :func:`outcomes_of`)."""
    out = run_case(ex, answer, ex.all_cases[index], timeout)
    if index == 0:
        run_again(ex, answer, out, timeout)
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


def memoized(key: tuple, ex: Exercise, compute: Callable[[], Any]) -> Any:
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


def remembered_for(*exercise_ids: str, besides: tuple = ()) -> Callable[[Callable], Callable]:
    """A decorator for a lesson's case runner ``run(answer, *case)``: for our own answers to
    ``exercise_ids`` (each one's solution, oracle, known wrong and right answers, looked up when
    first needed, once they are registered), less ``besides`` (answers that leave something
    behind, so must run every time), each case runs once per process and every call gets a copy
    of its outcome; any other answer, the learner's, runs every time."""

    @functools.cache
    def known() -> tuple:
        found = []
        for exercise_id in exercise_ids:
            ex = get(exercise_id)
            found += [
                a for a in (ex.solution, ex.oracle, *(w.answer for w in ex.wrong), *ex.right) if a is not None
            ]
        return tuple(a for a in found if not any(a is b for b in besides))

    def decorate(run: Callable) -> Callable:
        @functools.cache
        def kept(answer: Any, case: tuple) -> Any:
            return run(answer, *case)

        @functools.wraps(run)
        def remembered(answer: Any, *case: Any) -> Any:
            if not any(answer is k for k in known()):
                return run(answer, *case)
            return copy.deepcopy(kept(answer, case))

        return remembered

    return decorate


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
    return copy.deepcopy(memoized(("expected",), ex, lambda: _expected_outcomes(ex)))


def _expected_outcomes(ex: Exercise) -> list[dict]:
    with quiet():
        if ex.kind == "predict":
            out = _attempt(ex.oracle)
            if out["kind"] == "raised":
                out = {"kind": "value", "value": {"exception": out["type"]}}
            return [out]
        return outcomes_of(ex, ex.oracle if ex.oracle is not None else ex.solution)


def measure_cost(ex: Exercise, answer: Any, timeout: float | None = None) -> dict[str, float]:
    """The largest value of each cost figure over all cases ({} when not cost-graded or when
    the answer raises while measuring)."""
    if ex.cost is None or unanswered(answer):
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
