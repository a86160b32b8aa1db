"""One snapshot of :func:`course.joint.export_joint`: a named graph and its stable printout.

A :class:`Stage` holds the ``graph_module`` as it was after one step, a sentence saying what
the step did, and ``text``: the graph's Python code followed, once descriptors exist, by a
table of what each placeholder and output means. The text has node names and op names
only (no memory addresses, no timings), so it prints the same on every run::

    == descriptors ==
    node.meta['desc'] on every placeholder, ...
    def forward(self, primals, tangents):
        ...
    # inputs
    #   primals_1: ParamAOTInput(target='weight')
    ...
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.fx as fx

__all__ = ["STAGE_NAMES", "Stage", "make_stage"]

_EXPLAIN = {
    "traced_forward": "make_fx records the aten ops of the functional call; parameters, "
    "buffers and inputs are placeholders; in-place updates (add_, copy_) are still there.",
    "functionalized_forward": "The program traced again under FunctionalTensorMode (stage 1's "
    "graph if it had no in-place op): no mutation is left; each mutated input's new value is "
    "returned first, before the user outputs.",
    "joint_function": "The joint's signature (primals, tangents): one tangent per output "
    "that requires grad and does not alias an input or another output.",
    "traced_joint": "make_fx of joint(primals, tangents): the program traced again (functionalized "
    "if stage 1 had in-place ops), then torch.autograd.grad(outputs, primals that require grad, "
    "tangents), recorded.",
    "descriptors": "node.meta['desc'] on every placeholder, and a list on the output node: "
    "what each input and output means.",
    "partitioned_forward": "The partitioner's forward: primals in; mutations, outputs and the "
    "activations saved for backward (SavedForBackwardsAOTOutput) out.",
    "partitioned_backward": "The partitioner's backward: saved activations and tangents in, "
    "grads out.",
}


@dataclass(frozen=True)
class Stage:
    """One snapshot: ``name``, ``explanation``, ``graph_module`` and its stable ``text``."""

    name: str
    explanation: str
    graph_module: fx.GraphModule
    text: str

    @property
    def graph(self) -> fx.Graph:
        return self.graph_module.graph

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Stage(name={self.name!r}, nodes={len(self.graph.nodes)})"


def _format(name: str, gm: fx.GraphModule, with_descs: bool) -> str:
    """Deterministic text: the graph's code, then the descriptor table (no addresses)."""
    code = "\n".join(line for line in gm.code.strip().splitlines() if line.strip())
    lines = [f"== {name} ==", _EXPLAIN[name], code]
    if with_descs:
        out = gm.graph.output_node()
        lines.append("# inputs")
        lines += [f"#   {n.name}: {n.meta.get('desc')}" for n in gm.graph.find_nodes(op="placeholder")]
        lines.append("# outputs")
        for k, (v, d) in enumerate(zip(out.args[0], out.meta.get("desc", []))):
            lines.append(f"#   {k} {getattr(v, 'name', v)}: {d}")
    return "\n".join(lines)


#: The stages of :func:`course.joint.export_joint`, in the order they are built.
STAGE_NAMES = tuple(_EXPLAIN)


def make_stage(name: str, gm: fx.GraphModule, with_descs: bool = False) -> Stage:
    """Snapshot ``gm`` as stage ``name``; ``with_descs`` adds the descriptor table."""
    return Stage(name, _EXPLAIN[name], gm, _format(name, gm, with_descs))
