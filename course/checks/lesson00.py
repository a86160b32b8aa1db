"""Checks for lesson 0, the warm-up: requires_grad, grad_fn, backward() and a leaf's .grad.

Each exercise is registered once, here: its reference solution (what solutions/00_warmup.ipynb
writes), the oracle (torch), visible and hidden cases, and the known wrong answers with the
hint each deserves. See docs/authoring.md.
"""

from __future__ import annotations

import torch

from course.checks import case, exercise, predict, wrong

# --- Exercise 0.1: the gradient of sum(x**3), by autograd -----------------------------------


def cube_sum_grad(x):
    """Reference solution: d/dx sum(x**3), computed by autograd (not by the formula)."""
    x = x.detach().requires_grad_()  # a fresh leaf that records what happens to it
    (x**3).sum().backward()
    return x.grad


def _oracle(x):
    x = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad((x**3).sum(), x)  # torch says what is right
    return grad


def _forgot_backward(x):
    x = x.detach().requires_grad_()
    (x**3).sum()
    return x.grad


def _never_required_grad(x):
    (x**3).sum().backward()
    return x.grad


def _backward_twice(x):
    x = x.detach().requires_grad_()
    y = (x**3).sum()
    y.backward(retain_graph=True)
    y.backward()
    return x.grad


exercise(
    "0.1",
    name="cube_sum_grad",
    title="The gradient of sum(x**3), by autograd",
    solution=cube_sum_grad,
    oracle=_oracle,
    points=2,
    cases=[case(torch.tensor([1.0, 2.0, 3.0]))],
    hidden=[
        case(torch.tensor([[-1.0, 0.5], [2.0, -3.0]]), label="a 2-D tensor with negative entries"),
        case(torch.tensor(1.5), label="a 0-d tensor"),
        case(torch.tensor([0.25, -2.0], dtype=torch.float64), label="a float64 tensor"),
    ],
    wrong=[
        wrong(_forgot_backward, "x.grad stays None until something calls .backward() on a result that depends on x."),
        wrong(
            _never_required_grad,
            "autograd records only what happens to tensors that require grad: make x a leaf that "
            "requires grad (x = x.detach().requires_grad_()) before computing with it.",
        ),
        wrong(_backward_twice, "each .backward() adds into .grad: call it once (or zero .grad in between)."),
        wrong(lambda x: 3 * x, "the derivative of x**3 is 3 * x**2; better still, let autograd compute it."),
    ],
    hint="build a leaf that requires grad, compute (x**3).sum(), call .backward(), return the leaf's .grad.",
)

# --- Exercise 0.2: predict a.grad after two backward passes ----------------------------------


def _two_backwards():
    """The program of exercise 0.2, run by torch."""
    a = torch.tensor(2.0, requires_grad=True)
    b = a * 3
    c = b + a
    c.backward(retain_graph=True)
    c.backward()
    return a.grad


predict(
    "0.2",
    name="predicted_a_grad",
    title="Predict a.grad after two backward passes",
    truth=_two_backwards,
    solution=8.0,
    points=1,
    wrong=[
        wrong(4.0, "gradients accumulate: the second .backward() adds its 4 to the 4 already in a.grad."),
        wrong(
            3.0,
            "a reaches c along two paths, through b = a * 3 (slope 3) and directly (slope 1): "
            "one backward pass gives 3 + 1 = 4.",
        ),
        wrong(6.0, "a reaches c directly too (c = b + a): each pass gives 3 + 1 = 4, not 3."),
        wrong(
            RuntimeError,
            "retain_graph=True keeps the graph's saved tensors after the first pass, so the "
            "second .backward() succeeds; without it, it would raise RuntimeError.",
        ),
    ],
    hint="count the paths from a to c and remember that .grad accumulates across passes.",
)
