"""Exercise 6.2, predict which outputs get a tangent: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import numpy

from course.checks import predict, wrong
from course.checks.solutions.lesson06 import predicted_tangent_mask
from course.content.lesson06 import FiveOutputs, five_outputs_args, seeded
from course.content.zoo import export_graph_module


def _five_outputs_tangent_mask():
    """Exercise 6.2's program, run by torch: per output, does the joint take a tangent for it?"""
    gm = export_graph_module(*seeded(FiveOutputs, five_outputs_args))
    with_tangent = {
        repr(n.meta["desc"].output)
        for n in gm.graph.find_nodes(op="placeholder")
        if type(n.meta["desc"]).__name__ == "TangentAOTInput"
    }
    return [f"PlainAOTOutput(idx={i})" in with_tangent for i in range(5)]


predict(
    "6.2",
    name="predicted_tangent_mask",
    title="Predict which outputs get a tangent",
    truth=_five_outputs_tangent_mask,
    solution=predicted_tangent_mask,
    wrong=[
        wrong(
            [True] * 5,
            "a tangent is d loss / d output, fed back into the backward: only an "
            "output that can carry a gradient gets one (it requires grad, is a float, and is "
            "not an alias of an input).",
        ),
        wrong(
            [True, True, False, False, True],
            "x[0] is a view of the input x: torch regenerates it from x outside the graph, so "
            "the joint takes no tangent for it (gradients reach x through the other outputs).",
        ),
        wrong(
            [True, False, True, False, True],
            "argmax returns an integer tensor: nothing can flow back through an integer, so it "
            "gets no tangent.",
        ),
        wrong(
            [True, False, False, True, True],
            "y does not require grad, so y * 2 does not either: no gradient can flow back "
            "through it, and it gets no tangent.",
        ),
        wrong(
            [True, False, False, False, False],
            "(x * y).sum() depends on x, which requires grad: it is a differentiable output "
            "(a 0-d one) and gets a tangent like any other.",
        ),
    ],
    right=[
        (True, False, False, False, True),
        [1, 0, 0, 0, 1],
        numpy.array([True, False, False, False, True]),
    ],
    hint="an output gets a tangent when it requires grad, is a float tensor, and does not alias "
    "an input (or another output).",
)
