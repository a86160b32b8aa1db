"""Print a joint graph's calling convention: one line per input and per output.

A joint graph with descriptors says what each placeholder and each output means in
``node.meta["desc"]``. ``format_joint_graph`` lays that out as text a lesson can print
and nbval can compare, the same whether the descriptors are torch's or course's (their
reprs are equal)::

    in  primals_1   ParamAOTInput(target='weight')
    in  tangents_1  TangentAOTInput(output=PlainAOTOutput(idx=0))
    out addmm       PlainAOTOutput(idx=0)
    out t_3         GradAOTOutput(grad_of=ParamAOTInput(target='weight'))
    out None        None

Each line is ``in`` or ``out``, the node name padded to the longest name, then the
descriptor's repr (and, with ``expr=True``, its ``expr()``). Placeholders come first in
graph order, then the output elements in order; an output element with no gradient
(an input that needs none) prints as ``None  None``, exactly as it sits in the graph.
Nothing printed holds a memory address, so the text is stable across runs.

The printout is the course's (torch prints a graph as code, not as a calling convention);
it reads the descriptors torch or :mod:`course.aot.joint` left in ``node.meta["desc"]``.
"""

import contextlib
from typing import Any

import torch
import torch.fx as fx

from course._torch_version import require_supported_torch
from course.aot.fx_utils import as_graph

require_supported_torch("course.aot.printing")

__all__ = ["example_joint_graph", "format_joint_graph"]

_NO_DESC = "(no desc)"


def _rows(graph: fx.Graph) -> list[tuple[str, str, Any]]:
    """(direction, node name, descriptor) for every placeholder and output element."""
    rows = []
    for n in graph.nodes:
        if n.op == "placeholder":
            rows.append(("in", n.name, n.meta.get("desc", _NO_DESC)))
        elif n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (list, tuple)) else [n.args[0]]
            descs = n.meta.get("desc", [_NO_DESC] * len(outs))
            rows += [("out", str(o), d) for o, d in zip(outs, descs)]
    return rows


def format_joint_graph(graph_or_gm: Any, *, expr: bool = False) -> str:
    """A deterministic listing of a joint graph's inputs and outputs with their descriptors.

    Args:
        graph_or_gm: a ``torch.fx.Graph`` or ``GraphModule`` (or torch's
            ``JointWithDescriptors``). Nodes without ``meta["desc"]`` print ``(no desc)``.
        expr: also print each descriptor's ``expr()``, the Python that would fetch it.

    Returns:
        The listing, one line per placeholder and per output element, no trailing newline.

    Raises:
        TypeError: ``graph_or_gm`` is not a graph.

    Example:
        >>> print(format_joint_graph(example_joint_graph(), expr=True))
        in  primals_1   ParamAOTInput(target='weight')                         self.get_parameter('weight')
        in  primals_2   ParamAOTInput(target='bias')                           self.get_parameter('bias')
        in  primals_3   PlainAOTInput(idx=0)                                   args[0]
        in  tangents_1  TangentAOTInput(output=PlainAOTOutput(idx=0))          __output_tangent(output[0])
        out addmm       PlainAOTOutput(idx=0)                                  output[0]
        out t_3         GradAOTOutput(grad_of=ParamAOTInput(target='weight'))  __grad(self.get_parameter('weight'))
        out view        GradAOTOutput(grad_of=ParamAOTInput(target='bias'))    __grad(self.get_parameter('bias'))
        out None        None
    """
    rows = _rows(as_graph(graph_or_gm, "format_joint_graph"))
    name_w = max((len(name) for _, name, _ in rows), default=0)
    desc_w = max((len(repr(d)) for _, _, d in rows), default=0)
    lines = []
    for direction, name, desc in rows:
        text = desc if desc is _NO_DESC else repr(desc)
        line = f"{direction:<3} {name:<{name_w}}  {text}"
        if expr and hasattr(desc, "expr"):
            line = f"{line:<{4 + name_w + 2 + desc_w}}  {desc.expr()}"
        lines.append(line.rstrip())
    return "\n".join(lines)


def example_joint_graph() -> fx.GraphModule:
    """Torch's joint graph of ``nn.Linear(3, 2)`` on an ``x`` of shape (4, 3) without grad.

    The small graph the docstring examples of ``course.aot.fx_utils`` and this module use;
    a fresh one each call (exporting takes a few tens of milliseconds).

    Returns:
        The ``GraphModule`` from ``aot_export_joint_with_descriptors``.

    Example:
        >>> gm = example_joint_graph()
        >>> [n.name for n in gm.graph.find_nodes(op="placeholder")]
        ['primals_1', 'primals_2', 'primals_3', 'tangents_1']
    """
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

    torch.manual_seed(0)
    with contextlib.ExitStack() as stack:
        joint = aot_export_joint_with_descriptors(stack, torch.nn.Linear(3, 2), (torch.randn(4, 3),))
    return joint.graph_module
