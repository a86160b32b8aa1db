"""Exercise 7.4, scale every parameter gradient: how a call is run and observed, the oracle, the
visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import contextlib
import copy
import io

import torch

from course.aot import descriptors as cd
from course.aot import fx_utils as cf
from course.checks import case, exercise, wrong
from course.checks.lesson07._shared import call_joint, is_param_grad, joint_case, tangents_for
from course.checks.solutions.lesson07 import scale_param_grads


def _mul_outputs(gm, factor, pick):
    """Multiply the output positions ``pick(i, node, desc)`` chooses by ``factor``, in the
    graph (the caller recompiles, or forgets to)."""
    out = gm.graph.output_node()
    new_outs = list(out.args[0])
    with gm.graph.inserting_before(out):
        for i, (node, desc) in enumerate(zip(new_outs, out.meta["desc"])):
            if pick(i, node, desc):
                new_outs[i] = gm.graph.call_function(torch.ops.aten.mul.Tensor, (node, factor))
    out.args = (new_outs,)


def _edits_a_copy(gm, factor):
    """BAD: the pass runs on a copy of gm and returns the copy; the caller's gm is as it was."""
    return scale_param_grads(copy.deepcopy(gm), factor)


class _ScaledAfterRunning:
    """The oracle's 'pass': run torch's graph untouched, then scale the param-grad values."""

    def __init__(self, gm, factor):
        self.gm, self.graph, self.factor = gm, gm.graph, factor

    def __call__(self, primals, tangents):
        outs, grads = self.gm(primals, tangents)
        descs = self.graph.output_node().meta["desc"][len(outs) :]
        return outs, tuple(
            g * self.factor if g is not None and is_param_grad(d) else g for g, d in zip(grads, descs)
        )


def _ratio(new, old):
    """How ``new`` relates to torch's unmodified ``old``: the factor if it is a multiple."""
    if new is None or old is None:
        return None if new is old else ("None" if new is None else "a tensor where torch has None")
    new, old = new.double(), old.double()
    if new.shape != old.shape:
        return f"shape {tuple(new.shape)}, torch's {tuple(old.shape)}"
    if not old.any():
        return "zero" if not new.any() else "changed, not a multiple"
    r = float((new * old).sum() / (old * old).sum())  # least-squares factor
    return round(r, 4) if torch.allclose(new, r * old, rtol=1e-4, atol=1e-6) else "changed, not a multiple"


def _run_scaled(answer, name, factor):
    """Per output position: (descriptor, how its value compares with torch's unmodified graph).

    What a broken graph prints while it runs (FX prints the generated code and a traceback
    when a GraphModule call fails) is swallowed: the check reports the exception instead.
    """
    mod, args, gm = joint_case(name)
    tangents = tangents_for(gm)
    before = call_joint(joint_case(name)[2], mod, args, tangents)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        edited = answer(gm, factor)
        _nothing_after_the_output(getattr(edited, "graph", None))
        after = call_joint(edited, mod, args, tangents)
    in_place = edited is gm or (
        isinstance(edited, _ScaledAfterRunning) and edited.gm is gm
    )  # the oracle's stand-in
    return {
        "output by output": [(d, _ratio(new, old)) for (d, old), (_, new) in zip(before, after)],
        "gm itself edited in place and returned": in_place,
    }


def _nothing_after_the_output(graph):
    """A node made outside ``inserting_before(out)`` lands at the graph's end, after the
    output node; say so before the generated code fails on a name it never assigned."""
    if isinstance(graph, torch.fx.Graph) and graph.output_node() is not None:
        nodes = list(graph.nodes)
        after = nodes[nodes.index(graph.output_node()) + 1 :]
        if after:
            raise RuntimeError(
                f"the edited graph has {len(after)} node(s) after its output node, "
                f"first {after[0].name}: they were inserted at the graph's end"
            )


def _no_inserting_before(gm, factor):
    # the muls are made at the graph's insert point, which is its end: after the output node
    out = gm.graph.output_node()
    new_outs = list(out.args[0])
    for i, (node, desc) in enumerate(zip(new_outs, out.meta["desc"])):
        if node is not None and is_param_grad(desc):
            new_outs[i] = gm.graph.call_function(torch.ops.aten.mul.Tensor, (node, factor))
    out.args = (new_outs,)
    gm.recompile()
    return gm


def _scale_tangents(gm, factor):
    for t in gm.graph.find_nodes(op="placeholder"):
        if t.meta["desc"].is_tangent():
            with gm.graph.inserting_after(t):
                m = gm.graph.call_function(torch.ops.aten.mul.Tensor, (t, factor))
            t.replace_all_uses_with(m, delete_user_cb=lambda user: user is not m)  # noqa: B023 (called in this iteration)
    gm.recompile()
    return gm


def _stale(gm, factor):
    _mul_outputs(gm, factor, lambda i, node, desc: node is not None and is_param_grad(desc))
    return gm  # the graph changed, but without gm.recompile() the module runs the old code


def _positional_scale(gm, factor):
    n_params = len(cf.get_param_nodes(gm.graph))  # "output 0 is the result, then the param grads"
    _mul_outputs(gm, factor, lambda i, node, desc: 1 <= i <= n_params and node is not None)
    gm.recompile()
    return gm


def _keeps_none(gm, factor):
    # a parameter forward never uses has a GradAOTOutput slot holding None
    _mul_outputs(gm, factor, lambda i, node, desc: is_param_grad(desc))
    gm.recompile()
    return gm


def _each_param_grad(gm, factor, rewire):
    """For each parameter's grad node, make a mul and let ``rewire(out, grad, mul)`` use it."""
    out = gm.graph.output_node()
    with gm.graph.inserting_before(out):
        for _, (_, grad) in cf.get_param_and_grad_nodes(gm.graph).items():
            if grad is not None:
                rewire(out, grad, gm.graph.call_function(torch.ops.aten.mul.Tensor, (grad, factor)))
    gm.recompile()
    return gm


def _by_node(gm, factor):
    return _each_param_grad(gm, factor, lambda out, grad, mul: out.replace_input_with(grad, mul))


def _replace_all_uses(gm, factor):
    return _each_param_grad(gm, factor, lambda out, grad, mul: grad.replace_all_uses_with(mul))


def _scale_by_lookup(gm, factor):
    """A right answer written differently: the param-grad descriptors from fx_utils, then the
    positions whose descriptor is one of them."""
    wanted = {cd.GradAOTOutput(p) for p in cf.get_param_and_grad_nodes(gm.graph)}
    out = gm.graph.output_node()
    outs = list(out.args[0])
    for i, desc in enumerate(out.meta["desc"]):
        if desc is not None and outs[i] is not None and cd.from_torch(desc) in wanted:
            with gm.graph.inserting_before(out):
                outs[i] = gm.graph.call_function(torch.ops.aten.mul.Tensor, (outs[i], factor))
    out.args = (tuple(outs),)
    gm.recompile()
    return gm


def _scale_everything(gm, factor):
    # every non-None output, forward results and buffer updates included
    _mul_outputs(gm, factor, lambda i, node, desc: node is not None)
    gm.recompile()
    return gm


exercise(
    "7.4",
    name="scale_param_grads",
    title="A joint-graph pass: scale every parameter gradient",
    solution=scale_param_grads,
    oracle=_ScaledAfterRunning,
    run=_run_scaled,
    points=3,
    cases=[case("mlp", 0.5, label="the notebook's MLP, factor 0.5")],
    hidden=[
        case("mlp_x_grad", 2.0, label="the MLP with an input that requires grad, factor 2"),
        case("batchnorm", 3.0, label="BatchNorm1d in training mode (buffer mutations), factor 3"),
        case("bias_only", -1.0, label="x + b with x requiring grad (one node, two grads), factor -1"),
        case("frozen_unused", 2.0, label="a frozen weight and an unused parameter, factor 2"),
        case("two_heads", 0.25, label="two outputs and a frozen head bias, factor 0.25"),
    ],
    right=[_scale_by_lookup],
    wrong=[
        wrong(
            _edits_a_copy,
            "the values are right, but on a copy: the spec asks you to modify gm in place and "
            "return it, as a graph pass does (whoever holds gm, a compiler's pipeline, sees "
            "the edit). Edit gm.graph itself, recompile, and return gm.",
        ),
        wrong(
            _scale_everything,
            "only the parameters' gradients change: forward outputs, buffer "
            "updates and the gradients of plain inputs must come out as torch computes them "
            "(1.0 times). Choose positions by their descriptor.",
        ),
        wrong(
            _scale_tangents,
            "scaling the tangents scales every gradient, including those of plain "
            "inputs that require grad (and so would scaling every GradAOTOutput). Change only "
            "the outputs whose descriptor is GradAOTOutput(grad_of=ParamAOTInput(...)).",
        ),
        wrong(
            _stale,
            "a GraphModule runs the Python code generated from its graph: after editing "
            "gm.graph, call gm.recompile(), or gm still runs the old code.",
        ),
        wrong(
            _positional_scale,
            "the grads do not start at output 1: buffer mutations come first and "
            "a module may have several outputs. Find each parameter's grad by its descriptor "
            "(out.meta['desc'][i]), not by position.",
        ),
        wrong(
            _by_node,
            "one node can sit at several output positions (in x + b, the tangent is the "
            "grad of b *and* of x). Replace the output *position* whose descriptor is a param "
            "grad, not every use of the node.",
        ),
        wrong(
            _replace_all_uses,
            "grad.replace_all_uses_with(mul) also rewires mul's own input to "
            "itself (mul is a user of grad too), so the graph computes mul from mul. Edit the "
            "output node's list instead (or pass delete_user_cb).",
        ),
        wrong(
            _keeps_none,
            "a parameter forward never uses has a GradAOTOutput slot holding None: "
            "skip None outputs, there is nothing to scale.",
        ),
        wrong(
            _no_inserting_before,
            "a new node goes to the graph's insert point, which is its end, "
            "after the output node: the generated code then uses a name before it is assigned. "
            "Make the new nodes inside a with gm.graph.inserting_before(out): block.",
        ),
    ],
    hint="a parameter's gradient is an output *position* whose descriptor says it is the grad "
    "of a parameter; change exactly those positions that hold a node, leave every other output "
    "as torch computed it, and make sure the module runs the edited graph.",
)
