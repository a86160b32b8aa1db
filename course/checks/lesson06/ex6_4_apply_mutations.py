"""Exercise 6.4, play the runtime: copy the mutations back: how a call is run and observed, the oracle,
the visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import sys
import warnings

import torch
import torch.fx as fx
from torch import nn

from course.aot import descriptors as cd
from course.aot.joint import export_joint
from course.checks import case, exercise, handed, wrong
from course.checks.solutions.lesson06 import apply_mutations
from course.content.lesson06 import Accumulate, accumulate_args, seeded
from course.content.lesson07 import Logged
from course.content.zoo import Fn, export_graph_module


def _kth_mutation_into_args_k(gm, mod, args, outs):
    """BAD: the k-th input mutation copied into args[k], whatever its descriptor's idx says."""
    env = {"self": mod, "args": args}
    user_outputs, k = [], 0
    with torch.no_grad():
        for desc, value in zip(gm.graph.output_node().meta["desc"], outs):
            kind = type(desc).__name__
            if kind == "InputMutationAOTOutput" and type(desc.mutated_input).__name__ == "PlainAOTInput":
                args[k].copy_(value)  # BAD: mutated_input.idx names the argument, not k
                k += 1
            elif kind == "InputMutationAOTOutput":
                eval(desc.mutated_input.expr(), env).copy_(value)
            elif kind == "PlainAOTOutput":
                user_outputs.append(value)
    return user_outputs


class _ReadThenWrite(nn.Module):
    """A read-only buffer registered before a mutated one: mutations are not 'the buffers'."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.register_buffer("scale", torch.full((3,), 2.0))
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        y = x * self.w * self.scale
        self.total.add_(y.detach())
        return y


def _print_and_bump(x, w):
    torch.ops.aten._print("forward")  # an effect: torch's exporter threads a token for it
    x.add_(1)
    return x * w


def _bump_input(x, w):
    x.add_(1)  # an input that needs no grad, updated in place
    return x * w


def _bump_second(w, x):
    x.add_(1)  # the first (and only) mutation, of input 1: its k (0) is not its idx (1)
    return x * w


def _weight_then_input():
    return torch.randn(3, requires_grad=True), torch.randn(3)


def _mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _x(*shape, grad=False):
    return lambda: (torch.randn(*shape, requires_grad=grad),)


def _pair(*shape):
    return lambda: (torch.randn(*shape), torch.randn(*shape, requires_grad=True))


#: name -> (module factory, args factory). Seeded when built. course.aot.joint exports the
#: first six; the last two have an effect (a print), which only torch's exporter takes: it
#: threads a token through the graph, an extra placeholder and output 0.
MODULES = {
    "batchnorm": (lambda: nn.BatchNorm1d(3).train(), _x(4, 3)),
    "linear_batchnorm": (lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).train(), _x(5, 3)),
    "accumulate": (Accumulate, accumulate_args),
    "read_then_write": (_ReadThenWrite, _x(3)),
    "bump_input": (lambda: Fn(_bump_input), _pair(3)),
    "bump_second": (lambda: Fn(_bump_second), _weight_then_input),
    "mlp": (_mlp, _x(5, 4)),
    "printing": (lambda: Fn(_print_and_bump), _pair(3)),
    "logged": (Logged, _x(3)),  # lesson 7's module: a token, a buffer, two views
}


@contextlib.contextmanager
def _quiet_fds():
    """Silence file descriptors 1 and 2: aten._print writes from C++, past sys.stdout."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


@functools.cache
def _exported(name: str, exporter: str) -> fx.GraphModule:
    mod, args = seeded(*MODULES[name])
    with _quiet_fds():
        if exporter == "torch":
            return export_graph_module(mod, args)
        return export_joint(mod, args).graph_module


def joint_case(name: str, exporter: str) -> fx.GraphModule:
    """The joint graph of ``MODULES[name]`` by ``exporter`` ("torch" or "course"): a fresh
    copy per call (its meta copied too), so an answer that edits it cannot reach the cache."""
    gm = _exported(name, exporter)
    with warnings.catch_warnings():  # deep-copying the pytree specs warns about LeafSpec
        warnings.simplefilter("ignore", FutureWarning)
        graph = copy.deepcopy(gm.graph)
    for n in graph.nodes:
        n.meta = {k: list(v) if isinstance(v, list) else v for k, v in n.meta.items()}
    return fx.GraphModule(gm, graph)


def _primal(desc, mod, args):
    """The value a placeholder takes, found through its descriptor (a token: an empty tensor)."""
    kind = type(desc).__name__
    if kind == "ForwardTokenAOTInput":
        return torch.empty(0)
    return eval(desc.expr(), {"self": mod, "args": args})


def _caller_sees(returned, mod, buffers, args):
    """What the caller sees afterwards: the returned outputs, and the very tensors it holds."""
    returned = [returned] if isinstance(returned, torch.Tensor) else list(returned)
    return {
        "returned": [r.detach() if isinstance(r, torch.Tensor) else r for r in returned],
        "the caller's buffers": {n: b.detach().clone() for n, b in buffers.items()},
        "the caller's inputs": [a.detach().clone() for a in args],
    }


def _eager_side_effects(name, exporter):
    """The oracle: the module run eagerly on the same seeded state, with its side effects."""
    mod, args = seeded(*MODULES[name])
    buffers = dict(mod.named_buffers())
    with _quiet_fds():
        returned = mod(*args)
    return _caller_sees(returned, mod, buffers, args)


def _run_joint(answer, name, exporter):
    """Run the exported joint on a fresh module's tensors, then hand ``answer`` the graph, the
    module, the args and the forward outputs; observe what the caller holds afterwards."""
    if answer is _eager_side_effects:
        return _eager_side_effects(name, exporter)
    gm = joint_case(name, exporter)
    mod, args = seeded(*MODULES[name])
    buffers = dict(mod.named_buffers())  # the caller's tensors: a copy-back must land in these
    placeholders = gm.graph.find_nodes(op="placeholder")
    primals = [_primal(n.meta["desc"], mod, args) for n in placeholders if not n.meta["desc"].is_tangent()]
    g = torch.Generator().manual_seed(1)
    tangents = [
        torch.randn(n.meta["val"].shape, generator=g) for n in placeholders if n.meta["desc"].is_tangent()
    ]
    with torch.no_grad(), _quiet_fds():
        outs, _ = gm(primals, tangents)
    with handed(module=mod, args=args):
        returned = answer(gm, mod, args, list(outs))
    return _caller_sees(returned, mod, buffers, args)


def _is(desc, kind):
    return type(desc).__name__ == kind


def _apply_mutations_converted(gm, mod, args, outs):  # a right answer: course's classes, a loop by index
    descs = [
        None if d is None else cd.from_torch(d) if not isinstance(d, cd.AOTOutput) else d
        for d in gm.graph.output_node().meta["desc"]
    ]
    user = {}
    for i in range(len(outs)):
        d = descs[i]
        if isinstance(d, cd.InputMutationAOTOutput):
            m = d.mutated_input
            target = mod.get_buffer(m.target) if isinstance(m, cd.BufferAOTInput) else args[m.idx]
            with torch.no_grad():
                target.copy_(outs[i])
        elif isinstance(d, cd.PlainAOTOutput):
            user[d.idx] = outs[i]
    return [user[k] for k in sorted(user)]


def _mutations_and_outputs(gm, outs, copy_back):
    """The shared loop of the wrong answers below: ``copy_back(k, i, desc, value)`` per mutation."""
    user, k = [], 0
    for i, (desc, value) in enumerate(zip(gm.graph.output_node().meta["desc"], outs)):
        if _is(desc, "InputMutationAOTOutput"):
            copy_back(k, i, desc, value)
            k += 1
        elif _is(desc, "PlainAOTOutput"):
            user.append(value)
    return user


def _copy_into(mod, args):
    def copy_back(k, i, desc, value):
        with torch.no_grad():
            eval(desc.mutated_input.expr(), {"self": mod, "args": args}).copy_(value)

    return copy_back


def _buffers_only(gm, mod, args, outs):
    def copy_back(k, i, desc, value):
        if _is(desc.mutated_input, "BufferAOTInput"):
            _copy_into(mod, args)(k, i, desc, value)

    return _mutations_and_outputs(gm, outs, copy_back)


def _kth_buffer(gm, mod, args, outs):
    """BAD: the k-th mutation output goes back into the k-th buffer."""
    buffers = [b for _, b in mod.named_buffers()]

    def copy_back(k, i, desc, value):
        with torch.no_grad():
            buffers[k].copy_(value)

    return _mutations_and_outputs(gm, outs, copy_back)


def _kth_mutation_at_k(gm, mod, args, outs):
    """BAD: the k-th mutation output taken to sit at output index k."""

    def copy_back(k, i, desc, value):
        _copy_into(mod, args)(k, i, desc, outs[k])

    return _mutations_and_outputs(gm, outs, copy_back)


def _rebinds_buffers(gm, mod, args, outs):
    """BAD: a buffer's new value bound under its name, instead of copied into it."""

    def copy_back(k, i, desc, value):
        m = desc.mutated_input
        if _is(m, "BufferAOTInput"):
            owner, _, attr = m.target.rpartition(".")
            setattr(mod.get_submodule(owner), attr, value)
        else:
            _copy_into(mod, args)(k, i, desc, value)

    return _mutations_and_outputs(gm, outs, copy_back)


def _all_but_mutations(gm, mod, args, outs):
    """BAD: every output that is not a mutation taken for a user output (tokens, bases too)."""
    _mutations_and_outputs(gm, outs, _copy_into(mod, args))
    descs = gm.graph.output_node().meta["desc"]
    return [v for d, v in zip(descs, outs) if not _is(d, "InputMutationAOTOutput")]


def _bases_too(gm, mod, args, outs):
    """BAD: a view's base taken for a user output (the token is skipped)."""
    _mutations_and_outputs(gm, outs, _copy_into(mod, args))
    descs = gm.graph.output_node().meta["desc"]
    return [v for d, v in zip(descs, outs) if _is(d, "PlainAOTOutput") or _is(d, "IntermediateBaseAOTOutput")]


def _course_classes_only(gm, mod, args, outs):
    """BAD: isinstance against course's classes, which torch's descriptors are not."""
    user = []
    for d, value in zip(gm.graph.output_node().meta["desc"], outs):
        if isinstance(d, cd.InputMutationAOTOutput):
            with torch.no_grad():
                eval(d.mutated_input.expr(), {"self": mod, "args": args}).copy_(value)
        elif isinstance(d, cd.PlainAOTOutput):
            user.append(value)
    return user


def _nothing_copied(gm, mod, args, outs):
    """BAD: the user outputs, right, and the mutations left unapplied."""
    return _mutations_and_outputs(gm, outs, lambda k, i, desc, value: None)


exercise(
    "6.4",
    name="apply_mutations",
    title="Play the runtime: copy the joint's mutations back into the caller's tensors",
    solution=apply_mutations,
    oracle=_eager_side_effects,
    run=_run_joint,
    points=2,
    may_leave={"version"},  # copying back writes the caller's buffers and inputs: that is the job
    cases=[case("batchnorm", "course", label="the notebook's BatchNorm1d(3), exported by course.aot.joint")],
    hidden=[
        case("batchnorm", "torch", label="BatchNorm1d(3), exported by torch"),
        case("linear_batchnorm", "torch", label="Linear then BatchNorm1d, exported by torch"),
        case("accumulate", "course", label="exercise 6.3's module (a buffer and an input mutated)"),
        case("read_then_write", "torch", label="a read-only buffer before a mutated one"),
        case("bump_input", "course", label="an input mutated in place, no buffers at all"),
        case(
            "bump_second",
            "torch",
            label="the second input mutated in place: the first mutation is of input 1 (idx=1)",
        ),
        case("mlp", "torch", label="an MLP: no mutation at all"),
        case("printing", "torch", label="a print and an input mutated in place: an effect token comes first"),
        case(
            "logged", "torch", label="lesson 7's Logged: a token, a buffer update, two views and their base"
        ),
    ],
    wrong=[
        wrong(
            _nothing_copied,
            "the outputs are right, but the caller's buffers and inputs are as they were: the "
            "graph only *returns* the new values. The runtime's job is to write each "
            "InputMutationAOTOutput back into the tensor its mutated_input names.",
        ),
        wrong(
            _course_classes_only,
            "torch's exporter puts torch's descriptor classes in meta['desc'], and a torch "
            "InputMutationAOTOutput is not an instance of course.aot.descriptors' class. "
            "Compare class names, or convert with course.aot.descriptors.from_torch, so both "
            "exporters' graphs work.",
        ),
        wrong(
            _buffers_only,
            "inputs are mutated too, not only buffers: x.add_(1) or h.mul_(w) on an argument "
            "comes back as InputMutationAOTOutput(mutated_input=PlainAOTInput(idx=...)), "
            "and the caller's argument must receive it.",
        ),
        wrong(
            _kth_buffer,
            "mutations are not 'the buffers, in order': a buffer forward only reads is not "
            "mutated, and a plain input can be. Each mutation names its input: follow "
            "mutated_input to the caller's tensor.",
        ),
        wrong(
            _kth_mutation_at_k,
            "the mutation outputs do not start at output 0: an effect (a print) puts its "
            "token first. Take each mutation's value from its own position.",
        ),
        wrong(
            _kth_mutation_into_args_k,
            "the k-th mutation need not be of argument k: a module may mutate its second "
            "argument only. Each InputMutationAOTOutput names its input (mutated_input, with "
            "its idx): follow it to the caller's tensor.",
        ),
        wrong(
            _rebinds_buffers,
            "binding the new value under the buffer's name replaces the tensor: whoever "
            "holds the old one (the caller, an optimizer, a view) still sees the old values. "
            "Eager mode wrote *into* the buffer; copy into it (copy_, under no_grad).",
        ),
        wrong(
            _all_but_mutations,
            "not every other output is the user's: an effect token and the base of "
            "aliased views are outputs the runtime consumes. The user's outputs are those "
            "whose descriptor is PlainAOTOutput.",
        ),
        wrong(
            _bases_too,
            "IntermediateBaseAOTOutput is the base the runtime rebuilds the views from, not "
            "one of the user's outputs: return only the PlainAOTOutput ones.",
        ),
    ],
    right=[_apply_mutations_converted],
    hint="the graph is functional, so the program's side effects come back as outputs: each "
    "InputMutationAOTOutput names the input it belongs to, and the caller's own tensor must "
    "receive the new value in place; the user's outputs are only some of the outputs, told "
    "apart by their descriptors.",
)
