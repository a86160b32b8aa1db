"""Exercise 2.1, predict the order in which hooks fire: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.checks import predict, wrong
from course.checks.solutions.lesson02 import predicted_order


def _hook_order():
    """The program of exercise 2.1, run by torch: seven hooks, registered in a scrambled
    order; returns their labels in the order they fired."""
    fired = []
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # ExpBackward0
    z = y * 2  # MulBackward0
    z.grad_fn.register_hook(lambda grad_inputs, grad_outputs: fired.append("mul post"))
    y.register_hook(lambda grad: fired.append("y 1"))
    z.grad_fn.register_prehook(lambda grad_outputs: fired.append("mul pre"))
    x.register_hook(lambda grad: fired.append("x"))
    z.register_hook(lambda grad: fired.append("z"))
    y.grad_fn.register_prehook(lambda grad_outputs: fired.append("exp pre"))
    y.register_hook(lambda grad: fired.append("y 2"))
    z.sum().backward()
    return fired


_RIGHT_ORDER = ["z", "mul pre", "mul post", "y 1", "y 2", "exp pre", "x"]

predict(
    "2.1",
    name="predicted_order",
    title="Predict the order in which seven hooks fire",
    truth=_hook_order,
    solution=predicted_order,
    wrong=[
        wrong(
            ["mul post", "y 1", "mul pre", "x", "z", "exp pre", "y 2"],
            "that is the order of registration. Backward fires hooks node by node, from the "
            "output (z's MulBackward0) to the inputs; registration order only matters among "
            "hooks of the same kind on the same tensor or node.",
        ),
        wrong(
            ["mul pre", "z", "mul post", "exp pre", "y 1", "y 2", "x"],
            "tensor hooks on the tensor a node made come first: the node keeps them in a list "
            "of their own (tensor_pre_hooks_), run before its pre-hooks, so 'z' runs before "
            "'mul pre' (and 'y 1', 'y 2' before 'exp pre').",
        ),
        wrong(
            ["z", "mul pre", "y 1", "y 2", "exp pre", "x", "mul post"],
            "a node's post-hook runs right after that node, before the engine moves on to "
            "the next node: 'mul post' comes before y's hooks, not at the end of backward.",
        ),
        wrong(
            ["z", "mul pre", "mul post", "y 2", "y 1", "exp pre", "x"],
            "hooks on the same tensor run in the order they were registered: 'y 1' first.",
        ),
        wrong(
            ["x", "exp pre", "y 1", "y 2", "mul pre", "mul post", "z"],
            "that is the forward order. Backward starts at the output, z, and ends at the leaf x.",
        ),
    ],
    right=[tuple(_RIGHT_ORDER)],  # a tuple for a list (docs/authoring.md, "How answers compare")
    hint="walk backward from z: for each node, the tensor hooks on the tensor it made, then "
    "its pre-hooks, then (after the node runs) its post-hooks; the leaf x comes last.",
)
