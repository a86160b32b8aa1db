"""Exercise 10.3, the budget's knapsack, as torch's solver: how a call is run and observed, the oracle,
the visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import itertools

from course.checks import case, exercise, wrong
from course.checks.solutions.lesson10 import (
    knapsack,
)

#: torch's knapsack items on the lesson's model at budget 0.25 (content's ``knapsack_items``;
#: tests/test_lesson10.py checks that torch still hands these)
LESSON_MEMORY = [0.24806201550387588] * 3 + [0.06201550387596897] * 2
LESSON_RUNTIMES = [16384.0] * 5


def _judge_knapsack(answer, memory, runtimes, max_memory):
    """What a solver's choice is worth: the runtime it keeps, whether it fits, whether every
    item is in one list once, and whether it left the caller's lists as they were."""
    before = (list(memory), list(runtimes))
    saved, recomputed = answer(memory, runtimes, max_memory)
    saved, recomputed = list(saved), list(recomputed)
    return {
        "runtime kept": sum(before[1][i] for i in saved),
        "within max_memory": sum(before[0][i] for i in saved) <= max_memory + 1e-9,
        "every item once": sorted(saved + recomputed) == list(range(len(before[0]))),
        "lists left as they were": (list(memory), list(runtimes)) == before,
    }


def _torchs_dp_knapsack(memory, runtimes, max_memory):
    from torch._functorch._activation_checkpointing.knapsack import dp_knapsack

    _, saved, recomputed = dp_knapsack(memory, runtimes, max_memory)
    return saved, recomputed


def _greedy_by_ratio(memory, runtimes, max_memory):
    order = sorted(range(len(memory)), key=lambda i: runtimes[i] / max(memory[i], 1e-12), reverse=True)
    saved, used = [], 0.0
    for i in order:
        if used + memory[i] <= max_memory:
            saved.append(i)
            used += memory[i]
    return saved, [i for i in range(len(memory)) if i not in saved]


def _smallest_first(memory, runtimes, max_memory):
    saved, used = [], 0.0
    for i in sorted(range(len(memory)), key=lambda i: memory[i]):
        if used + memory[i] <= max_memory:
            saved.append(i)
            used += memory[i]
    return saved, [i for i in range(len(memory)) if i not in saved]


def _strictly_under(memory, runtimes, max_memory):
    best = ((), 0.0)
    for picks in itertools.product((0, 1), repeat=len(memory)):
        chosen = tuple(i for i, p in enumerate(picks) if p)
        if sum(memory[i] for i in chosen) < max_memory:
            kept = sum(runtimes[i] for i in chosen)
            if kept > best[1]:
                best = (chosen, kept)
    return list(best[0]), [i for i in range(len(memory)) if i not in best[0]]


def _saved_and_recomputed_swapped(memory, runtimes, max_memory):
    saved, recomputed = _torchs_dp_knapsack(memory, runtimes, max_memory)
    return recomputed, saved


def _runtimes_scaled_in_place(memory, runtimes, max_memory):
    top = max(runtimes, default=1.0) or 1.0
    runtimes[:] = [r / top for r in runtimes]  # smaller numbers, same choice
    return _strictly_under_or_equal(memory, runtimes, max_memory)


def _strictly_under_or_equal(memory, runtimes, max_memory):
    """Every choice enumerated; the best that fits (a right answer by another route)."""
    best = ((), -1.0)
    for picks in itertools.product((0, 1), repeat=len(memory)):
        chosen = tuple(i for i, p in enumerate(picks) if p)
        if sum(memory[i] for i in chosen) <= max_memory + 1e-12:
            kept = sum(runtimes[i] for i in chosen)
            if kept > best[1]:
                best = (chosen, kept)
    return list(best[0]), [i for i in range(len(memory)) if i not in best[0]]


exercise(
    "10.3",
    name="knapsack",
    title="The budget's knapsack with dp_knapsack's contract: the most runtime saved within max_memory",
    solution=knapsack,
    oracle=_torchs_dp_knapsack,
    run=_judge_knapsack,
    points=2,
    cases=[
        case(
            LESSON_MEMORY, LESSON_RUNTIMES, 0.25, label="torch's items on the lesson's model at budget 0.25"
        ),
        case(LESSON_MEMORY, LESSON_RUNTIMES, 0.1, label="the same items at budget 0.1"),
    ],
    hidden=[
        case([0.6, 0.5, 0.5], [7.0, 5.0, 5.0], 1.0, label="the best ratio first leaves room unused"),
        case([0.1, 0.9], [1.0, 100.0], 0.9, label="the smallest item first crowds out the best"),
        case([0.5, 0.5], [1.0, 1.0], 1.0, label="two items that fill the budget exactly"),
        case([0.0, 0.7], [3.0, 4.0], 0.5, label="an item that takes no memory"),
        case([0.2, 0.3], [5.0, 2.0], 0.0, label="budget 0"),
        case([], [], 0.5, label="no items"),
    ],
    wrong=[
        wrong(
            _greedy_by_ratio,
            "taking items by runtime per byte is torch's greedy_knapsack, not its dp: in a 0-1 "
            "knapsack the best ratio first can leave room that two lesser items would fill "
            "better. Weigh every choice (a table over memory, or every subset).",
        ),
        wrong(
            _smallest_first,
            "the smallest items first keep the most items, not the most runtime: a large item "
            "can be worth more than all the small ones together.",
        ),
        wrong(
            _strictly_under,
            "the saved items may use the whole budget: their memory must be at most "
            "max_memory, not under it.",
        ),
        wrong(
            _saved_and_recomputed_swapped,
            "the first list is what the knapsack keeps (saved), the second what it gives up "
            "(recomputed): yours are the other way round.",
        ),
        wrong(
            _runtimes_scaled_in_place,
            "your choice is right, but the caller's runtimes list changed: torch reads those "
            "lists again after the solver returns. Work on a copy.",
        ),
    ],
    right=[_strictly_under_or_equal],
    hint="a 0-1 knapsack: each item is kept whole or not at all; compare every way of "
    "filling the budget (or build a table of the best runtime per memory used) and keep the best.",
)
