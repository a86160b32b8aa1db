"""Exercise 3.1, predict how often pack and unpack run: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.autograd.saved_tensors import saved_tensors_hooks
from course.checks import predict, wrong
from course.checks.solutions.lesson03 import predicted_calls


def _retain_program(hooks_cls=saved_tensors_hooks) -> dict:
    """The program of exercise 3.1: count the hook calls (torch's or course's context manager)."""
    calls = {"pack": 0, "unpack": 0}

    def pack(t):
        calls["pack"] += 1
        return t.detach()

    def unpack(t):
        calls["unpack"] += 1
        return t

    x = torch.ones(3, requires_grad=True)
    with hooks_cls(pack, unpack):
        y = x.exp()  # ExpBackward0 saves its result, y
        z = (y * x).sum()  # MulBackward0 saves y and x; SumBackward0 saves only a size
    z.backward(retain_graph=True)
    z.backward()
    return calls


predict(
    "3.1",
    name="predicted_calls",
    title="Predict how many times pack and unpack run",
    truth=_retain_program,
    solution=predicted_calls,
    points=1,
    wrong=[
        wrong(
            {"pack": 3, "unpack": 3},
            "pack runs once per saving, in forward; but unpack runs every time backward reads "
            "the saved value: each of the two backward passes reads all three.",
        ),
        wrong(
            {"pack": 6, "unpack": 6},
            "pack runs in forward only, when the op saves; backward passes unpack what is "
            "already packed. Two backward passes do not pack again.",
        ),
        wrong(
            {"pack": 2, "unpack": 4},
            "count savings, not tensors: ExpBackward0 saves its result y, and MulBackward0 "
            "saves y again (and x). The same tensor saved by two nodes is packed twice.",
        ),
        wrong(
            {"pack": 4, "unpack": 8},
            "SumBackward0 saves no tensor, only the input's size (its backward expands the "
            "gradient to that size).",
        ),
        wrong(
            RuntimeError,
            "retain_graph=True keeps the saved tensors after the first backward, so the "
            "second one runs (and unpacks again).",
        ),
    ],
    right=[{"unpack": 6, "pack": 3}, {"pack": 3.0, "unpack": 6.0}],
    hint="list the tensors each node saves (exp: its result; mul: both inputs; sum: none), "
    "then remember that pack runs in forward and unpack in every backward that reads them.",
)
