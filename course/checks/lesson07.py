"""Checks for lesson 7, descriptors and fx_utils: reading and rewriting a joint graph.

Each exercise is registered once, here: its reference solution (what
solutions/07_descriptors.ipynb writes), the oracle, visible and hidden cases, and the known
wrong answers with the hint each deserves. See docs/authoring.md.

The pass exercises (7.3, 7.4) are graded on joint graphs torch exports inside the check:
``MODULES`` names the small modules (most of them never appear in the notebook), and a case
is a module's name. Each module is exported once per process with torch's
``aot_export_joint_with_descriptors``; every call of an answer gets a fresh copy of the graph.

Exercise 7.2 predicts how torch nests descriptors in four small programs (``NESTING_PROGRAMS``,
lesson content like 7.1's ``PredictMe`` and 7.5's ``Logged``: course/content/lesson07.py):
the truth exports each with torch and finds the named value's descriptor by its parts, in any
order, so only the nesting is judged. Exercise 7.3's oracle runs no graph: eager autograd on
the module, the parameters whose ``.grad`` stays None.

The lesson's descriptor zoo (the smallest program for each descriptor class) lives in
:mod:`course.content.zoo`; exercise 7.5 predicts the outputs of one more such program.
The descriptor predictions (7.1, 7.5) are read in any spelling
(:mod:`course.checks.descriptor_answers`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import warnings

import torch
import torch.fx as fx
from torch import nn

from course.aot import descriptors as cd
from course.aot import fx_utils as cf
from course.checks import case, exercise, predict, wrong
from course.checks.descriptor_answers import read_descriptors
from course.checks.solutions.lesson07 import (
    params_without_grad,
    predicted_nestings,
    predicted_outputs,
    predicted_placeholders,
    scale_param_grads,
)
from course.content.lesson07 import NESTING_PROGRAMS, Logged, PredictMe
from course.content.zoo import Fn, export_graph_module

# --- The modules the checks export --------------------------------------------------------


class _FrozenUnused(nn.Module):
    """A frozen weight and a parameter forward never uses (registered on the parent, so it
    comes first in named_parameters())."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 4)
        self.l2 = nn.Linear(4, 2)
        self.l1.weight.requires_grad_(False)
        self.temperature = nn.Parameter(torch.ones(()))

    def forward(self, x):
        return self.l2(self.l1(x).relu())


class _Tied(nn.Module):
    """An encoder and a decoder sharing one weight: torch exports it under both names."""

    def __init__(self):
        super().__init__()
        self.enc, self.dec = nn.Linear(3, 3), nn.Linear(3, 3)
        self.dec.weight = self.enc.weight  # one Parameter, two FQNs

    def forward(self, x):
        return self.dec(self.enc(x).tanh())


class _BiasOnly(nn.Module):
    """x + b with x requiring grad: both grads are the tangent itself, one node twice."""

    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return x + self.b


class _TwoHeads(nn.Module):
    """Two outputs, a frozen head bias: grads no longer start at output 1."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 4)
        self.head = nn.Linear(4, 2)
        self.head.bias.requires_grad_(False)

    def forward(self, x):
        h = self.body(x).tanh()
        return self.head(h), h.sum()


def _mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _mlp_frozen_bias():
    mod = _mlp()
    mod[0].bias.requires_grad_(False)
    return mod


def _bn_frozen_weight():
    mod = nn.BatchNorm1d(3).train()
    mod.weight.requires_grad_(False)
    return mod


def _x(*shape, grad=False):
    return lambda: (torch.randn(*shape, requires_grad=grad),)


#: name -> (module factory, args factory, what it exercises). Seeded when built.
MODULES = {
    "mlp": (_mlp, _x(5, 4), "Linear-ReLU-Linear; x needs no grad (the notebook's MLP)"),
    "mlp_frozen_bias": (_mlp_frozen_bias, _x(5, 4), "the notebook's MLP with 0.bias frozen"),
    "mlp_x_grad": (_mlp, _x(5, 4, grad=True), "the MLP with an input that requires grad"),
    "frozen_unused": (_FrozenUnused, _x(2, 3), "a frozen weight and an unused parameter"),
    "tied": (_Tied, _x(2, 3), "one Parameter under two names"),
    "batchnorm": (lambda: nn.BatchNorm1d(3).train(), _x(4, 3), "BatchNorm1d, training mode"),
    "batchnorm_frozen_weight": (_bn_frozen_weight, _x(4, 3), "BatchNorm1d with its weight frozen"),
    "bias_only": (_BiasOnly, _x(3, grad=True), "x + b: one grad node at two output positions"),
    "two_heads": (_TwoHeads, _x(2, 3), "two outputs and a frozen bias"),
    "predict_me": (
        PredictMe,
        lambda: (torch.randn(2, 3), torch.randn(2, 3, requires_grad=True)),
        "exercise 7.1's module",
    ),
}


@functools.cache
def _exported(name: str) -> tuple[nn.Module, tuple, fx.GraphModule]:
    make_module, make_args, _ = MODULES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        mod = make_module()
        args = make_args()
    return mod, args, export_graph_module(mod, args)


def joint_case(name: str) -> tuple[nn.Module, tuple, fx.GraphModule]:
    """``(module, args, joint graph)`` of ``MODULES[name]``; the graph is a fresh copy that
    a pass may rewrite freely (the module and args are shared: read them only)."""
    mod, args, gm = _exported(name)
    with warnings.catch_warnings():  # deep-copying the pytree specs warns about LeafSpec
        warnings.simplefilter("ignore", FutureWarning)
        graph = copy.deepcopy(gm.graph)
    for n in graph.nodes:  # our own meta, so a pass that edits it cannot reach the cache
        n.meta = {k: list(v) if isinstance(v, list) else v for k, v in n.meta.items()}
    return mod, args, fx.GraphModule(gm, graph)


def tangents_for(gm: fx.GraphModule, seed: int = 1) -> list[torch.Tensor]:
    """One seeded random tangent per ``TangentAOTInput`` placeholder, in placeholder order."""
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(n.meta["val"].shape, generator=g)
        for n in gm.graph.find_nodes(op="placeholder")
        if isinstance(cd.from_torch(n.meta["desc"]), cd.TangentAOTInput)
    ]


def call_joint(gm, mod: nn.Module, args: tuple, tangents: list) -> list:
    """Run a joint graph: each primal is looked up by its descriptor (the graph has no
    fixed calling convention), tangents are given. Returns ``[(repr(desc), value)]`` per
    output position (value None where the graph returns None)."""
    primals = []
    for n in gm.graph.find_nodes(op="placeholder"):
        d = cd.from_torch(n.meta["desc"])
        if isinstance(d, cd.ParamAOTInput):
            primals.append(mod.get_parameter(d.target))
        elif isinstance(d, cd.BufferAOTInput):
            primals.append(mod.get_buffer(d.target))
        elif isinstance(d, cd.PlainAOTInput):
            primals.append(args[d.idx])
    with torch.no_grad():
        outs, grads = gm(primals, list(tangents))
    descs = gm.graph.output_node().meta["desc"]
    return [(repr(d), v) for d, v in zip(descs, [*outs, *grads])]


def _is_param_grad(desc) -> bool:
    d = None if desc is None else cd.from_torch(desc)
    return isinstance(d, cd.GradAOTOutput) and isinstance(d.grad_of, cd.ParamAOTInput)


# --- Exercise 7.1: predict the placeholders -------------------------------------------------


def _predict_me_placeholders():
    """Exercise 7.1's program, run by torch: the placeholder descriptors' reprs."""
    _, _, gm = joint_case("predict_me")
    return [repr(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")]


_WEIGHT, _BIAS = "ParamAOTInput(target='lin.weight')", "ParamAOTInput(target='lin.bias')"
_SCALE, _INPUT0, _INPUT1 = "BufferAOTInput(target='scale')", "PlainAOTInput(idx=0)", "PlainAOTInput(idx=1)"
_T0, _T1 = "TangentAOTInput(output=PlainAOTOutput(idx=0))", "TangentAOTInput(output=PlainAOTOutput(idx=1))"

predict(
    "7.1",
    name="predicted_placeholders",
    title="Predict the placeholder descriptors of a small module",
    truth=_predict_me_placeholders,
    solution=predicted_placeholders,
    parse=read_descriptors,
    right=[
        [
            'ParamAOTInput(target="lin.weight")',
            'ParamAOTInput( target = "lin.bias" )',
            'BufferAOTInput("scale")',
            "PlainAOTInput(0)",
            "PlainAOTInput(idx = 1)",
            "TangentAOTInput(PlainAOTOutput(0))",
        ],
        (
            cd.ParamAOTInput("lin.weight"),
            cd.ParamAOTInput("lin.bias"),
            cd.BufferAOTInput("scale"),
            cd.PlainAOTInput(0),
            cd.PlainAOTInput(1),
            cd.TangentAOTInput(cd.PlainAOTOutput(0)),
        ),
        [cd.to_torch(cd.ParamAOTInput("lin.weight")), _BIAS, _SCALE, _INPUT0, _INPUT1, _T0],
    ],
    wrong=[
        wrong(
            [_INPUT0, _INPUT1, _WEIGHT, _BIAS, _SCALE, _T0],
            "the module's own state comes first: parameters, then buffers, and only then the "
            "arguments you pass (x, y), then the tangents.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _SCALE, _INPUT0, _INPUT1, _T0, _T1],
            "out.argmax() is an integer tensor: it can have no gradient, so no tangent is fed "
            "back for it. Only outputs that can carry a gradient get a TangentAOTInput.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _SCALE, _INPUT1, _T0],
            "x needs no grad, but it is still an input of the forward pass: every tensor the "
            "module reads is a placeholder (PlainAOTInput(idx=0)); only its grad output is None.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _INPUT0, _INPUT1, _T0],
            "a buffer is read by forward, so it is an input too: BufferAOTInput(target='scale'), "
            "after the parameters.",
        ),
        wrong(
            [_SCALE, _WEIGHT, _BIAS, _INPUT0, _INPUT1, _T0],
            "the order is parameters, then buffers, then the user's inputs, then tangents.",
        ),
        wrong(
            [_WEIGHT, _BIAS, _SCALE, _INPUT0, _INPUT1],
            "the joint graph runs the backward too, so it takes one tangent (d loss / d output) "
            "per differentiable output, after all the primals.",
        ),
    ],
    hint="placeholders are: parameters, buffers, the user's inputs (all of them), then one tangent "
    "per output that can carry a gradient.",
)

# --- Exercise 7.2: predict how torch nests descriptors ----------------------------------


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

# --- Exercise 7.3: parameters that get no gradient ------------------------------------------


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

# --- Exercise 7.4: scale every parameter gradient -------------------------------------------


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
            g * self.factor if g is not None and _is_param_grad(d) else g for g, d in zip(grads, descs)
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
        if node is not None and _is_param_grad(desc):
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
    _mul_outputs(gm, factor, lambda i, node, desc: node is not None and _is_param_grad(desc))
    return gm  # the graph changed, but without gm.recompile() the module runs the old code


def _positional_scale(gm, factor):
    n_params = len(cf.get_param_nodes(gm.graph))  # "output 0 is the result, then the param grads"
    _mul_outputs(gm, factor, lambda i, node, desc: 1 <= i <= n_params and node is not None)
    gm.recompile()
    return gm


def _keeps_none(gm, factor):
    # a parameter forward never uses has a GradAOTOutput slot holding None
    _mul_outputs(gm, factor, lambda i, node, desc: _is_param_grad(desc))
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

# --- Exercise 7.5: predict the outputs of a zoo program -------------------------------------


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
