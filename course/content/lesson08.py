"""What lesson 08 runs: the capstone's model, its budget and the bytes it saves.

Lesson 08 (solutions/08_capstone.ipynb) fits a training step into a device-memory budget.
The notebook and the checks of exercises 8.1 to 8.4 use the same model, so what the lesson
measures is what the checks judge:

- :class:`Block`, a pre-norm gated-GELU MLP block, and :func:`make_model`, four of them in
  an ``nn.Sequential`` (``block0`` ... ``block3``) with an input batch;
- the lesson's numbers for that model: ``LESSON_LAYER_BYTES`` (what each block saves for
  backward, each storage once, parameters left out), ``LESSON_PARAM_BYTES`` and
  ``LESSON_BUDGET`` (the bytes of device memory the step may use).

>>> model, x = make_model()
>>> [name for name, _ in model.named_children()], tuple(x.shape)
(['block0', 'block1', 'block2', 'block3'], (8, 16))
>>> sum(p.nbytes for p in model.parameters()) == LESSON_PARAM_BYTES
True
>>> LESSON_PARAM_BYTES + sum(LESSON_LAYER_BYTES.values()) - LESSON_BUDGET  # bytes to shed
14208

Everything runs on the CPU: "device memory" is what a GPU would hold; we count bytes, we do
not time copies. The other models the checks run, and the answers, live in
course/checks/lesson08/.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

__all__ = ["LESSON_BUDGET", "LESSON_LAYER_BYTES", "LESSON_PARAM_BYTES", "Block", "make_model"]


class Block(nn.Module):
    """A pre-norm gated-GELU MLP block with a residual: ``x + down(gelu(gate(h)) * up(h))``.

    ``h = norm(x)`` feeds two Linear layers, so both save the same activation ``h``: one
    storage, saved twice.
    """

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.gate = nn.Linear(d, hidden)
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)  # (..., d)
        return x + self.down(nn.functional.gelu(self.gate(h)) * self.up(h))  # (..., d)


def make_model(hidden=(64, 16, 128, 32), d: int = 16, batch=(8,), dtype=torch.float32, seed: int = 0):
    """``(model, x)``: ``block0``, ``block1``, ... of widths ``hidden``, and an input batch."""
    torch.manual_seed(seed)
    blocks = OrderedDict((f"block{i}", Block(d, h)) for i, h in enumerate(hidden))
    model = nn.Sequential(blocks).to(dtype)
    return model, torch.randn(*batch, d, dtype=dtype)


#: The lesson's numbers: exercise 8.1's bytes for make_model(), and the parameter bytes.
LESSON_LAYER_BYTES = {"block0": 9280, "block1": 3136, "block2": 17472, "block3": 5184}
LESSON_PARAM_BYTES = 48768
LESSON_BUDGET = 68 * 1024  # bytes of device memory for parameters and saved activations
