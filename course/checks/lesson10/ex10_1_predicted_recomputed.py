"""Exercise 10.1, predict what the min-cut partitioner recomputes: the program torch runs for the
truth, the prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import collections

from course.checks import predict, wrong
from course.checks.solutions.lesson10 import (
    predicted_recomputed,
)
from course.content.lesson09 import make_model


def _recomputed_at_budget(budget: float = 0.0):
    """How many addmm and gelu nodes the backward graph of the lesson's model holds, with
    torch's min-cut partitioner at ``activation_memory_budget=budget``."""
    from torch._functorch import config as functorch_config
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    model, x = make_model()
    with functorch_config.patch(activation_memory_budget=budget):
        bw = export_joint(model, (x,), partition_fn=min_cut_rematerialization_partition).bw_module
    ops = collections.Counter(
        n.target.overloadpacket.__name__
        for n in bw.graph.nodes
        if n.op == "call_function" and hasattr(n.target, "overloadpacket")
    )
    return {"addmm": ops["addmm"], "gelu": ops["gelu"]}


predict(
    "10.1",
    name="predicted_recomputed",
    title="Predict: at activation_memory_budget=0, how many addmm and gelu does the backward graph rerun?",
    truth=_recomputed_at_budget,
    solution=predicted_recomputed,
    wrong=[
        wrong(
            {"addmm": 6, "gelu": 3},
            "not every addmm is needed: the last block's second Linear feeds only the output "
            "add, and backward needs neither that add nor the product.",
        ),
        wrong(
            {"addmm": 3, "gelu": 3},
            "the first Linear of blocks 1 and 2 needs its input, the previous block's output "
            "x + down(...): rebuilding it reruns that block's second addmm too.",
        ),
        wrong(
            {"addmm": 0, "gelu": 0},
            "that is budget 1.0 (save what is cheapest to keep). At budget 0 the partitioner "
            "keeps as little as it can and recomputes the rest from the inputs.",
        ),
        wrong(
            {"addmm": 0, "gelu": 3},
            "at budget 0 even the matrix products are recomputed: only the inputs and the "
            "parameters are left to the backward.",
        ),
    ],
    right=[{"gelu": 3, "addmm": 5}],
    hint="list what backward needs for each block (the input of each Linear, the input of "
    "gelu), then trace each one back to the graph's inputs, counting the addmm and gelu on "
    "the way; an op needed twice is recomputed once.",
)
