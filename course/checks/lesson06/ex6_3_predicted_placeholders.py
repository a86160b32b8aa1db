"""Exercise 6.3, predict the placeholders: the program torch runs for the truth, the prediction's right
forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

from course.aot import descriptors as cd
from course.checks import predict, wrong
from course.checks.descriptor_answers import descriptor_reprs
from course.checks.solutions.lesson06 import predicted_placeholders
from course.content.lesson06 import Accumulate, accumulate_args, seeded
from course.content.zoo import export_graph_module


def _accumulate_placeholders():
    """Exercise 6.3's program, run by torch: the placeholder descriptors' reprs."""
    gm = export_graph_module(*seeded(Accumulate, accumulate_args))
    return [repr(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")]


_WEIGHT, _STEPS = "ParamAOTInput(target='w')", "BufferAOTInput(target='steps')"
_X, _H = "PlainAOTInput(idx=0)", "PlainAOTInput(idx=1)"
_T_H = "TangentAOTInput(output=InputMutationAOTOutput(mutated_input=PlainAOTInput(idx=1)))"
_T_S = "TangentAOTInput(output=InputMutationAOTOutput(mutated_input=BufferAOTInput(target='steps')))"
_T_OUT = "TangentAOTInput(output=PlainAOTOutput(idx=0))"


def _read_descriptors(answer):
    """6.3's prediction in any spelling: strings with either quotes or extra spaces, or
    course's or torch's descriptor objects, read into the canonical reprs."""
    if not isinstance(answer, (list, tuple)):
        return answer  # judged as it is (and found to be no list)
    reprs = descriptor_reprs(answer)
    if reprs is None:
        unreadable = next(item for item in answer if descriptor_reprs([item]) is None)
        raise ValueError(
            f"{unreadable!r} is not a descriptor; write each placeholder as a "
            "descriptor's repr, such as \"ParamAOTInput(target='w')\", or the object"
        )
    return reprs


def _right_6_3():
    """6.3's answer written three other ways: double quotes and spaces, course's objects,
    torch's objects."""
    spaced = [
        'ParamAOTInput(target="w")',
        'BufferAOTInput( target = "steps" )',
        "PlainAOTInput(0)",
        "PlainAOTInput(idx=1)",
        "TangentAOTInput(InputMutationAOTOutput(PlainAOTInput(1)))",
        "TangentAOTInput(output=PlainAOTOutput(idx=0))",
    ]
    objects = [
        cd.ParamAOTInput("w"),
        cd.BufferAOTInput("steps"),
        cd.PlainAOTInput(0),
        cd.PlainAOTInput(1),
        cd.TangentAOTInput(cd.InputMutationAOTOutput(cd.PlainAOTInput(1))),
        cd.TangentAOTInput(cd.PlainAOTOutput(0)),
    ]
    return [spaced, objects, [cd.to_torch(d) for d in objects]]


predict(
    "6.3",
    name="predicted_placeholders",
    title="Predict the joint's placeholders when inputs are mutated",
    truth=_accumulate_placeholders,
    solution=predicted_placeholders,
    wrong=[
        wrong(
            [_WEIGHT, _STEPS, _X, _H, _T_OUT],
            "h.mul_(self.w) makes h's new value depend on w, so it requires grad: the "
            "mutation is an output (InputMutationAOTOutput) that can carry a gradient, and it "
            "gets a tangent like any other differentiable output.",
        ),
        wrong(
            [_WEIGHT, _STEPS, _X, _H, _T_S, _T_H, _T_OUT],
            "steps is an integer counter (add_(1)): its new value cannot carry a gradient, "
            "so its mutation output gets no tangent (as BatchNorm's running stats).",
        ),
        wrong(
            [_WEIGHT, _STEPS, _X, _H, _T_OUT, _T_H],
            "tangents follow the forward outputs' order, and mutations come first: the "
            "mutated inputs' new values, then the user outputs.",
        ),
        wrong(
            [_WEIGHT, _X, _H, _T_H, _T_OUT],
            "a buffer is an input of the functional program even when forward only updates "
            "it: BufferAOTInput(target='steps'), after the parameters.",
        ),
        wrong(
            [_WEIGHT, _STEPS, _X, _T_H, _T_OUT],
            "h is still an input (PlainAOTInput(idx=1)); mutating it does not remove it, it "
            "adds an output holding its new value.",
        ),
    ],
    parse=_read_descriptors,
    right=_right_6_3(),
    hint="placeholders: parameters, buffers, every user input, then one tangent per forward "
    "output that can carry a gradient, in output order (mutated inputs' new values first).",
)
