"""What exercises 8.1 and 8.3 share: the models of their cases, the lesson's and the hidden
ones (``MODELS``).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from course.content.lesson08 import Block, make_model


class SlicingBlock(Block):
    """A block that saves a view smaller than its storage: ``sin`` saves half of ``up(h)``."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(d, hidden)
        self.down = nn.Linear(hidden // 2, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = self.up(self.norm(x))[..., : self.down.in_features]  # a view of half the storage
        return x + self.down(half.sin())


def _sliced_model():
    torch.manual_seed(4)
    return nn.Sequential(OrderedDict(block0=Block(8, 16), block1=SlicingBlock(8, 32))), torch.randn(4, 8)


class ChunkBlock(Block):
    """A block that saves two views of one storage: ``sin`` saves the first half of ``up(h)``,
    ``cos`` the second, whose ``data_ptr()`` is not its storage's."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(d, hidden)
        self.down = nn.Linear(hidden // 2, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = self.up(self.norm(x)).chunk(2, dim=-1)  # two views, offsets 0 and hidden // 2
        return x + self.down(first.sin() * second.cos())


class TanhBlock(Block):
    """A block whose output two blocks save: its own ``tanh`` (which saves its result) and the
    next block's LayerNorm (which saves its input)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(super().forward(x))


def _chunked_model():
    torch.manual_seed(5)
    return nn.Sequential(OrderedDict(block0=Block(8, 24), block1=ChunkBlock(8, 32))), torch.randn(4, 8)


def _shared_output_model():
    torch.manual_seed(6)
    blocks = OrderedDict(block0=TanhBlock(8, 16), block1=Block(8, 40), block2=TanhBlock(8, 8))
    return nn.Sequential(blocks), torch.randn(3, 8)


#: name -> () -> (model, x); the programs exercises 8.1 and 8.3 run.
MODELS = {
    "lesson": make_model,
    "float64": lambda: make_model((24, 40), d=8, batch=(4,), dtype=torch.float64, seed=1),
    "3-d input": lambda: make_model((32, 8, 48), d=12, batch=(2, 5), seed=2),
    "six blocks": lambda: make_model((8, 72, 24, 56, 16, 40), d=8, batch=(6,), seed=3),
    "a saved slice": _sliced_model,
    "two views of one storage": _chunked_model,
    "a storage two blocks save": _shared_output_model,
}
