"""Exercise 0.1, the gradient of sum(x**3), by autograd: how a call is run and observed, the oracle,
the visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch

from course.checks import case, exercise, wrong
from course.checks.solutions.lesson00 import cube_sum_grad


def _oracle(x):
    x = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad((x**3).sum(), x)  # torch says what is right
    return grad


class _CountNodes(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@contextlib.contextmanager
def _engine_watch() -> Iterator[_CountNodes]:
    """Count the nodes autograd's engine executes in the block. At DEBUG, torch's
    ``_engine_run_backward`` (behind every ``.backward()`` and ``autograd.grad``) logs one
    record per node to the logger ``torch.autograd.graph`` (lesson 2 shows it)."""
    log, counter = logging.getLogger("torch.autograd.graph"), _CountNodes()
    level, propagate = log.level, log.propagate
    log.addHandler(counter)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    try:
        yield counter
    finally:
        log.removeHandler(counter)
        log.setLevel(level)
        log.propagate = propagate


def _cube_run(answer, x):
    """What a call observes: the gradient (and whether it is still attached to a graph),
    whether autograd's engine ran, and whether the caller's tensor came back as it was given
    (no requires_grad, no .grad, same values)."""
    before = x.clone()
    with _engine_watch() as nodes:
        grad = answer(x)
    return {
        "gradient": grad,
        "gradient requires grad": bool(getattr(grad, "requires_grad", False)),  # a list requires none
        "autograd ran": nodes.count > 0,
        "x.requires_grad after": x.requires_grad,
        "x.grad after": x.grad,
        "x's values unchanged": torch.equal(x.detach(), before),
    }


def _on_the_callers_tensor(x):
    x.requires_grad_()  # turns on requires_grad of the caller's own tensor
    (x**3).sum().backward()
    return x.grad


def _by_the_formula(x):
    return 3 * x**2


def _power_rule_off_by_one(x):
    return 3 * x  # BAD: the derivative of x**3 is 3 * x**2


def _by_autograd_grad(x):  # right, written differently: no .backward(), no .grad
    leaf = x.clone().requires_grad_()
    return torch.autograd.grad(leaf.pow(3).sum(), [leaf])[0]


def _by_torch_func(x):  # right: torch.func's grad transform, which runs autograd's engine too
    return torch.func.grad(lambda t: t.pow(3).sum())(x)


def _of_the_mean(x):
    x = x.detach().requires_grad_()
    (x**3).mean().backward()  # BAD: the mean divides every gradient by x.numel()
    return x.grad


def _by_a_fresh_leaf(x):  # right: a new tensor with the same values
    leaf = torch.tensor(x.tolist(), dtype=x.dtype, requires_grad=True)
    torch.sum(leaf * leaf * leaf).backward()
    return leaf.grad


def _forgot_backward(x):
    x = x.detach().requires_grad_()
    (x**3).sum()
    return x.grad


def _backward_on_the_vector(x):
    x = x.detach().requires_grad_()
    (x**3).backward()  # BAD: x**3 has one value per element; backward() wants one number
    return x.grad


def _never_required_grad(x):
    (x**3).sum().backward()
    return x.grad


def _keeps_the_graph(x):
    x = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad((x**3).sum(), x, create_graph=True)
    return grad  # right values, but still attached to a graph (requires grad)


def _turns_grad_mode_off(x):
    grad = cube_sum_grad(x)
    torch.set_grad_enabled(False)  # BAD: "no more graphs" for the caller's next cells too
    return grad


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
    run=_cube_run,
    points=2,
    cases=[case(torch.tensor([1.0, 2.0, 3.0]))],
    hidden=[
        case(torch.tensor([[-1.0, 0.5], [2.0, -3.0]]), label="a 2-D tensor with negative entries"),
        case(torch.tensor(1.5), label="a 0-d tensor"),
        case(torch.tensor([0.25, -2.0], dtype=torch.float64), label="a float64 tensor"),
    ],
    wrong=[
        wrong(
            _forgot_backward,
            "x.grad stays None until something calls .backward() on a result that depends on x.",
        ),
        wrong(
            _never_required_grad,
            "autograd records only what happens to tensors that require grad: make x a leaf that "
            "requires grad (x = x.detach().requires_grad_()) before computing with it.",
        ),
        wrong(_backward_twice, "each .backward() adds into .grad: call it once (or zero .grad in between)."),
        wrong(
            _backward_on_the_vector,
            "your leaf is right; the error is about what you call backward() on: x**3 holds one "
            "value per element, and backward() with no argument needs a single number (a "
            "scalar). Reduce first, as the exercise's sum(x**3) says.",
        ),
        wrong(
            _power_rule_off_by_one,
            "the derivative of x**3 is 3 * x**2; better still, let autograd compute it.",
        ),
        wrong(
            _of_the_mean,
            "that is the gradient of the mean: mean() divides by the number of elements, and so "
            "does every entry of its gradient. The exercise differentiates the sum.",
        ),
        wrong(
            _on_the_callers_tensor,
            "your function changed the caller's tensor: x came back with requires_grad=True and "
            "a .grad. Work on a leaf of your own, made from x (x.detach() or x.clone(), then "
            "requires_grad_()), and leave the argument as it was given.",
        ),
        wrong(
            _by_the_formula,
            "right numbers, but written down by hand: the exercise is to let autograd compute "
            "them (no backward pass ran). Build a leaf, compute the sum of cubes, and call "
            "backward (or torch.autograd.grad).",
        ),
        wrong(
            _keeps_the_graph,
            "create_graph=True keeps the gradient attached to a graph (it requires grad and "
            "holds the graph alive); a plain gradient needs no create_graph.",
        ),
        wrong(
            _turns_grad_mode_off,
            "right gradient, but grad mode stays off after your function returns: every later "
            "cell of the notebook would record no graph. Switch it off only inside a with "
            "torch.no_grad(): block, if at all.",
        ),
    ],
    right=[_by_autograd_grad, _by_a_fresh_leaf, _by_torch_func],
    hint="autograd writes a gradient only into a leaf that requires grad, and only when a "
    "backward pass runs from a result that depends on it: make that leaf from x (not x itself).",
)
