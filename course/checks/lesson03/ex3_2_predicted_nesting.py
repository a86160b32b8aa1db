"""Exercise 3.2, predict which hooks run when they nest: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.autograd.saved_tensors import saved_tensors_hooks
from course.checks import predict, wrong
from course.checks.solutions.lesson03 import predicted_nesting


def _nested_program(hooks_cls=saved_tensors_hooks) -> dict:
    """The program of exercise 3.2: (packs, unpacks) of each of three pairs of hooks."""
    calls = {name: [0, 0] for name in ("outer", "inner", "backward")}

    def hooks(name):
        def pack(t):
            calls[name][0] += 1
            return t.detach()

        def unpack(t):
            calls[name][1] += 1
            return t

        return hooks_cls(pack, unpack)

    x = torch.ones(2, requires_grad=True)
    with hooks("outer"):
        a = x.exp()  # saves a
        with hooks("inner"):
            b = a * x  # saves a and x
            c = b.sin()  # saves b
        d = c * c  # saves c, twice
    with hooks("backward"):
        d.sum().backward()  # runs no op that saves (no create_graph)
    return {name: tuple(counts) for name, counts in calls.items()}


predict(
    "3.2",
    name="predicted_nesting",
    title="Predict which hooks run when they nest",
    truth=_nested_program,
    solution=predicted_nesting,
    points=1,
    wrong=[
        wrong(
            {"outer": (6, 6), "inner": (3, 3), "backward": (0, 0)},
            "hooks do not chain: inside the inner block only the inner pair runs, the outer "
            "pack does not run as well.",
        ),
        wrong(
            {"outer": (6, 6), "inner": (0, 0), "backward": (0, 0)},
            "the innermost pair wins, not the outermost: a with-block pushes its pair on top "
            "of a stack, and only the top pair is called.",
        ),
        wrong(
            {"outer": (3, 0), "inner": (3, 0), "backward": (0, 6)},
            "a saved value is unpacked by the unpack hook of the pair that packed it (stored "
            "with it), whatever pair is active when backward runs.",
        ),
        wrong(
            {"outer": (2, 2), "inner": (3, 3), "backward": (0, 0)},
            "c * c saves c twice, as self and as other: two savings, two packs.",
        ),
    ],
    right=[{"backward": [0, 0], "inner": [3, 3], "outer": [3, 3]}],
    hint="list what each op saves and under which with-block it ran; the innermost active "
    "pair packs, and the pair that packed a value unpacks it.",
)
