"""What lesson 07 runs: the modules and programs its predictions are about.

Lesson 07 (solutions/07_descriptors.ipynb) reads joint graphs through their descriptors. The
notebook prints the code of these programs before each prediction and exports them after
it; the checks of exercises 7.1, 7.2 and 7.5 export exactly these, with torch's exporter:

- :class:`PredictMe` (exercise 7.1): a Linear, a buffer, and an integer second output;
- ``NESTING_PROGRAMS`` (exercise 7.2): four small functions, each with one value of its
  joint graph named in words, ``(function, () -> its inputs, the value named)``;
- :class:`Logged` (exercise 7.5, and a case of exercise 6.4): a counter buffer, a print and
  two overlapping views of one intermediate.

>>> [fn.__name__ for fn, _, _ in NESTING_PROGRAMS]
['scale_in_place', 'times_two_tensor', 'two_tensor_in_place', 'printed_sin']
>>> h, w = NESTING_PROGRAMS[0][1]()
>>> h.requires_grad, w.requires_grad
(False, True)

The descriptor zoo (the smallest program for each descriptor class) is course/content/zoo.py;
what torch answers for these programs lives with the exercises, in course/checks/lesson07/.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "NESTING_PROGRAMS",
    "Logged",
    "PredictMe",
    "printed_sin",
    "scale_in_place",
    "times_two_tensor",
    "two_tensor_in_place",
]


class PredictMe(nn.Module):
    """The module of exercise 7.1 (the notebook shows its code, not its joint graph)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x, y):
        out = self.lin(x) * self.scale + y
        return out, out.argmax()


def scale_in_place(h, w):
    """7.2, program 0: an input that needs no grad, scaled in place by one that does."""
    h.mul_(w)
    return w.sin()


def times_two_tensor(x, t):
    """7.2, program 1: a plain tensor times a TwoTensor; both require grad."""
    return x * t


def two_tensor_in_place(t, w):
    """7.2, program 2: a TwoTensor that needs no grad, scaled in place by a tensor that does."""
    t.mul_(w)
    return t.sin()


def printed_sin(x):
    """7.2, program 3: a print (a side effect), then a sin."""
    torch.ops.aten._print("printed_sin")
    return x.sin()


def _two_tensor():
    from torch.testing._internal.two_tensor import TwoTensor

    return TwoTensor(torch.randn(3), torch.randn(3))


#: The programs of exercise 7.2: (program, its inputs, which value the learner names).
NESTING_PROGRAMS = [
    (
        scale_in_place,
        lambda: (torch.randn(3), torch.randn(3, requires_grad=True)),
        "the tangent placeholder fed for h's new value",
    ),
    (
        times_two_tensor,
        lambda: (torch.randn(3, requires_grad=True), _two_tensor().requires_grad_()),
        "the output holding inner tensor 'a' of t's gradient",
    ),
    (
        two_tensor_in_place,
        lambda: (_two_tensor(), torch.randn(3, requires_grad=True)),
        "the output holding inner tensor 'a' of t's new value",
    ),
    (printed_sin, lambda: (torch.randn(3, requires_grad=True),), "the tangent placeholder"),
]


class Logged(nn.Module):
    """The module of exercise 7.5: a counter buffer, a print, and two overlapping views."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls.add_(1)
        torch.ops.aten._print("Logged.forward")
        y = x * self.w
        return y[:2], y[1:]
