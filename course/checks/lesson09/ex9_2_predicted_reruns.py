"""Exercise 9.2, predict what the recomputation reruns: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

from torch.utils.checkpoint import (
    checkpoint,
)

from course.checks import predict, wrong
from course.checks.solutions.lesson09 import (
    predicted_reruns,
)
from course.content.lesson09 import (
    PROGRAMS,
    backward_counts,
    plain_backward_counts,
)

PREDICTED_OPS = ("addmm", "gelu", "sum")


def _rerun_in_backward():
    """How many more times addmm, gelu and sum run in backward under torch's checkpoint
    (non-reentrant, early stop on, the default) than in a plain backward, for ``block``."""
    fn, args, leaves = PROGRAMS["block"]()
    _, bwd, _, _ = backward_counts(fn, args, leaves, lambda f, a: checkpoint(f, *a, use_reentrant=False))
    extra = bwd - plain_backward_counts("block")
    return {op: extra[op] for op in PREDICTED_OPS}


predict(
    "9.2",
    name="predicted_reruns",
    title="Predict: which of block's forward ops does backward rerun under checkpoint, and how often?",
    truth=_rerun_in_backward,
    solution=predicted_reruns,
    wrong=[
        wrong(
            {"addmm": 0, "gelu": 0, "sum": 0},
            "checkpoint kept none of block's activations: backward has to make them again, "
            "by running forward ops a second time.",
        ),
        wrong(
            {"addmm": 2, "gelu": 1, "sum": 1},
            "the recomputation stops early: once every tensor forward saved has been saved "
            "again, torch stops the rerun. sum saves no tensor; is the last addmm needed?",
        ),
        wrong(
            {"addmm": 2, "gelu": 1, "sum": 0},
            "close: the rerun stops at the moment the last saved tensor is saved again, and an "
            "op saves its inputs before its kernel runs. Ask of the last op that saves something "
            "whether its kernel has to run for its saves to happen.",
        ),
        wrong(
            {"addmm": 1, "gelu": 0, "sum": 0},
            "the second Linear saves gelu's output, and gelu saves its input: both must be "
            "recomputed, so gelu reruns too.",
        ),
    ],
    right=[{"sum": 0, "gelu": 1, "addmm": 1}],
    hint="list what each op of block saves, then rerun the forward in your head and stop as "
    "soon as the last of those has been saved again.",
)
