"""``checkpoint_sequential``: a sequence of layers cut into segments, each segment checkpointed.

A sequential model is a chain: the output of one layer is the input of the next. Cut the chain
into ``segments`` pieces of ``len(functions) // segments`` layers; every piece but the last runs
under :func:`course.autograd.checkpoint.checkpoint`, so it keeps only its own input for
backward and recomputes the rest; the last piece runs plainly (backward needs it first, so
recomputing it would only cost time)::

    checkpoint_sequential(model, 2, x, use_reentrant=False)   # OK: torch's signature
    # layers 0..k-1 checkpointed (keeps x), layers k..n-1 run as usual, k = n // 2
    checkpoint_sequential(model, 2, x)                        # OK, with a warning: torch's
                                                              # reentrant checkpoint runs

When ``len(functions)`` is not a multiple of ``segments``, the remainder goes to the last,
plain piece: with 5 layers and 2 segments, layers 0-1 are checkpointed and 2-4 are not.

>>> import torch
>>> layers = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
>>> x = torch.ones(2, 3, requires_grad=True)
>>> out = checkpoint_sequential(layers, 2, x, use_reentrant=False)
>>> type(out.grad_fn).__name__
'AddmmBackward0'
>>> ours = torch.autograd.grad(out.sum(), x)[0]
>>> torch.allclose(ours, torch.autograd.grad(layers(x).sum(), x)[0])
True

What is ours and what is torch's: the segmenting is written here, as torch writes it in
``torch/utils/checkpoint.py``; each segment runs under the course's non-reentrant
``checkpoint`` (``use_reentrant=False``), or under torch's reentrant one (``True``, or omitted).

Differences from torch: the warning for an omitted ``use_reentrant`` is worded in our words
(same category, ``UserWarning``), and so is the ``ValueError`` for an unknown keyword argument.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from course.autograd.checkpoint import checkpoint

__all__ = ["checkpoint_sequential"]


def _run_function(start: int, end: int, functions: Sequence[Callable]) -> Callable:
    """The layers ``start`` to ``end`` (both included), as one function of one input."""

    def forward(input):
        for j in range(start, end + 1):
            input = functions[j](input)
        return input

    return forward


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs: Any):
    """Run ``functions`` one after the other on ``input``, checkpointing all segments but the last.

    Args:
        functions: an ``nn.Sequential``, or a list of modules or functions of one tensor.
        segments: how many pieces to cut the chain into.
        input: the tensor the first function takes.
        use_reentrant: ``False`` for the course's non-reentrant checkpoint; ``True`` (or
            omitted, with a warning) for torch's reentrant one.
        preserve_rng_state: keyword only, default True: restore the RNG state for the rerun.

    Returns:
        What the last function returns.

    Raises:
        ValueError: on any other keyword argument.
    """
    if use_reentrant is None:
        warnings.warn(
            "course.checkpoint.checkpoint_sequential: pass use_reentrant explicitly; without it "
            "torch's reentrant checkpoint runs (use_reentrant=False is the one the course rebuilds "
            "and the one torch recommends).",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("unexpected keyword arguments for checkpoint_sequential: " + ",".join(kwargs))
    if isinstance(functions, torch.nn.Sequential):
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1  # the last layer checkpointed so far
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(
            _run_function(start, end, functions),
            input,
            use_reentrant=use_reentrant,
            preserve_rng_state=preserve,
        )
    return _run_function(end + 1, len(functions) - 1, functions)(input)  # the last piece runs plainly
