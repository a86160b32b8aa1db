"""Checks for lesson 6, building the joint graph: a joint by hand, its placeholders, its mutations.

Each exercise is registered once, here: its reference solution (what
solutions/06_joint_graph.ipynb writes), the oracle, visible and hidden cases, and the known
wrong answers with the hint each deserves. See docs/authoring.md.

- 6.1 (``make_joint``) is graded the way AOTAutograd uses a joint function: the check traces
  ``make_joint(fn)`` with ``make_fx`` on example primals that require grad, runs the traced
  graph on *new* inputs and tangents, and compares with eager autograd on those inputs. It
  also looks at the example primals after tracing: they arrive with a ``.grad`` from "an
  earlier step", and a joint function must leave it exactly as it was (not accumulated into,
  not wiped).
- 6.2 and 6.3 are predictions; the truth is torch's ``aot_export_joint_with_descriptors``.
  6.3 reads descriptors in any spelling (either quotes, spaces, course's or torch's objects)
  through ``course.checks.descriptor_answers.descriptor_reprs`` before comparing.
- 6.4 (``apply_mutations``) plays torch's runtime epilogue: given a joint graph (exported
  inside the check, by torch's exporter or by ``course.aot.joint.export_joint``, so torch's
  descriptor classes and course's) and its forward outputs, copy each mutation into the
  caller's tensor and return the user's outputs. Oracle: the module run eagerly, its side
  effects read off the very tensors the caller holds. Two hidden graphs carry an effect token.

The programs of 6.2 and 6.3, which the notebook prints and exports too, are lesson content
(course/content/lesson06.py); the modules of 6.4's hidden cases are here.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import sys
import warnings

import numpy
import torch
import torch.fx as fx
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from course.aot import descriptors as cd
from course.aot.joint import export_joint
from course.checks import case, exercise, handed, predict, wrong
from course.checks.descriptor_answers import descriptor_reprs
from course.checks.solutions.lesson06 import (
    apply_mutations,
    make_joint,
    predicted_placeholders,
    predicted_tangent_mask,
)
from course.content.lesson06 import Accumulate, FiveOutputs, accumulate_args, five_outputs_args, seeded
from course.content.lesson07 import Logged
from course.content.zoo import Fn, export_graph_module

# --- Exercise 6.1: a joint function by hand -------------------------------------------------


def _two_outputs(x, w):
    return (x * w).sin(), (x @ w).exp()


def _one_output(x, y):
    return ((x.tanh() * y).sum(0),)


def _three_primals(a, b, c):
    h = a @ b
    return h.relu() + c, (h * c).mean(1)


def _square_and_cube(x, y):
    return x * x * y, (x - y) ** 3


#: name -> (function, shapes of its primals). The cases name a function; the run builds tensors.
FUNCTIONS = {
    "two_outputs": (_two_outputs, [(3,), (3,)]),
    "one_output": (_one_output, [(2, 3), (2, 3)]),
    "three_primals": (_three_primals, [(2, 3), (3, 4), (2, 4)]),
    "square_and_cube": (_square_and_cube, [(4,), (4,)]),
}


def _primals_and_tangents(name, seed, requires_grad):
    fn, shapes = FUNCTIONS[name]
    g = torch.Generator().manual_seed(seed)
    primals = [torch.randn(s, generator=g).requires_grad_(requires_grad) for s in shapes]
    with torch.no_grad():
        shapes_out = [o.shape for o in fn(*primals)]
    tangents = [torch.randn(s, generator=g) for s in shapes_out]
    return fn, primals, tangents


def _observe(outs, grads, leftover):
    return {
        "outs": [o.detach() for o in outs],
        "grads": [g.detach() for g in grads],
        "primals' .grad after tracing": leftover,
    }


#: What the example primals' ``.grad`` holds before tracing: a gradient from an earlier
#: micro-batch, as in a training loop that accumulates. A joint function must leave it alone.
_EARLIER_GRAD = 0.5


def _grad_state(p) -> str:
    if p.grad is None:
        return "None (the caller's .grad is gone)"
    if torch.equal(p.grad, torch.full_like(p, _EARLIER_GRAD)):
        return "unchanged"
    return "changed"


def _run_traced(answer, name):
    """Trace ``answer(fn)`` with make_fx, then run the graph on new primals and tangents.

    The example primals carry a ``.grad`` from "an earlier step"; after tracing, each must
    still hold it. The oracle, :func:`_eager`, is not traced: it is eager autograd on the new
    inputs.
    """
    if answer is _eager:
        return _eager(name)
    fn, example, example_tangents = _primals_and_tangents(name, seed=0, requires_grad=True)
    for p in example:
        p.grad = torch.full_like(p, _EARLIER_GRAD)
    gm = make_fx(answer(fn))(example, example_tangents)
    leftover = [_grad_state(p) for p in example]
    _, primals, tangents = _primals_and_tangents(name, seed=1, requires_grad=False)
    with torch.no_grad():
        outs, grads = gm(primals, tangents)
    return _observe(outs, grads, leftover)


def _eager(name):
    """The oracle: eager autograd on the new inputs (no tracing, no joint function)."""
    fn, primals, tangents = _primals_and_tangents(name, seed=1, requires_grad=True)
    outs = fn(*primals)
    torch.autograd.backward(outs, tangents)
    return _observe(outs, [p.grad for p in primals], ["unchanged"] * len(primals))


def _no_tangents(fn):
    def joint(primals, tangents):
        outs = fn(*primals)
        grads = torch.autograd.grad(sum(o.sum() for o in outs), primals)  # as if every tangent were 1
        return outs, grads

    return joint


def _backward(fn):
    def joint(primals, tangents):
        outs = fn(*primals)
        torch.autograd.backward(outs, tangents)  # writes into the primals' .grad
        return outs, tuple(p.grad for p in primals)

    return joint


def _backward_then_wipe(fn):
    def joint(primals, tangents):
        for p in primals:
            p.grad = None  # start clean ...
        outs = fn(*primals)
        torch.autograd.backward(outs, tangents)
        grads = tuple(p.grad for p in primals)
        for p in primals:
            p.grad = None  # ... and leave clean: the caller's .grad is lost
        return outs, grads

    return joint


def _vjp_by_dot_products(fn):  # a right answer: one scalar, <tangent, output> summed
    def joint(primals, tangents):
        outs = fn(*primals)
        total = sum((o * t).sum() for o, t in zip(outs, tangents))
        return outs, torch.autograd.grad(total, primals)

    return joint


def _grad_with_lists(fn):  # a right answer: keyword names, lists, no retain_graph
    def joint(primals, tangents):
        outs = tuple(fn(*primals))
        grads = torch.autograd.grad(outputs=list(outs), inputs=list(primals), grad_outputs=list(tangents))
        return list(outs), list(grads)

    return joint


def _first_output_only(fn):
    def joint(primals, tangents):
        outs = fn(*primals)
        grads = torch.autograd.grad(outs[0], primals, tangents[0], allow_unused=True)
        grads = tuple(torch.zeros_like(p) if g is None else g for p, g in zip(primals, grads))
        return outs, grads

    return joint


def _first_primal_only(fn):
    def joint(primals, tangents):
        outs = fn(*primals)
        return outs, torch.autograd.grad(outs, primals[:1], tangents)

    return joint


def _detached(fn):
    def joint(primals, tangents):
        primals = [p.detach() for p in primals]  # cut off from autograd
        outs = fn(*primals)
        return outs, torch.autograd.grad(outs, primals, tangents)

    return joint


exercise(
    "6.1",
    name="make_joint",
    title="A joint function by hand, traced by make_fx",
    solution=make_joint,
    oracle=_eager,
    run=_run_traced,
    points=2,
    cases=[case("two_outputs", label="fn(x, w) = ((x * w).sin(), (x @ w).exp()), the notebook's f")],
    hidden=[
        case("one_output", label="one output: ((x.tanh() * y).sum(0),)"),
        case("three_primals", label="three primals, two outputs, a matmul"),
        case("square_and_cube", label="fn(x, y) = (x * x * y, (x - y) ** 3)"),
    ],
    wrong=[
        wrong(
            _no_tangents,
            "the tangents are d loss / d output, chosen by the caller: pass them to "
            "torch.autograd.grad as grad_outputs. Summing the outputs first is the same as "
            "tangents of all ones.",
        ),
        wrong(
            _backward,
            ".backward() accumulates into the primals' .grad: the caller's gradient from an "
            "earlier step changed, and the grads you read from .grad include it. A joint "
            "function must be pure: torch.autograd.grad returns the grads and writes nothing.",
        ),
        wrong(
            _backward_then_wipe,
            "the grads are right, but the caller's .grad is gone: you set it to None. A "
            "training loop that accumulates over micro-batches keeps a gradient there, and a "
            "joint function may not touch it (nor create one). Ask autograd for the "
            "gradients as values instead of reading .grad.",
        ),
        wrong(
            _first_output_only,
            "every output with a tangent contributes to the gradient: pass all the outputs "
            "and all the tangents to torch.autograd.grad, not only the first.",
        ),
        wrong(
            _first_primal_only,
            "a joint returns one grad per primal, in the primals' order: ask "
            "torch.autograd.grad for the gradients of all the primals.",
        ),
        wrong(
            _detached,
            "the primals already require grad (the tracer gives them requires_grad=True); "
            "detaching them cuts the outputs off from autograd, so there is nothing to "
            "differentiate.",
        ),
    ],
    right=[_vjp_by_dot_products, _grad_with_lists],
    hint="a joint computes a vector-Jacobian product: the outputs, and the gradient of "
    "sum_k <tangents[k], outs[k]> with respect to every primal, as values it returns, "
    "touching nothing the caller owns.",
)

# --- Exercise 6.2: predict which outputs get a tangent -------------------------------------


def _five_outputs_tangent_mask():
    """Exercise 6.2's program, run by torch: per output, does the joint take a tangent for it?"""
    gm = export_graph_module(*seeded(FiveOutputs, five_outputs_args))
    with_tangent = {
        repr(n.meta["desc"].output)
        for n in gm.graph.find_nodes(op="placeholder")
        if type(n.meta["desc"]).__name__ == "TangentAOTInput"
    }
    return [f"PlainAOTOutput(idx={i})" in with_tangent for i in range(5)]


predict(
    "6.2",
    name="predicted_tangent_mask",
    title="Predict which outputs get a tangent",
    truth=_five_outputs_tangent_mask,
    solution=predicted_tangent_mask,
    wrong=[
        wrong(
            [True] * 5,
            "a tangent is d loss / d output, fed back into the backward: only an "
            "output that can carry a gradient gets one (it requires grad, is a float, and is "
            "not an alias of an input).",
        ),
        wrong(
            [True, True, False, False, True],
            "x[0] is a view of the input x: torch regenerates it from x outside the graph, so "
            "the joint takes no tangent for it (gradients reach x through the other outputs).",
        ),
        wrong(
            [True, False, True, False, True],
            "argmax returns an integer tensor: nothing can flow back through an integer, so it "
            "gets no tangent.",
        ),
        wrong(
            [True, False, False, True, True],
            "y does not require grad, so y * 2 does not either: no gradient can flow back "
            "through it, and it gets no tangent.",
        ),
        wrong(
            [True, False, False, False, False],
            "(x * y).sum() depends on x, which requires grad: it is a differentiable output "
            "(a 0-d one) and gets a tangent like any other.",
        ),
    ],
    right=[
        (True, False, False, False, True),
        [1, 0, 0, 0, 1],
        numpy.array([True, False, False, False, True]),
    ],
    hint="an output gets a tangent when it requires grad, is a float tensor, and does not alias "
    "an input (or another output).",
)

# --- Exercise 6.3: predict the placeholders -------------------------------------------------


def _accumulate_placeholders():
    """Exercise 6.3's program, run by torch: the placeholder descriptors' reprs."""
    gm = export_graph_module(*seeded(Accumulate, accumulate_args))
    return [repr(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")]


_WEIGHT, _STEPS = "ParamAOTInput(target='w')", "BufferAOTInput(target='steps')"
_X, _H = "PlainAOTInput(idx=0)", "PlainAOTInput(idx=1)"
_T_H = "TangentAOTInput(output=InputMutationAOTOutput(mutated_input=PlainAOTInput(idx=1)))"
_T_S = "TangentAOTInput(output=InputMutationAOTOutput(mutated_input=BufferAOTInput(target='steps')))"
_T_OUT = "TangentAOTInput(output=PlainAOTOutput(idx=0))"


def _read_descriptors(answer):
    """6.3's prediction in any spelling: strings with either quotes or extra spaces, or
    course's or torch's descriptor objects, read into the canonical reprs."""
    if not isinstance(answer, (list, tuple)):
        return answer  # judged as it is (and found to be no list)
    reprs = descriptor_reprs(answer)
    if reprs is None:
        unreadable = next(item for item in answer if descriptor_reprs([item]) is None)
        raise ValueError(
            f"{unreadable!r} is not a descriptor; write each placeholder as a "
            "descriptor's repr, such as \"ParamAOTInput(target='w')\", or the object"
        )
    return reprs


def _right_6_3():
    """6.3's answer written three other ways: double quotes and spaces, course's objects,
    torch's objects."""
    spaced = [
        'ParamAOTInput(target="w")',
        'BufferAOTInput( target = "steps" )',
        "PlainAOTInput(0)",
        "PlainAOTInput(idx=1)",
        "TangentAOTInput(InputMutationAOTOutput(PlainAOTInput(1)))",
        "TangentAOTInput(output=PlainAOTOutput(idx=0))",
    ]
    objects = [
        cd.ParamAOTInput("w"),
        cd.BufferAOTInput("steps"),
        cd.PlainAOTInput(0),
        cd.PlainAOTInput(1),
        cd.TangentAOTInput(cd.InputMutationAOTOutput(cd.PlainAOTInput(1))),
        cd.TangentAOTInput(cd.PlainAOTOutput(0)),
    ]
    return [spaced, objects, [cd.to_torch(d) for d in objects]]


predict(
    "6.3",
    name="predicted_placeholders",
    title="Predict the joint's placeholders when inputs are mutated",
    truth=_accumulate_placeholders,
    solution=predicted_placeholders,
    wrong=[
        wrong(
            [_WEIGHT, _STEPS, _X, _H, _T_OUT],
            "h.mul_(self.w) makes h's new value depend on w, so it requires grad: the "
            "mutation is an output (InputMutationAOTOutput) that can carry a gradient, and it "
            "gets a tangent like any other differentiable output.",
        ),
        wrong(
            [_WEIGHT, _STEPS, _X, _H, _T_S, _T_H, _T_OUT],
            "steps is an integer counter (add_(1)): its new value cannot carry a gradient, "
            "so its mutation output gets no tangent (as BatchNorm's running stats).",
        ),
        wrong(
            [_WEIGHT, _STEPS, _X, _H, _T_OUT, _T_H],
            "tangents follow the forward outputs' order, and mutations come first: the "
            "mutated inputs' new values, then the user outputs.",
        ),
        wrong(
            [_WEIGHT, _X, _H, _T_H, _T_OUT],
            "a buffer is an input of the functional program even when forward only updates "
            "it: BufferAOTInput(target='steps'), after the parameters.",
        ),
        wrong(
            [_WEIGHT, _STEPS, _X, _T_H, _T_OUT],
            "h is still an input (PlainAOTInput(idx=1)); mutating it does not remove it, it "
            "adds an output holding its new value.",
        ),
    ],
    parse=_read_descriptors,
    right=_right_6_3(),
    hint="placeholders: parameters, buffers, every user input, then one tangent per forward "
    "output that can carry a gradient, in output order (mutated inputs' new values first).",
)

# --- Exercise 6.4: play the runtime: copy the mutations back ------------------------------


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
