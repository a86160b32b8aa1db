"""What lesson 1 (the autograd graph) runs: the graphs a learner walks, the in-place programs.

Two sets of programs, each run by solutions/01_autograd_graph.ipynb and by the checks of
``course/checks/lesson01/``, so the notebook shows exactly what a check judges:

    >>> loss = GRAPHS["shared"]()      # each call builds a fresh graph
    >>> loss.grad_fn.name()
    'SumBackward0'
    >>> y = INPLACE_PROGRAMS["exp_add"](torch.ones(3, requires_grad=True))
    >>> y.grad_fn.name()               # what the in-place op left as y's node
    'AddBackward0'

- ``GRAPHS`` (exercise 1.1): losses whose graphs have the shapes a breadth-first walk must
  handle: ``None`` edges (inputs that need no grad), a node that feeds two, a node with two
  outputs, residual blocks;
- ``INPLACE_PROGRAMS`` (exercise 1.3): five programs that change a tensor in place before
  backward. Which of them backward refuses is the exercise's question, so this module does
  not say (the answer key does).

Nothing here judges an answer: the walk's oracle, the truth of 1.3 and the known wrong
answers live in ``course/checks/lesson01/``.
"""

from __future__ import annotations

import torch

__all__ = ["GRAPHS", "INPLACE_PROGRAMS"]

# --- Exercise 1.1: graphs to walk ---------------------------------------------------------


def _mlp_loss():
    """A two-layer MLP's loss: x and y need no grad, so some edges are None."""
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 3, generator=g), torch.randn(4, 1, generator=g)
    W1 = torch.randn(3, 5, generator=g).requires_grad_()
    b1 = torch.zeros(5, requires_grad=True)
    W2 = torch.randn(5, 1, generator=g).requires_grad_()
    h = torch.relu(x @ W1 + b1)
    return ((h @ W2 - y) ** 2).mean()


def _shared_loss():
    """h feeds two nodes, so its node is reached twice."""
    w = torch.ones(3, requires_grad=True)
    h = w * 2
    return (h.sin() + h.cos()).sum()


def _unbind_loss():
    """One node with two outputs: both edges of MulBackward0 lead to the same UnbindBackward0."""
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    a, b = w.unbind()
    return a * b + w.sum()


def _deep_loss():
    """A residual chain: every block's input reaches the output two ways."""
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    h = w
    for _ in range(3):
        h = h + h.tanh()
    return h.sum()


#: The graphs exercise 1.1 walks, by name: each builds a fresh loss.
GRAPHS = {"mlp": _mlp_loss, "shared": _shared_loss, "unbind": _unbind_loss, "deep": _deep_loss}

# --- Exercise 1.3: programs that change a tensor in place ---------------------------------
# Each starts from x = torch.ones(3, requires_grad=True) and returns y; the lesson (and the
# check) then calls y.sum().backward().


def _exp_add_(x):
    return x.exp().add_(1)


def _double_add_(x):
    return (x * 2).add_(1)


def _sigmoid_mul_(x):
    return x.sigmoid().mul_(2)


def _sin_add_(x):
    return x.sin().add_(1)


def _sin_input_add_(x):
    a = x * 1
    y = a.sin()
    a.add_(1)  # the input of sin, changed after sin ran
    return y


#: The five programs of exercise 1.3, by the key a prediction uses.
INPLACE_PROGRAMS = {
    "exp_add": _exp_add_,
    "double_add": _double_add_,
    "sigmoid_mul": _sigmoid_mul_,
    "sin_add": _sin_add_,
    "sin_input_add": _sin_input_add_,
}
