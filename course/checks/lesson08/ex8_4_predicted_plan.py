"""Exercise 8.4, recompute, then move: the plan under Inductor's partitioner: the program torch runs
for the truth, the prediction's right forms and the known wrong predictions, each with the hint it
earns.
"""

from __future__ import annotations

import itertools

from course.checks import predict, wrong
from course.checks.solutions.lesson08 import predicted_plan
from course.content.lesson08 import LESSON_BUDGET, LESSON_PARAM_BYTES, make_model


def _not_param_bytes(fw_module) -> int:
    """Bytes of a partitioned forward's saved-for-backward values that are neither parameters
    nor views of them (each node's ``meta["val"]``)."""
    from course.aot.descriptors import ParamAOTInput, SavedForBackwardsAOTOutput, from_torch

    out = fw_module.graph.output_node()
    total = 0
    for node, desc in zip(out.args[0], out.meta["desc"]):
        if not isinstance(from_torch(desc), SavedForBackwardsAOTOutput):
            continue
        base = node
        while base.op == "call_function" and getattr(base.target, "is_view", False):
            base = base.args[0]  # t = aten.t(primals_3): follow the view to what it views
        if not (base.op == "placeholder" and isinstance(from_torch(base.meta["desc"]), ParamAOTInput)):
            total += node.meta["val"].numel() * node.meta["val"].element_size()
    return total


def _plan_under_min_cut():
    """The lesson's model partitioned by torch's ``min_cut_rematerialization_partition``
    (what Inductor uses), block by block: what each block's forward still saves besides
    parameters; then every subset of blocks to offload, the cheapest that fits the budget."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    model, x = make_model()
    saved, h = {}, x
    for name, block in model.named_children():
        fw = export_joint(block, (h,), partition_fn=min_cut_rematerialization_partition).fw_module
        saved[name] = _not_param_bytes(fw)  # the block's input counts: its LayerNorm saves it
        h = block(h).detach()
    must_shed = LESSON_PARAM_BYTES + sum(saved.values()) - LESSON_BUDGET
    subsets = [c for r in range(len(saved) + 1) for c in itertools.combinations(saved, r)]
    cheapest = min(
        (c for c in subsets if sum(saved[n] for n in c) >= must_shed), key=lambda c: sum(saved[n] for n in c)
    )
    return {
        "saved activation bytes": sum(saved.values()),
        "offload": sorted(cheapest),
        "bytes moved": 2 * sum(saved[n] for n in cheapest),
    }


_PLAN_KEYS = ("saved activation bytes", "offload", "bytes moved")


def _read_plan(answer):
    """A plan as ``_plan_under_min_cut`` returns it: the blocks to offload as a sorted list,
    however the learner wrote the collection (a set, a list, a tuple)."""
    if not isinstance(answer, dict):
        raise ValueError(f"write a dict with the keys {', '.join(map(repr, _PLAN_KEYS))}")
    plan = dict(answer)
    blocks = plan.get("offload")
    if isinstance(blocks, str) or not isinstance(blocks, (set, frozenset, list, tuple, type(None))):
        raise ValueError(
            "write the blocks to offload as a set of names, like {'blockN', ...} (set() for none)"
        )
    if blocks is not None:
        if not all(isinstance(b, str) for b in blocks):
            raise ValueError("name each block to offload as a string, like 'blockN'")
        plan["offload"] = sorted(blocks)
    return plan


# The catalogue writes each set of blocks as a list in block order (a set's repr, and so
# docs/exercises.md, would depend on the hash seed); _read_plan reads either the same way.
_EAGER_PLAN = {"saved activation bytes": 35072, "offload": ["block0", "block3"], "bytes moved": 28928}

predict(
    "8.4",
    name="predicted_plan",
    title="Predict the budget plan once the partitioner recomputes every GELU: what is saved, what moves, at what cost",
    truth=_plan_under_min_cut,
    solution=predicted_plan,
    parse=_read_plan,
    points=2,
    wrong=[
        wrong(
            _EAGER_PLAN,
            "that is eager's plan (and default_partition's): with the GELU outputs recomputed "
            "in backward, the forward no longer saves them, so each block hands backward "
            "fewer bytes, and the budget is short by less.",
        ),
        wrong(
            {**_EAGER_PLAN, "saved activation bytes": 27392},
            "the saved bytes are right, but the plan is eager's: with smaller blocks and a "
            "smaller gap to close, the cheapest set of blocks that covers it is another one. "
            "Work out the gap again (parameters + saved - budget) and try the subsets again.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block0", "block3"], "bytes moved": 22784},
            "block0 and block3 cover the gap, but they are no longer the cheapest choice: "
            "compare every subset's bytes with the new gap.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block1", "block3"], "bytes moved": 6784},
            "every offloaded byte crosses the link twice: to the host in forward and back in backward.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": set(), "bytes moved": 0},
            "recomputing shrinks the activations, but the parameters are still on the device: "
            "parameters plus what the forward saves must fit the budget, and they do not yet.",
        ),
        wrong(
            {"saved activation bytes": 19712, "offload": set(), "bytes moved": 0},
            "to recompute GELU's output in backward, the backward needs GELU's input, the "
            "gate's output: it stays saved (GELU's own backward needs it too). Only the "
            "output leaves the saved set.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block2"], "bytes moved": 26752},
            "largest-first again: block2 alone covers the gap but moves far more than "
            "needed. The cost is bytes over the link; try every subset.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block0"], "bytes moved": 14464},
            "one block is fewer copies, but the cost is bytes: a set of smaller blocks may "
            "cover the gap with fewer bytes than one larger block.",
        ),
    ],
    right=[
        {"offload": ["block3", "block1"], "bytes moved": 13568.0, "saved activation bytes": 27392},
        {"saved activation bytes": 27392, "offload": ("block1", "block3"), "bytes moved": 2 * 6784},
    ],
    hint="three steps, as a budget pass would take them: what the forward still saves once "
    "the GELU outputs are recomputed (each is a (batch, hidden) float32 tensor), how far "
    "parameters plus that are over the budget, and the cheapest set of blocks that covers "
    "the gap, each offloaded byte going out and coming back.",
)
