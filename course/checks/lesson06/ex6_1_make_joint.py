"""Exercise 6.1, a joint function by hand: how a call is run and observed, the oracle, the visible and
hidden cases, and the known wrong answers (each with the hint it earns) and right answers written
differently.
"""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from course.checks import case, exercise, wrong
from course.checks.solutions.lesson06 import make_joint


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
