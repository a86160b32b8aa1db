"""Exercise 7.3, parameters that get no gradient: how a call is run and observed, the oracle, the
visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import torch

from course.aot import descriptors as cd
from course.aot import fx_utils as cf
from course.checks import case, exercise, wrong
from course.checks.lesson07._shared import MODULES, joint_case
from course.checks.solutions.lesson07 import params_without_grad


def _run_on(answer, name):
    if answer is _eager_without_grad:
        return _eager_without_grad(name)
    return answer(joint_case(name)[2])


def _eager_without_grad(name):
    """7.3's oracle, without any graph: run the module eagerly, backward from every output
    that can carry a gradient, and list the parameters whose ``.grad`` stayed None, in
    ``named_parameters()`` order (a shared Parameter under each of its names)."""
    make_module, make_args, _ = MODULES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        mod, args = make_module(), make_args()
    outs = mod(*args)
    outs = [o for o in (outs if isinstance(outs, tuple) else (outs,)) if o.requires_grad]
    torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    return [n for n, p in mod.named_parameters(remove_duplicate=False) if p.grad is None]


def _buffers_too(gm):
    pairs = cf.get_all_input_and_grad_nodes(gm.graph)
    return [
        d.target
        for d, (_, g) in pairs.items()
        if isinstance(d, (cd.ParamAOTInput, cd.BufferAOTInput)) and g is None
    ]


def _missing_grad_desc(gm):
    descs = [cd.from_torch(d) for d in gm.graph.output_node().meta["desc"] if d is not None]
    have = {d.grad_of for d in descs if isinstance(d, cd.GradAOTOutput)}
    return [t for t, n in cf.get_named_param_nodes(gm.graph).items() if cd.ParamAOTInput(t) not in have]


def _positional(gm):
    names = list(cf.get_named_param_nodes(gm.graph))
    outs = gm.graph.output_node().args[0]
    return [t for t, g in zip(names, outs[1:]) if g is None]  # "output 0 is the loss, then grads"


def _node_names(gm):
    pairs = cf.get_param_and_grad_nodes(gm.graph)
    return [p.name for _, (p, g) in pairs.items() if g is None]


def _with_grad(gm):
    pairs = cf.get_param_and_grad_nodes(gm.graph)
    return [desc.target for desc, (_, grad) in pairs.items() if grad is not None]


def _by_output_slots(gm):
    """A right answer without fx_utils: walk the output slots, look each param's grad up."""
    out = gm.graph.output_node()
    grad_of = {
        cd.from_torch(d).grad_of: node
        for d, node in zip(out.meta["desc"], out.args[0])
        if d is not None and isinstance(cd.from_torch(d), cd.GradAOTOutput)
    }
    params = [cd.from_torch(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")]
    return [d.target for d in params if isinstance(d, cd.ParamAOTInput) and grad_of.get(d) is None]


exercise(
    "7.3",
    name="params_without_grad",
    title="Find the parameters that get no gradient",
    solution=params_without_grad,
    oracle=_eager_without_grad,
    run=_run_on,
    points=2,
    cases=[case("mlp_frozen_bias", label="the notebook's MLP with 0.bias frozen")],
    hidden=[
        case("frozen_unused", label="a frozen weight and a parameter forward never uses"),
        case("batchnorm", label="BatchNorm1d in training mode"),
        case("batchnorm_frozen_weight", label="BatchNorm1d with its weight frozen"),
        case("tied", label="one Parameter shared by two layers"),
        case("two_heads", label="two outputs and a frozen head bias"),
    ],
    right=[
        _by_output_slots,
        lambda gm: [
            d.target
            for d, (_, g) in cf.get_all_input_and_grad_nodes(gm.graph).items()
            if isinstance(d, cd.ParamAOTInput) and g is None
        ],
    ],
    wrong=[
        wrong(
            _with_grad,
            "that is the other half: the parameters that *do* get a gradient. Keep "
            "those whose grad node is None.",
        ),
        wrong(
            _buffers_too,
            "buffers are not parameters: a buffer's grad output is always None, but "
            "it was never meant to get one. Keep only ParamAOTInput "
            "(get_param_and_grad_nodes filters for you).",
        ),
        wrong(
            _missing_grad_desc,
            "a parameter can have a GradAOTOutput descriptor and still get no "
            "gradient: a parameter forward never uses has its slot, holding None. Look at the "
            "grad *node* (None or not), not only at the descriptor.",
        ),
        wrong(
            _positional,
            "outputs are not 'forward output, then one grad per parameter': buffer "
            "mutations come first and a module may return several outputs. Pair each "
            "parameter with its grad through the descriptors (get_param_and_grad_nodes).",
        ),
        wrong(
            _node_names,
            "return the parameters' fully qualified names (desc.target, e.g. "
            "'0.bias'), not the placeholders' node names ('primals_2').",
        ),
    ],
    hint="a parameter gets no gradient when its grad output holds no node, for whatever reason "
    "(frozen, or never used). Pair each ParamAOTInput placeholder with its grad output through "
    "the descriptors, and report the parameters' names in placeholder order.",
)
