"""What exercises 7.1, 7.3 and 7.4 share: the modules the checks export (``MODULES``), each
exported once per process, and how a case calls a joint graph and makes its tangents.
"""

from __future__ import annotations

import copy
import functools
import warnings

import torch
import torch.fx as fx
from torch import nn

from course.aot import descriptors as cd
from course.content.lesson07 import PredictMe
from course.content.zoo import export_graph_module


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


def is_param_grad(desc) -> bool:
    d = None if desc is None else cd.from_torch(desc)
    return isinstance(d, cd.GradAOTOutput) and isinstance(d.grad_of, cd.ParamAOTInput)
