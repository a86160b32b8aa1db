"""Exercise 7.1, predict the placeholders: the program torch runs for the truth, the prediction's right
forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

from course.aot import descriptors as cd
from course.checks import predict, wrong
from course.checks.descriptor_answers import read_descriptors
from course.checks.lesson07._shared import joint_case
from course.checks.solutions.lesson07 import predicted_placeholders


def _predict_me_placeholders():
    """Exercise 7.1's program, run by torch: the placeholder descriptors' reprs."""
    _, _, gm = joint_case("predict_me")
    return [repr(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")]


_WEIGHT, _BIAS = "ParamAOTInput(target='lin.weight')", "ParamAOTInput(target='lin.bias')"
_SCALE, _INPUT0, _INPUT1 = "BufferAOTInput(target='scale')", "PlainAOTInput(idx=0)", "PlainAOTInput(idx=1)"
_T0, _T1 = "TangentAOTInput(output=PlainAOTOutput(idx=0))", "TangentAOTInput(output=PlainAOTOutput(idx=1))"

predict(
    "7.1",
    name="predicted_placeholders",
    title="Predict the placeholder descriptors of a small module",
    truth=_predict_me_placeholders,
    solution=predicted_placeholders,
    parse=read_descriptors,
    right=[
        [
            'ParamAOTInput(target="lin.weight")',
            'ParamAOTInput( target = "lin.bias" )',
            'BufferAOTInput("scale")',
            "PlainAOTInput(0)",
            "PlainAOTInput(idx = 1)",
            "TangentAOTInput(PlainAOTOutput(0))",
        ],
        (
            cd.ParamAOTInput("lin.weight"),
            cd.ParamAOTInput("lin.bias"),
            cd.BufferAOTInput("scale"),
            cd.PlainAOTInput(0),
            cd.PlainAOTInput(1),
            cd.TangentAOTInput(cd.PlainAOTOutput(0)),
        ),
        [cd.to_torch(cd.ParamAOTInput("lin.weight")), _BIAS, _SCALE, _INPUT0, _INPUT1, _T0],
    ],
    wrong=[
        wrong(
            [_INPUT0, _INPUT1, _WEIGHT, _BIAS, _SCALE, _T0],
            "the module's own state comes first: parameters, then buffers, and only then the "
            "arguments you pass (x, y), then the tangents.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _SCALE, _INPUT0, _INPUT1, _T0, _T1],
            "out.argmax() is an integer tensor: it can have no gradient, so no tangent is fed "
            "back for it. Only outputs that can carry a gradient get a TangentAOTInput.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _SCALE, _INPUT1, _T0],
            "x needs no grad, but it is still an input of the forward pass: every tensor the "
            "module reads is a placeholder (PlainAOTInput(idx=0)); only its grad output is None.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _INPUT0, _INPUT1, _T0],
            "a buffer is read by forward, so it is an input too: BufferAOTInput(target='scale'), "
            "after the parameters.",
        ),
        wrong(
            [_SCALE, _WEIGHT, _BIAS, _INPUT0, _INPUT1, _T0],
            "the order is parameters, then buffers, then the user's inputs, then tangents.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _SCALE, _INPUT0, _INPUT1],
            "the joint graph runs the backward too, so it takes one tangent (d loss / d output) "
            "per differentiable output, after all the primals.",
        ),
    ],
    hint="placeholders are: parameters, buffers, the user's inputs (all of them), then one tangent "
    "per output that can carry a gradient.",
)
