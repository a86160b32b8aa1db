"""Find parameters, inputs, outputs and their grads and tangents in a joint graph.

What is ours and what is torch's: the nine functions are re-implemented here in plain
Python over ``torch.fx`` (as torch's ``torch._functorch._aot_autograd.fx_utils`` is, torch
2.13), with torch's names, signatures and results; the two error messages about tensor
subclasses are torch's, word for word, because tests compare them with torch's. A joint
graph with descriptors (from torch's ``aot_export_joint_with_descriptors`` or
``course.aot.joint.export_joint``) has no fixed calling convention: the meaning of each
placeholder is in ``node.meta["desc"]`` and the meaning of each output in the output
node's ``meta["desc"]`` list. These nine functions read those descriptors and pair up:

* every forward input with the grad the backward computes for it
  (``get_all_input_and_grad_nodes``, ``get_param_and_grad_nodes``,
  ``get_plain_input_and_grad_nodes``), keyed by the input's descriptor;
* every forward output with the tangent fed into the backward for it
  (``get_all_output_and_tangent_nodes``, ``get_plain_output_and_tangent_nodes``);
* parameters and buffers by fully qualified name (``get_named_param_nodes``,
  ``get_named_buffer_nodes``) or in calling order (``get_param_nodes``,
  ``get_buffer_nodes``).

On the joint graph of ``nn.Linear(3, 2)`` called on an ``x`` that does not require
grad, in repr notation::

    ParamAOTInput(target='weight') -> (primals_1, t_3)      # the grad output node
    ParamAOTInput(target='bias')   -> (primals_2, view)
    PlainAOTInput(idx=0)           -> (primals_3, None)     # x needs no grad
    PlainAOTOutput(idx=0)          -> (addmm, tangents_1)   # output and its tangent
    TangentAOTInput(output=...)    -> (tangents_1, None)    # tangents count as inputs too

The pairing is 1-1 only without tensor subclasses: a subclass input is flattened into
several plain placeholders (``SubclassGetAttrAOTInput``), and its tangent may flatten
differently, so every function raises ``RuntimeError`` on a graph that has such inner
tensors (``SubclassGetAttrAOTInput`` or ``SubclassGetAttrAOTOutput``). The subclass's
outer sizes and strides (``SubclassSizeAOTInput``, ``SubclassStrideAOTOutput``, ...)
are SymInts, not tensors: no function pairs them, so like torch we let them pass.

Differences from torch
----------------------

* Torch documents ``RuntimeError`` for a graph with subclass inputs *or* outputs, but its
  checks are narrower: its input/grad functions only look at subclass outputs and the
  others only at subclass inputs (a ``SubclassGetAttrAOTInput`` is not differentiable, so
  the input/grad loop skips it before checking). We follow the documentation: every
  function scans all placeholders and outputs first and raises on the first
  ``SubclassGetAttrAOTInput`` / ``SubclassGetAttrAOTOutput`` in graph order (the same
  two classes torch raises for). The message is torch's; the node it names may differ
  from the one torch names.
* ``node.meta["desc"]`` may hold torch's descriptors or course's; returned keys are always
  course descriptors (their repr equals torch's). A course descriptor equals its torch
  twin, so ``result[torch_desc]`` finds the entry too.
* A ``GraphModule`` (or torch's ``JointWithDescriptors``) is accepted as well as a
  ``Graph``; anything else is a ``TypeError``. A graph without descriptors raises
  ``ValueError`` saying how to make one (torch raises ``KeyError`` or ``AssertionError``).
"""

from typing import Any, NoReturn

import torch.fx as fx

from course._torch_version import require_supported_torch
from course.aot.descriptors import (
    AOTInput,
    AOTOutput,
    BufferAOTInput,
    DifferentiableAOTInput,
    DifferentiableAOTOutput,
    GradAOTOutput,
    ParamAOTInput,
    PlainAOTInput,
    PlainAOTOutput,
    SubclassGetAttrAOTInput,
    SubclassGetAttrAOTOutput,
    TangentAOTInput,
    from_torch,
)

require_supported_torch("course.aot.fx_utils")

__all__ = [
    "get_all_input_and_grad_nodes",
    "get_all_output_and_tangent_nodes",
    "get_buffer_nodes",
    "get_named_buffer_nodes",
    "get_named_param_nodes",
    "get_param_and_grad_nodes",
    "get_param_nodes",
    "get_plain_input_and_grad_nodes",
    "get_plain_output_and_tangent_nodes",
]

# The inner tensors of a subclass, the only descriptors torch refuses (sizes and strides
# of a subclass are SymInts, which no function here pairs with anything).
_SUBCLASS_DESCS = (SubclassGetAttrAOTInput, SubclassGetAttrAOTOutput)

# ---- reading descriptors -----------------------------------------------------------------


def as_graph(g: Any, api: str) -> fx.Graph:
    """The fx.Graph inside ``g`` (a Graph, a GraphModule or a JointWithDescriptors)."""
    if isinstance(g, fx.Graph):
        return g
    if isinstance(g, fx.GraphModule):
        return g.graph
    if isinstance(getattr(g, "graph_module", None), fx.GraphModule):
        return g.graph_module.graph
    raise TypeError(
        f"{api}() expects a joint graph with descriptors (a torch.fx.Graph or GraphModule), "
        f"got {type(g).__name__}"
    )


def _missing_desc(n: fx.Node) -> NoReturn:
    raise ValueError(
        f"node {n} has no meta['desc'], so this is not a joint graph with descriptors. "
        "Make one with torch._functorch.aot_autograd.aot_export_joint_with_descriptors "
        "(its .graph_module) or course.aot.joint.export_joint."
    )


def _input_desc(n: fx.Node) -> AOTInput:
    """The course descriptor of a placeholder."""
    if "desc" not in n.meta:
        _missing_desc(n)
    return from_torch(n.meta["desc"])


def _output_descs(n: fx.Node) -> list[tuple[Any, AOTOutput | None]]:
    """(node, course descriptor) for each element of the output node; None where no grad."""
    if "desc" not in n.meta:
        _missing_desc(n)
    descs = [None if d is None else from_torch(d) for d in n.meta["desc"]]
    return list(zip(n.args[0], descs))


def _check_no_subclasses(g: fx.Graph, raise_fn: Any) -> None:
    # Torch documents this check for every function; see "Differences from torch".
    for n in g.nodes:
        pairs = [(n, _input_desc(n))] if n.op == "placeholder" else []
        pairs += _output_descs(n) if n.op == "output" else []
        for sub_n, sub_desc in pairs:
            if isinstance(sub_desc, _SUBCLASS_DESCS):
                raise_fn(sub_n, sub_desc)


def _raise_autograd_subclass_not_implemented(n: fx.Node, desc: AOTInput | AOTOutput) -> NoReturn:
    # Conformance: torch's message, word for word (tests/test_fx_utils.py compares the two).
    # In short: a subclass splits into several plain tensors, and its primal, tangent and
    # grad may split differently, so "input -> grad" stops being one node to one node.
    raise RuntimeError(
        "Subclasses are currently not supported by this function, but a desugared subclass input "
        f"was found at {n} ({desc}).  The problem is "
        "that there may not necessarily be a 1-1 correspondence between primals/tangents/outputs/grads "
        "when subclasses are involved: for example, the primal might be a plain tensor "
        "but the tangent a tensor subclass that desugared into multiple plain tensors. "
        "It is not clear what exactly you would like this function to do in this case "
        "(Collect all nodes for the subclass together?  Match up the inner nodes if "
        "subclasses match exactly?)  If you have a concrete use case, please file an "
        "issue so we can understand it and design an API that works for your case."
    )


def _raise_fqn_subclass_not_implemented(n: fx.Node, desc: AOTInput | AOTOutput) -> NoReturn:
    # Conformance: torch's message, word for word (tests/test_fx_utils.py compares the two).
    # In short: a subclass parameter splits into several placeholders, so one name (FQN)
    # would have to map to several nodes.
    raise RuntimeError(
        "Subclasses are currently not supported by this function, but a desugared subclass input "
        f"was found at {n} ({desc}).  The problem is "
        "that there may not necessarily be a 1-1 correspondence between a FQN and a plain tensor "
        "when subclasses are involved: for example, a parameter that is a subclass "
        "would desugar into multiple plain tensors, which we can't uniquely assign the "
        "FQN to.  It's not clear what you want the API to do in this case: do you want to "
        "instead return a struct of nodes showing how to assemble the subclass?  But you "
        "don't (directly) have the metadata for the subclass?  If you have a concrete use "
        "case, please file an issue so we can understand it and design an API that works for your case."
    )


def _only(index: dict, kind: type) -> dict:
    """The entries of ``index`` whose descriptor is a ``kind`` (torch's dict comprehension)."""
    return {desc: (n, g) for desc, (n, g) in index.items() if isinstance(desc, kind)}


# ---- pairing inputs with grads and outputs with tangents ---------------------------------


def get_all_input_and_grad_nodes(
    g: fx.Graph,
) -> dict[DifferentiableAOTInput, tuple[fx.Node, fx.Node | None]]:
    """Every differentiable input node and its grad output node (None if it has none).

    *All* forward tensor inputs are returned, non-differentiable ones too (with a None
    grad); symbolic ints, tokens and RNG state are not. Tangents are returned as well:
    ``TangentAOTInput`` is a ``DifferentiableAOTInput`` (it would be, with double backward),
    so filter with :func:`get_plain_input_and_grad_nodes` or ``isinstance`` if you only
    want primals.

    Args:
        g: the joint graph with descriptors (a Graph or GraphModule).

    Returns:
        ``{input descriptor: (input node, grad node or None)}`` in placeholder order.

    Raises:
        RuntimeError: the graph has subclass tensor inputs or outputs.
        TypeError: ``g`` is not a graph. ValueError: ``g`` has no descriptors.

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> for d, (n, grad) in get_all_input_and_grad_nodes(example_joint_graph()).items():
        ...     print(d, n, grad)
        ParamAOTInput(target='weight') primals_1 t_3
        ParamAOTInput(target='bias') primals_2 view
        PlainAOTInput(idx=0) primals_3 None
        TangentAOTInput(output=PlainAOTOutput(idx=0)) tangents_1 None
    """
    g = as_graph(g, "get_all_input_and_grad_nodes")
    _check_no_subclasses(g, _raise_autograd_subclass_not_implemented)
    input_index: dict[DifferentiableAOTInput, tuple[fx.Node, fx.Node | None]] = {}
    for n in g.nodes:
        if n.op == "placeholder":
            desc = _input_desc(n)
            if isinstance(desc, DifferentiableAOTInput):  # skip tokens, seeds, ...
                input_index[desc] = (n, None)
        elif n.op == "output":
            for sub_n, sub_desc in _output_descs(n):
                if isinstance(sub_desc, GradAOTOutput):
                    inp, grad = input_index[sub_desc.grad_of]
                    if grad is not None:
                        raise AssertionError(f"grad already set for {sub_n}, {sub_desc}, {input_index}")
                    input_index[sub_desc.grad_of] = (inp, sub_n)
    return input_index


def get_all_output_and_tangent_nodes(
    g: fx.Graph,
) -> dict[DifferentiableAOTOutput, tuple[fx.Node, fx.Node | None]]:
    """Every differentiable output node and its tangent input node (None if it has none).

    *All* forward tensor outputs are returned, non-differentiable ones too, and so are
    the grad outputs (``GradAOTOutput`` is a ``DifferentiableAOTOutput``), each with no
    tangent.

    Args:
        g: the joint graph with descriptors (a Graph or GraphModule).

    Returns:
        ``{output descriptor: (output node, tangent node or None)}`` in output order.

    Raises:
        RuntimeError: the graph has subclass tensor inputs or outputs.
        TypeError: ``g`` is not a graph. ValueError: ``g`` has no descriptors.

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> for d, (n, tangent) in get_all_output_and_tangent_nodes(example_joint_graph()).items():
        ...     print(d, n, tangent)
        PlainAOTOutput(idx=0) addmm tangents_1
        GradAOTOutput(grad_of=ParamAOTInput(target='weight')) t_3 None
        GradAOTOutput(grad_of=ParamAOTInput(target='bias')) view None
    """
    g = as_graph(g, "get_all_output_and_tangent_nodes")
    _check_no_subclasses(g, _raise_autograd_subclass_not_implemented)
    output_index: dict[DifferentiableAOTOutput, tuple[fx.Node, fx.Node | None]] = {}
    for n in g.nodes:
        if n.op == "output":
            for sub_n, sub_d in _output_descs(n):
                if isinstance(sub_d, DifferentiableAOTOutput):  # skip tokens, None, ...
                    output_index[sub_d] = (sub_n, None)
    for n in g.nodes:
        if n.op == "placeholder":
            desc = _input_desc(n)
            if isinstance(desc, TangentAOTInput):
                out, tangent = output_index[desc.output]
                if tangent is not None:
                    raise AssertionError(f"tangent already set for {n}, {desc}, {output_index}")
                output_index[desc.output] = (out, n)
    return output_index


def get_param_and_grad_nodes(graph: fx.Graph) -> dict[ParamAOTInput, tuple[fx.Node, fx.Node | None]]:
    """Parameter nodes and their grad nodes: :func:`get_all_input_and_grad_nodes` filtered.

    Args:
        graph: the joint graph with descriptors.

    Returns:
        ``{ParamAOTInput: (parameter node, grad node or None)}``.

    Raises:
        RuntimeError: the graph has subclass tensor inputs or outputs.

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> get_param_and_grad_nodes(example_joint_graph())[ParamAOTInput("bias")]
        (primals_2, view)
    """
    graph = as_graph(graph, "get_param_and_grad_nodes")
    return _only(get_all_input_and_grad_nodes(graph), ParamAOTInput)


def get_plain_input_and_grad_nodes(graph: fx.Graph) -> dict[PlainAOTInput, tuple[fx.Node, fx.Node | None]]:
    """Plain (user) input nodes and their grad nodes.

    Args:
        graph: the joint graph with descriptors.

    Returns:
        ``{PlainAOTInput: (input node, grad node or None)}``.

    Raises:
        RuntimeError: the graph has subclass tensor inputs or outputs.

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> get_plain_input_and_grad_nodes(example_joint_graph())
        {PlainAOTInput(idx=0): (primals_3, None)}
    """
    graph = as_graph(graph, "get_plain_input_and_grad_nodes")
    return _only(get_all_input_and_grad_nodes(graph), PlainAOTInput)


def get_plain_output_and_tangent_nodes(
    graph: fx.Graph,
) -> dict[PlainAOTOutput, tuple[fx.Node, fx.Node | None]]:
    """Plain (user) output nodes and their tangent nodes.

    Args:
        graph: the joint graph with descriptors.

    Returns:
        ``{PlainAOTOutput: (output node, tangent node or None)}``.

    Raises:
        RuntimeError: the graph has subclass tensor inputs or outputs.

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> get_plain_output_and_tangent_nodes(example_joint_graph())
        {PlainAOTOutput(idx=0): (addmm, tangents_1)}
    """
    graph = as_graph(graph, "get_plain_output_and_tangent_nodes")
    return _only(get_all_output_and_tangent_nodes(graph), PlainAOTOutput)


# ---- parameters and buffers by name ------------------------------------------------------


def _named_nodes(graph: Any, kind: type, api: str) -> dict[str, fx.Node]:
    g = as_graph(graph, api)
    _check_no_subclasses(g, _raise_fqn_subclass_not_implemented)
    return {
        desc.target: n
        for n in g.nodes
        if n.op == "placeholder"
        for desc in [_input_desc(n)]
        if isinstance(desc, kind)
    }


def get_named_param_nodes(graph: fx.Graph) -> dict[str, fx.Node]:
    """Parameter placeholder nodes keyed by fully qualified name, in calling order.

    Args:
        graph: the joint graph with descriptors.

    Returns:
        ``{FQN: parameter node}``.

    Raises:
        RuntimeError: the graph has subclass tensors (an FQN would name several nodes).

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> get_named_param_nodes(example_joint_graph())
        {'weight': primals_1, 'bias': primals_2}
    """
    return _named_nodes(graph, ParamAOTInput, "get_named_param_nodes")


def get_named_buffer_nodes(graph: fx.Graph) -> dict[str, fx.Node]:
    """Buffer placeholder nodes keyed by fully qualified name, in calling order.

    Args:
        graph: the joint graph with descriptors.

    Returns:
        ``{FQN: buffer node}`` (empty for ``nn.Linear``, which has no buffers).

    Raises:
        RuntimeError: the graph has subclass tensors (an FQN would name several nodes).

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> get_named_buffer_nodes(example_joint_graph())
        {}
    """
    return _named_nodes(graph, BufferAOTInput, "get_named_buffer_nodes")


def get_param_nodes(graph: fx.Graph) -> list[fx.Node]:
    """All parameter nodes, in the order the joint graph takes them (first, before buffers).

    Args:
        graph: the joint graph with descriptors.

    Returns:
        A list of parameter placeholder nodes.

    Raises:
        RuntimeError: the graph has subclass tensors.

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> get_param_nodes(example_joint_graph())
        [primals_1, primals_2]
    """
    return list(_named_nodes(graph, ParamAOTInput, "get_param_nodes").values())


def get_buffer_nodes(graph: fx.Graph) -> list[fx.Node]:
    """All buffer nodes, in the order the joint graph takes them (after parameters).

    Args:
        graph: the joint graph with descriptors.

    Returns:
        A list of buffer placeholder nodes.

    Raises:
        RuntimeError: the graph has subclass tensors.

    Example:
        >>> from course.aot.printing import example_joint_graph
        >>> get_buffer_nodes(example_joint_graph())
        []
    """
    return list(_named_nodes(graph, BufferAOTInput, "get_buffer_nodes").values())
