"""Exercise 1.2, the gradient at an edge, after an in-place op: how a call is run and observed, the
oracle, the visible and hidden cases, and the known wrong answers (each with the hint it earns) and
right answers written differently.
"""

from __future__ import annotations

import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course.autograd.graph import get_gradient_edge
from course.checks import case, exercise, wrong
from course.checks.solutions.lesson01 import pre_relu_grad


def _pre_relu_oracle(x, W1, W2):
    a = x @ W1  # no in-place op: keep the pre-activation as its own tensor
    loss = (a.relu() @ W2).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, a)
    return grad


def _grad_of_z_after_relu(x, W1, W2):
    z = x @ W1
    z.relu_()
    loss = (z @ W2).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, z)
    return grad


def _dot_grad_of_non_leaf(x, W1, W2):
    z = x @ W1
    z.relu_()
    (z @ W2).pow(2).sum().backward()
    with warnings.catch_warnings():  # torch warns that .grad of a non-leaf is not populated
        warnings.simplefilter("ignore")
        return z.grad


def _edge_of_the_leaf(x, W1, W2):
    z = x @ W1
    edge = get_gradient_edge(W1)
    z.relu_()
    (grad,) = torch.autograd.grad((z @ W2).pow(2).sum(), edge)
    return grad


class _InPlaceOps(TorchDispatchMode):
    """Counts the ops that write into a tensor (relu_, add_, ...) while it is entered."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func._schema.is_mutable
        return func(*args, **(kwargs or {}))


class _EdgeInputs:
    """Notes whether a backward pass run while it is entered was asked for the gradient at a
    GradientEdge (``torch.autograd.grad(loss, edge)``, or ``backward(inputs=[edge])``).

    Every Python route into the engine (``torch.autograd.grad``, ``.backward()``, however the
    answer imported them) goes through ``torch.autograd._engine_run_backward``; this wraps that
    name and reads its ``inputs`` argument (the fifth), then calls the real one unchanged.

    Example:
        >>> a = torch.ones(2, requires_grad=True)
        >>> with _EdgeInputs() as seen:
        ...     _ = torch.autograd.grad((a * 2).sum(), a)
        >>> seen.edge
        False
        >>> with _EdgeInputs() as seen:
        ...     _ = torch.autograd.grad((a * 2).sum(), get_gradient_edge(a))
        >>> seen.edge
        True
    """

    def __enter__(self):
        self.edge = False
        self._real = real = torch.autograd._engine_run_backward

        def watched(outputs, *args, **kwargs):
            inputs = kwargs.get("inputs", args[3] if len(args) > 3 else ())
            self.edge |= any(isinstance(i, torch.autograd.graph.GradientEdge) for i in inputs or ())
            return real(outputs, *args, **kwargs)

        torch.autograd._engine_run_backward = watched
        return self

    def __exit__(self, *exc):
        torch.autograd._engine_run_backward = self._real
        return False


def _pre_relu_run(answer, x, W1, W2):
    """The gradient (and whether it still holds a graph), whether the answer changed a tensor
    in place and took the gradient at a GradientEdge (the point of the exercise: the oracle
    needs neither to know the value), and the caller's weights' .grad afterwards (they should
    stay None)."""
    with _InPlaceOps() as writes, _EdgeInputs() as seen:
        grad = answer(x, W1, W2)
    return {
        "gradient": grad,
        "gradient requires grad": getattr(grad, "requires_grad", None),
        "relu applied in place": answer is _pre_relu_oracle or writes.count > 0,
        "gradient taken at a GradientEdge": answer is _pre_relu_oracle or seen.edge,
        "W1.grad after": W1.grad,
        "W2.grad after": W2.grad,
    }


def _no_in_place_op(x, W1, W2):
    """BAD for this exercise: the right value, with the pre-activation kept as its own tensor."""
    a = x @ W1
    return torch.autograd.grad((a.relu() @ W2).pow(2).sum(), a)[0]


def _grad_at_a_copy(x, W1, W2):
    """BAD for this exercise: relu_ runs on a copy, so the pre-activation keeps its tensor."""
    a = x @ W1
    z = a.clone()
    z.relu_()
    return torch.autograd.grad((z @ W2).pow(2).sum(), a)[0]


def _freezes_the_weights(x, W1, W2):
    grad = pre_relu_grad(x, W1, W2)
    W1.requires_grad_(False)  # BAD: "done with the weights", but they are the caller's
    W2.requires_grad_(False)
    return grad


def _keeps_its_graph(x, W1, W2):
    z = x @ W1
    edge = get_gradient_edge(z)
    z.relu_()
    return torch.autograd.grad((z @ W2).pow(2).sum(), edge, create_graph=True)[0]


def _backward_and_a_prehook(x, W1, W2):
    z = x @ W1
    edge = get_gradient_edge(z)
    z.relu_()
    got = []
    edge.node.register_prehook(lambda grad_outputs: got.append(grad_outputs[edge.output_nr]))
    (z @ W2).pow(2).sum().backward()  # right value, but fills W1.grad and W2.grad
    return got[0]


def _torch_edge(x, W1, W2):  # right, written differently: torch's get_gradient_edge
    z = torch.mm(x, W1)
    edge = torch.autograd.graph.get_gradient_edge(z)
    torch.relu_(z)
    return torch.autograd.grad([(z @ W2).square().sum()], [edge])[0]


def _weights(seed, n, d, h, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=dtype)
    W1 = torch.randn(d, h, generator=g, dtype=dtype).requires_grad_()
    W2 = torch.randn(h, 1, generator=g, dtype=dtype).requires_grad_()
    return x, W1, W2


exercise(
    "1.2",
    name="pre_relu_grad",
    title="The gradient at an edge, after the tensor changed in place",
    solution=pre_relu_grad,
    oracle=_pre_relu_oracle,
    run=_pre_relu_run,
    points=2,
    cases=[case(*_weights(0, 4, 3, 5), label="x (4, 3), W1 (3, 5), W2 (5, 1), from torch.randn with seed 0")],
    hidden=[
        case(*_weights(1, 8, 2, 6), label="8 samples, 2 features, 6 hidden units"),
        case(*_weights(2, 1, 4, 3, torch.float64), label="one float64 sample"),
    ],
    wrong=[
        wrong(
            _grad_of_z_after_relu,
            "after z.relu_() the name z stands for relu's output (its grad_fn is now "
            "ReluBackward0), so grad(loss, z) is the gradient after the relu. Take "
            "get_gradient_edge(z) before relu_: the edge still names MmBackward0's output.",
        ),
        wrong(
            _dot_grad_of_non_leaf,
            "z is not a leaf: backward() fills .grad only on leaves (unless you call "
            "z.retain_grad()), so z.grad is None. Ask for the gradient explicitly: "
            "torch.autograd.grad(loss, edge).",
        ),
        wrong(
            _edge_of_the_leaf,
            "get_gradient_edge(W1) is the edge into W1's AccumulateGrad: that gives "
            "d loss / d W1, shape (D, H). We want the edge of the non-leaf z = x @ W1.",
        ),
        wrong(
            _backward_and_a_prehook,
            "right gradient, but .backward() also wrote into W1.grad and W2.grad: the caller's "
            "weights now hold gradients nobody asked for. torch.autograd.grad(loss, edge) "
            "returns the gradient and leaves every .grad alone.",
        ),
        wrong(
            _no_in_place_op,
            "right value, but with relu out of place the pre-activation keeps its own tensor, "
            "and the exercise is gone: apply relu_ in place, as the spec says, and find the "
            "gradient at the place in the graph that the tensor no longer names.",
        ),
        wrong(
            _grad_at_a_copy,
            "right value, but relu_ ran on a copy: the clone gives the pre-activation back a "
            "tensor of its own (one more (N, H) buffer), and no gradient edge was used. In a "
            "model you do not write, the in-place op is inside someone else's forward and "
            "there is no copy to take: the edge is the one handle on that place in the graph. "
            "Take get_gradient_edge(z) before z.relu_() and hand the edge to torch.autograd.grad.",
        ),
        wrong(
            _freezes_the_weights,
            "right gradient, but W1 and W2 come back with requires_grad=False: the caller's "
            "model would stop training. Leave what you are handed as it was.",
        ),
        wrong(
            _keeps_its_graph,
            "create_graph=True returns a gradient that is itself part of a graph (it requires "
            "grad and keeps the whole graph alive); a plain gradient needs no create_graph.",
        ),
    ],
    right=[_torch_edge],
    hint="the gradient you want belongs to a place in the graph (the matmul's output), not to "
    "the tensor z, which relu_ changes: name that place before the in-place op, and ask "
    "autograd for the gradient there without touching any leaf's .grad.",
)
