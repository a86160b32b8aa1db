"""What lesson 06 runs: the two programs whose joint graphs its predictions are about.

Lesson 06 (solutions/06_joint_graph.ipynb) builds a joint graph by hand, then asks what
torch's exporter makes of two small programs. The notebook prints these programs' code and,
after each prediction, exports them; the checks of exercises 6.2 and 6.3 export the very same
ones, built by :func:`seeded`:

- :class:`FiveOutputs` with :func:`five_outputs_args` (exercise 6.2): five outputs, and not
  every one of them can carry a gradient;
- :class:`Accumulate` with :func:`accumulate_args` (exercise 6.3, and a case of 6.4): a
  buffer updated in place and an input scaled in place by a parameter.

>>> mod, (x, h) = seeded(Accumulate, accumulate_args)
>>> x.requires_grad, h.requires_grad, mod.steps.item()
(True, False, 0)
>>> len(seeded(FiveOutputs, five_outputs_args)[0](*five_outputs_args()))
5

What the exporter gives them, and the wrong guesses people make, live with the exercises in
course/checks/lesson06/.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Accumulate", "FiveOutputs", "accumulate_args", "five_outputs_args", "seeded"]


def seeded(make_module, make_args):
    """``(make_module(), make_args())`` built under seed 0, the caller's RNG state untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return make_module(), make_args()


class FiveOutputs(nn.Module):
    """The program of exercise 6.2: five outputs, and not all of them can carry a gradient."""

    def forward(self, x, y):
        return x.sin(), x[0], x.argmax(), y * 2, (x * y).sum()


def five_outputs_args():
    """Exercise 6.2's inputs: ``x`` requires grad, ``y`` does not."""
    return torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)


class Accumulate(nn.Module):
    """The module of exercise 6.3: a counter buffer, and an input scaled in place by a parameter."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x, h):
        self.steps.add_(1)  # a buffer update, as BatchNorm's num_batches_tracked
        h.mul_(self.w)  # h is an input that needs no grad; it now depends on w
        return (x * h).sin()


def accumulate_args():
    """Exercise 6.3's inputs: ``x`` requires grad, ``h`` does not."""
    return torch.randn(3, requires_grad=True), torch.randn(3)
