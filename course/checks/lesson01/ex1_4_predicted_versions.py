"""Exercise 1.4, predict the version counters: the program torch runs for the truth, the prediction's
right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.autograd.graph import increment_version
from course.checks import predict, wrong
from course.checks.solutions.lesson01 import predicted_versions


def _version_program():
    """The program of exercise 1.4, run by torch: the counters of a tensor, a view, a copy."""
    t = torch.zeros(3)
    t.add_(1)
    u = t[:2]  # a view
    u.mul_(2)
    v = t * 1
    with torch.no_grad():
        t.zero_()
    increment_version(v)
    return (t._version, u._version, v._version)


predict(
    "1.4",
    name="predicted_versions",
    title="Predict the version counters of a tensor, its view and a copy",
    truth=_version_program,
    solution=predicted_versions,
    right=[[3, 3, 1], torch.tensor([3, 3, 1])],
    wrong=[
        wrong(
            (2, 1, 1),
            "a view shares its base's version counter: u.mul_(2) bumps t too, and "
            "t.zero_() bumps u (they are the same memory).",
        ),
        wrong(
            (2, 2, 1),
            "torch.no_grad() stops recording the graph, not version counting: t.zero_() "
            "still bumps the counter.",
        ),
        wrong(
            (3, 3, 3),
            "t * 1 is a new tensor with its own counter, starting at 0; only increment_version(v) bumps it.",
        ),
        wrong(
            (3, 3, 0),
            "increment_version(v) bumps v's counter by one, just like an in-place op would.",
        ),
        wrong(
            (4, 4, 1),
            "making a view (t[:2]) does not change the memory, so it does not bump the counter.",
        ),
        wrong(
            torch.tensor([True, True, True]),
            "a version counter is a count (an int), not a yes/no: write three ints.",
        ),
    ],
    hint="count the in-place ops (add_, mul_, zero_) and increment_version calls that touch "
    "each tensor's memory; a view shares its base's counter, a new tensor starts at 0.",
)
