"""Exercise 10.2, predict why min-cut may not recompute each node: the program torch runs for the
truth, the prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import operator

from course.checks import predict, wrong
from course.checks.solutions.lesson10 import (
    predicted_bans,
)
from course.content.lesson10 import (
    ban_reasons,
    flow_graph,
    normed_block,
)

_BAN_OPTIONS = (
    "compute intensive op",
    "random op",
    "reduction op",
    "materialized in backward",
    "not in recomputable allowlist",
    "recomputable",
)


def _forward_ops() -> list:
    """The forward's ops of the block's partition, views and getitem aside."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    model, x = normed_block()
    fw = export_joint(model, (x,), partition_fn=min_cut_rematerialization_partition).fw_module
    return [
        n.name
        for n in fw.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem and not n.target.is_view
    ]


def _bans_without_the_allowlist() -> dict:
    """Torch's reason for each forward op, read from the flow graph min-cut builds with
    ``ban_recompute_not_in_allowlist=False``; "recomputable" where no edge from the source."""
    reasons = ban_reasons(flow_graph(*normed_block(), ban_recompute_not_in_allowlist=False))
    return {name: reasons.get(name, "recomputable") for name in _forward_ops()}


def _read_bans(answer):
    """Read each reason in any case and spacing ("Random op", " reduction  op")."""
    if not isinstance(answer, dict):
        raise ValueError(f"write a dict from each node's name to its reason, not {type(answer).__name__}")
    read = {}
    for key, value in answer.items():
        words = " ".join(value.lower().split()) if isinstance(value, str) else None
        if words not in _BAN_OPTIONS:
            raise ValueError(f"write one of {', '.join(map(repr, _BAN_OPTIONS))} for {key!r}, not {value!r}")
        read[key] = words
    return read


_BANS = {
    "addmm": "compute intensive op",
    "gelu": "recomputable",
    "native_dropout": "random op",
    "pow_1": "recomputable",
    "mean": "reduction op",
    "add": "recomputable",
    "rsqrt": "materialized in backward",
    "mul": "materialized in backward",
    "addmm_1": "compute intensive op",
    "add_1": "materialized in backward",
}

predict(
    "10.2",
    name="predicted_bans",
    title="Predict why torch's min-cut may not recompute each forward node (allowlist rule off)",
    truth=_bans_without_the_allowlist,
    solution=predicted_bans,
    parse=_read_bans,
    options=_BAN_OPTIONS,
    points=2,
    right=[{key: reason.upper() for key, reason in reversed(_BANS.items())}],
    wrong=[
        wrong(
            {
                **_BANS,
                "addmm": "not in recomputable allowlist",
                "native_dropout": "not in recomputable allowlist",
                "addmm_1": "not in recomputable allowlist",
            },
            "that is the default, with ban_recompute_not_in_allowlist on: the question turns it "
            "off, so the rules for single kinds of op speak instead of the allowlist.",
        ),
        wrong(
            {**_BANS, "gelu": "compute intensive op"},
            "compute intensive is a list of ops (matrix products, convolutions, attention), not "
            "a count of FLOPs: a pointwise op is never on it, however costly its formula.",
        ),
        wrong(
            {**_BANS, "rsqrt": "recomputable", "mul": "recomputable", "add_1": "recomputable"},
            "pointwise ops are cheap to rerun only when the rerun fuses into the backward kernel "
            "that reads them; a value a backward op reads whole (as an input of its own) is "
            "materialized in backward, and rerunning it would cost a kernel of its own.",
        ),
        wrong(
            {**_BANS, "mean": "recomputable"},
            "a reduction's output is much smaller than its input (here 64 times): min-cut keeps "
            "it rather than rerun the reduction, whenever the output is 4 times smaller or more.",
        ),
        wrong(
            {**_BANS, "native_dropout": "recomputable"},
            "a random op rerun draws new random numbers: backward would see another mask than "
            "forward used. Random ops are banned from recomputation.",
        ),
    ],
    hint="ask each node the questions in their order (MUST_SAVE, view, random, compute "
    "intensive, materialized in backward, reduction): the first that holds is its reason.",
)
