"""Exercise 7.5, predict the outputs of a zoo program: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.aot import descriptors as cd
from course.checks import predict, wrong
from course.checks.descriptor_answers import read_descriptors
from course.checks.solutions.lesson07 import predicted_outputs
from course.content.lesson07 import Logged
from course.content.zoo import export_graph_module


def _logged_outputs():
    """Exercise 7.5's program, run by torch: the output descriptors' reprs, None slots left out."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        gm = export_graph_module(Logged(), (torch.randn(3),))
    return [repr(d) for d in gm.graph.output_node().meta["desc"] if d is not None]


_TOK, _MUT = (
    "ForwardTokenAOTOutput(idx=0)",
    "InputMutationAOTOutput(mutated_input=BufferAOTInput(target='calls'))",
)
_O0, _O1 = "PlainAOTOutput(idx=0)", "PlainAOTOutput(idx=1)"
_IB, _GW = (
    "IntermediateBaseAOTOutput(base_of=PlainAOTOutput(idx=0))",
    "GradAOTOutput(grad_of=ParamAOTInput(target='w'))",
)

predict(
    "7.5",
    name="predicted_outputs",
    title="Predict the output descriptors of a program from the zoo",
    truth=_logged_outputs,
    solution=predicted_outputs,
    parse=read_descriptors,
    right=[
        [
            "ForwardTokenAOTOutput(0)",
            'InputMutationAOTOutput(BufferAOTInput("calls"))',
            "PlainAOTOutput(0)",
            "PlainAOTOutput(1)",
            "IntermediateBaseAOTOutput(PlainAOTOutput(0))",
            'GradAOTOutput(ParamAOTInput("w"))',
        ],
        (
            cd.ForwardTokenAOTOutput(0),
            cd.InputMutationAOTOutput(cd.BufferAOTInput("calls")),
            cd.PlainAOTOutput(0),
            cd.PlainAOTOutput(1),
            cd.IntermediateBaseAOTOutput(cd.PlainAOTOutput(0)),
            cd.GradAOTOutput(cd.ParamAOTInput("w")),
        ),
    ],
    wrong=[
        wrong(
            [_MUT, _O0, _O1, _IB, _GW],
            "aten._print has a side effect and no data dependence: AOTAutograd threads a "
            "token through it, and the new token is an output (the first one).",
        ),
        wrong(
            [_TOK, _MUT, _O0, _O1, _GW],
            "y[:2] and y[1:] are two views of one intermediate: torch also returns their base "
            "(IntermediateBaseAOTOutput) so it can rebuild the views outside the graph (a "
            "single view would need no base).",
        ),
        wrong(
            [_TOK, _O0, _O1, _IB, _GW],
            "self.calls.add_(1) writes a buffer; the exported joint (by default) writes "
            "nothing, so the new value comes back as "
            "InputMutationAOTOutput(mutated_input=BufferAOTInput(target='calls')).",
        ),
        wrong(
            [_TOK, _O0, _O1, _IB, _MUT, _GW],
            "mutations come before the user's outputs (only tokens come earlier).",
        ),
        wrong(
            [_MUT, _O0, _O1, _IB, _GW, _TOK],
            "the forward token comes first, before the mutations and the outputs.",
        ),
        wrong(
            [_TOK, _MUT, _O0, _O1, _IB, _GW, "GradAOTOutput(grad_of=BufferAOTInput(target='calls'))"],
            "a buffer gets no gradient (its grad slot is None, and we left None slots out).",
        ),
        wrong(
            [_TOK, _MUT, _O0, _O1, _IB, _GW, "BackwardTokenAOTOutput(idx=0)"],
            "the print runs in the forward only; the backward has no side effect, so it gets "
            "no token of its own.",
        ),
        wrong(
            [_TOK, _MUT, _O0, _O1, _IB, _GW, "GradAOTOutput(grad_of=PlainAOTInput(idx=0))"],
            "x does not require grad, so its grad slot is None.",
        ),
    ],
    hint="go stage by stage: tokens for side effects (first), then mutated inputs and buffers, "
    "the user's outputs and any base they share, then one grad per input that requires grad.",
)
