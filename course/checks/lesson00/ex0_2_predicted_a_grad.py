"""Exercise 0.2, predict a.grad after two backward passes: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.checks import predict, wrong
from course.checks.solutions.lesson00 import predicted_a_grad


def _two_backwards():
    """The program of exercise 0.2, run by torch."""
    a = torch.tensor(2.0, requires_grad=True)
    b = a * 3
    c = b + a
    c.backward(retain_graph=True)
    c.backward()
    return a.grad


predict(
    "0.2",
    name="predicted_a_grad",
    title="Predict a.grad after two backward passes",
    truth=_two_backwards,
    solution=predicted_a_grad,
    right=[8, torch.tensor(8.0)],  # an int for a float, a tensor for a number (docs/authoring.md)
    points=1,
    wrong=[
        wrong(
            4.0,
            "gradients accumulate: the second .backward() adds its gradient to the one the "
            "first pass left in a.grad.",
        ),
        wrong(
            3.0,
            "a reaches c along two paths, through b = a * 3 and directly: one backward pass "
            "adds the slopes of both paths.",
        ),
        wrong(
            6.0,
            "a reaches c directly too (c = b + a): each pass adds that path's slope to the slope through b.",
        ),
        wrong(
            RuntimeError,
            "retain_graph=True keeps the graph's saved tensors after the first pass, so the "
            "second .backward() succeeds; without it, it would raise RuntimeError.",
        ),
        wrong(
            "RuntimeError",
            "retain_graph=True keeps the graph's saved tensors after the first pass, so the "
            "second .backward() succeeds: no error is raised (and an error is written as its "
            "class, RuntimeError, not as a string).",
        ),
        wrong(
            None,
            "a.grad is None only until a backward pass reaches a; here two passes reach it, "
            "and each writes its gradient into a.grad.",
        ),
        wrong(
            [8.0],
            "a.grad has a's shape, and a is a 0-d tensor (one number): write the prediction "
            "as a plain number, not a list or a 1-element tensor.",
        ),
    ],
    hint="count the paths from a to c and remember that .grad accumulates across passes.",
)
