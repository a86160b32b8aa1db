"""Exercise 1.3, predict which in-place op breaks backward: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.checks import predict, wrong
from course.checks.solutions.lesson01 import predicted_breaks
from course.content.lesson01 import INPLACE_PROGRAMS


def _breaks_backward(program) -> bool:
    """Run ``y = program(x)`` and ``y.sum().backward()``; True if backward fails because a
    saved tensor was modified in place (any other error propagates)."""
    x = torch.ones(3, requires_grad=True)
    try:
        program(x).sum().backward()
    except RuntimeError as e:
        if "modified by an inplace operation" in str(e):
            return True
        raise
    return False


def _which_break():
    return {key: _breaks_backward(program) for key, program in INPLACE_PROGRAMS.items()}


_RIGHT_BREAKS = {
    "exp_add": True,  # ExpBackward0 saved its result, which add_ changes
    "double_add": False,  # multiplying by a constant saves no tensor that needs x's grad
    "sigmoid_mul": True,  # SigmoidBackward0 saved its result, which mul_ changes
    "sin_add": False,  # SinBackward0 saved its input x, not its result
    "sin_input_add": True,  # SinBackward0 saved its input a, which add_ then changes
}

predict(
    "1.3",
    name="predicted_breaks",
    title="Predict which in-place op breaks backward",
    truth=_which_break,
    solution=predicted_breaks,
    wrong=[
        wrong(
            dict.fromkeys(_RIGHT_BREAKS, True),
            "an in-place op is harmless to backward unless it changes a tensor some node "
            "saved: x * 2 saves nothing of y, and sin saves its input, not its output.",
        ),
        wrong(
            dict.fromkeys(_RIGHT_BREAKS, False),
            "backward checks the version of every tensor a node saved: exp and sigmoid save "
            "their output y, so y.add_ / y.mul_ changes a saved tensor and backward refuses.",
        ),
        wrong(
            {**_RIGHT_BREAKS, "sin_add": True},
            "sin's derivative is cos(x), so SinBackward0 saves its input x, not its output: "
            "changing y in place is fine (look at y.grad_fn._saved_self).",
        ),
        wrong(
            {**_RIGHT_BREAKS, "sigmoid_mul": False},
            "sigmoid's derivative is sigmoid(x) * (1 - sigmoid(x)): SigmoidBackward0 saves its "
            "output y (look at y.grad_fn._saved_result), so y.mul_(2) changes a saved tensor.",
        ),
        wrong(
            {**_RIGHT_BREAKS, "sin_input_add": False},
            "the saved tensor need not be the output: SinBackward0 saved its input a, and "
            "a.add_(1) bumps a's version, so backward refuses.",
        ),
    ],
    right=[{key: int(breaks) for key, breaks in reversed(_RIGHT_BREAKS.items())}],  # 1 for True
    hint="for each op ask: which tensor did its backward node save (its input, its output, "
    "nothing)? Backward fails only if that tensor was changed in place afterwards.",
)
