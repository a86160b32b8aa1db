"""Exercise 5.4, which writes clone the saved x?: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import numpy
import torch

from course.autograd.graph import increment_version
from course.autograd.mutation import allow_mutation_on_saved_tensors
from course.checks import predict, wrong
from course.checks.solutions.lesson05 import predicted_write_clones
from course.content.lesson05 import SAVED_X_WRITES


def _clones_of_saved_x(write: str, context=allow_mutation_on_saved_tensors) -> int:
    """Run one write of 5.4 inside ``context`` after ``x`` was saved; how many clones it made."""
    w = torch.ones(2, 3, requires_grad=True)
    ns = {
        "torch": torch,
        "increment_version": increment_version,
        "x": torch.arange(6.0).reshape(2, 3),
        "y": torch.zeros(2, 3),
    }
    with torch.enable_grad(), context() as ctx:
        out = (w * ns["x"]).sum()  # MulBackward0 saves x (the grad of w is x)
        exec(write, ns)
        clones = len(ctx.cloned)
        out.backward()
    return clones


def _writes_that_clone():
    """Exercise 5.4's truth: per write, did the course's context clone the saved x?"""
    return [_clones_of_saved_x(write) > 0 for write in SAVED_X_WRITES]


_RIGHT_WRITES = [True, False, True, False, False, True]

predict(
    "5.4",
    name="predicted_write_clones",
    title="Which writes make the context clone the saved x",
    truth=_writes_that_clone,
    solution=predicted_write_clones,
    points=2,
    right=[tuple(_RIGHT_WRITES), [1, 0, 1, 0, 0, 1], [numpy.bool_(v) for v in _RIGHT_WRITES]],
    wrong=[
        wrong(
            [True, True, False, False, False, True],
            "the context does not watch version counters: increment_version(x) moves x's "
            "counter and writes nothing, while x.data shares x's memory with a counter of its "
            "own, so writing it moves nothing on x and still changes what was saved.",
        ),
        wrong(
            [False, False, False, False, False, True],
            "detach() and .data cut autograd's link to x, not the memory: they are x's bytes "
            "under another name, and the dispatch mode sees the write into those bytes.",
        ),
        wrong(
            [True, False, True, False, True, True],
            "torch.mul(x, 2, out=y) reads x and writes y: only an argument marked Tensor(a!) "
            "in the op's schema (self of an in-place op, out=) is written.",
        ),
        wrong(
            [True, False, True, False, False, False],
            "no_grad switches off graph recording, not the dispatch mode: the write still "
            "passes through __torch_dispatch__, which clones x before it.",
        ),
        wrong(
            [True, False, True, True, False, True],
            "x.clone() is new memory: writing it cannot change the saved x, so nothing is cloned.",
        ),
        wrong(
            [True] * 6,
            "the context clones a saved tensor only when an op is about to write into its "
            "memory; reading x, writing other memory or moving a counter clones nothing.",
        ),
    ],
    hint="for each line ask one question: does an op write into the bytes the saved x lives "
    "in? Names, version counters, autograd links and grad mode do not enter into it.",
)
