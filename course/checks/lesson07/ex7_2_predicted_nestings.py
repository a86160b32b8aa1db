"""Exercise 7.2, predict how torch nests descriptors: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.aot import descriptors as cd
from course.checks import predict, wrong
from course.checks.descriptor_answers import read_descriptors
from course.checks.solutions.lesson07 import predicted_nestings
from course.content.lesson07 import NESTING_PROGRAMS
from course.content.zoo import Fn, export_graph_module

#: How the truth of 7.2 finds each named value in its program's graph: the parts its
#: descriptor holds, in no order (so only the nesting is judged), per ``NESTING_PROGRAMS`` entry.
_NESTING_PARTS = [
    ("TangentAOTInput", "InputMutationAOTOutput"),
    ("GradAOTOutput", "PlainAOTInput(idx=1)", "attr='a'"),
    ("InputMutationAOTOutput", "attr='a'"),
    ("TangentAOTInput",),
]


def _nestings_torch_makes():
    """Exercise 7.2's truth: in each program's joint graph, exported by torch, the one
    descriptor that holds every part named (found by its parts, whatever their order)."""
    found = []
    for (fn, make_args, _), parts in zip(NESTING_PROGRAMS, _NESTING_PARTS, strict=True):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            gm = export_graph_module(Fn(fn), make_args())
        descs = [n.meta["desc"] for n in gm.graph.find_nodes(op="placeholder")]
        descs += [d for d in gm.graph.output_node().meta["desc"] if d is not None]
        (match,) = [repr(d) for d in descs if all(p in repr(d) for p in parts)]
        found.append(match)
    return found


_N0 = "TangentAOTInput(output=InputMutationAOTOutput(mutated_input=PlainAOTInput(idx=0)))"
_N1 = "SubclassGetAttrAOTOutput(base=GradAOTOutput(grad_of=PlainAOTInput(idx=1)), attr='a')"
_N2 = "SubclassGetAttrAOTOutput(base=InputMutationAOTOutput(mutated_input=PlainAOTInput(idx=0)), attr='a')"
_N3 = "TangentAOTInput(output=PlainAOTOutput(idx=0))"

predict(
    "7.2",
    name="predicted_nestings",
    title="Predict how torch nests descriptors",
    truth=_nestings_torch_makes,
    solution=predicted_nestings,
    points=2,
    parse=read_descriptors,
    right=[
        [
            "TangentAOTInput(InputMutationAOTOutput(PlainAOTInput(0)))",
            'SubclassGetAttrAOTOutput(GradAOTOutput(PlainAOTInput(1)), "a")',
            "SubclassGetAttrAOTOutput(base = InputMutationAOTOutput(PlainAOTInput(idx=0)), attr = 'a')",
            "TangentAOTInput(PlainAOTOutput(0))",
        ],
        (
            cd.TangentAOTInput(cd.InputMutationAOTOutput(cd.PlainAOTInput(0))),
            cd.SubclassGetAttrAOTOutput(cd.GradAOTOutput(cd.PlainAOTInput(1)), "a"),
            cd.SubclassGetAttrAOTOutput(cd.InputMutationAOTOutput(cd.PlainAOTInput(0)), "a"),
            cd.to_torch(cd.TangentAOTInput(cd.PlainAOTOutput(0))),
        ),
    ],
    wrong=[
        wrong(
            [_N3, _N1, _N2, _N3],
            "h's new value is an output of its own (functionalization, stage 2, returns it), "
            "and it can carry a gradient: its tangent wraps that InputMutationAOTOutput, not "
            "the user's output.",
        ),
        wrong(
            [_N0.replace("idx=0", "idx=1"), _N1, _N2, _N3],
            "h is input 0 and w input 1: the mutated input is the one written in place.",
        ),
        wrong(
            [
                _N0,
                "GradAOTOutput(grad_of=SubclassGetAttrAOTInput(base=PlainAOTInput(idx=1), attr='a'))",
                _N2,
                _N3,
            ],
            "autograd (stage 3) differentiates with respect to the whole TwoTensor t; only "
            "afterwards does the subclass stage (4) split each value into its inner tensors. "
            "So the inner tensor wraps the grad, not the other way round.",
        ),
        wrong(
            [_N0, _N1.replace("AOTOutput(base=Grad", "AOTInput(base=Grad"), _N2, _N3],
            "a grad is an output of the graph, so its inner tensor is an output too: "
            "SubclassGetAttrAOTOutput (the *Input class wraps placeholders).",
        ),
        wrong(
            [
                _N0,
                _N1,
                "InputMutationAOTOutput(mutated_input=SubclassGetAttrAOTInput(base=PlainAOTInput(idx=0), attr='a'))",
                _N3,
            ],
            "functionalization (stage 2) sees t as one tensor and returns its new value; "
            "the subclass stage (4) comes later and splits that value into 'a' and 'b'. "
            "The later stage is the outer wrapper.",
        ),
        wrong(
            [_N0, _N1, _N2, "TangentAOTInput(output=PlainAOTOutput(idx=1))"],
            "the token is not one of the user's outputs: PlainAOTOutput(idx=k) counts what "
            "the program returns, and the token is ForwardTokenAOTOutput, a stage-5 leaf.",
        ),
        wrong(
            [_N0, _N1, _N2, "TangentAOTInput(output=ForwardTokenAOTOutput(idx=0))"],
            "a token carries no gradient, so it gets no tangent: the only tangent is for the sin.",
        ),
    ],
    hint="build each descriptor from the inside out: start from the plain input or output the "
    "value comes from (stage 1), then wrap it once for each later stage that made it (views "
    "and mutations 2, autograd 3, subclasses 4); the stage that ran last is the outermost.",
)
