"""What lesson 2 (hooks) runs: the clipping program, the multi-grad graphs and their backwards.

solutions/02_hooks.ipynb and the checks of ``course/checks/lesson02/`` run the same
programs, so a notebook cell shows exactly what a check judges:

    >>> x, W, b = clip_leaves()                 # exercise 2.2's inputs
    >>> h, loss = clip_forward(x, W, b, 1.0)    # h feeds two branches
    >>> h.shape, W.requires_grad, x.requires_grad
    (torch.Size([4, 2]), True, False)
    >>> a, b, c, d, e = multi_graph()           # exercise 2.3's graph: c = a * b, d = a + b, e = c * d
    >>> MULTI_PROGRAMS["c.sum().backward()"](a, b, c, d, e)
    >>> a.grad
    tensor([3., 4.])
    >>> g = any_graph()                         # exercise 2.4's tensors, by name
    >>> ANY_ACTIONS["c.backward"](g)
    >>> g["b"].grad
    tensor([1., 2.])
    >>> model, x = norm_model(frozen=("0.bias",))  # exercise 2.5's model, one bias frozen
    >>> [name for name, p in model.named_parameters() if p.requires_grad]
    ['0.weight', '2.weight', '2.bias']
    >>> NORM_ACTIONS["head only"](model, x)
    >>> model[0].weight.grad is None, model[2].weight.grad.shape
    (True, torch.Size([2, 4]))

- exercise 2.2: ``clip_leaves`` and ``clip_forward``, the program whose gradient a tensor
  hook clips;
- exercise 2.3: ``multi_graph`` and ``MULTI_PROGRAMS``, seven ways of running backward on it;
- exercise 2.4: ``any_graph`` (the same graph, plus a tensor that needs no grad) and
  ``ANY_ACTIONS``, the backward calls run one after another on it;
- exercise 2.5: ``norm_model`` (a two-layer model whose parameters' gradient norms a
  monitor adds up) and ``NORM_ACTIONS``, backward calls that reach all, some or none of them.

Nothing here judges an answer: the truths of the predictions (2.1 and 2.3), the oracles,
hidden cases and known wrong answers live in ``course/checks/lesson02/``.
"""

from __future__ import annotations

import torch

__all__ = [
    "ANY_ACTIONS",
    "MULTI_PROGRAMS",
    "NORM_ACTIONS",
    "any_graph",
    "clip_forward",
    "clip_leaves",
    "multi_graph",
    "norm_model",
]

# --- Exercise 2.2: the program a tensor hook clips ----------------------------------------


def clip_leaves():
    """The inputs of exercise 2.2's program: x needs no grad; W and b are leaves."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g)
    W = torch.randn(3, 2, generator=g).requires_grad_()
    b = torch.zeros(2, requires_grad=True)
    return x, W, b


def clip_forward(x, W, b, scale):
    """h = x @ W + b feeds two branches, so the gradient reaching h is a sum of two."""
    h = x @ W + b  # (4, 2)
    loss = scale * (h.tanh().sum() + (h**2).sum())
    return h, loss


# --- Exercise 2.3: one graph, seven backward calls ----------------------------------------


def multi_graph():
    """A fresh graph (a, b, c, d, e): leaves a and b, c = a * b, d = a + b, e = c * d."""
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    c = a * b
    d = a + b
    e = c * d
    return a, b, c, d, e


def _twice(a, b, c, d, e):
    e.sum().backward(retain_graph=True)
    e.sum().backward()


#: The programs of exercise 2.3: each gets a fresh graph (a, b, c, d, e) and calls backward.
MULTI_PROGRAMS = {
    "e.sum().backward()": lambda a, b, c, d, e: e.sum().backward(),
    "c.sum().backward()": lambda a, b, c, d, e: c.sum().backward(),
    "e.sum().backward(inputs=[a])": lambda a, b, c, d, e: e.sum().backward(inputs=[a]),
    "autograd.grad(e.sum(), c)": lambda a, b, c, d, e: torch.autograd.grad(e.sum(), c),
    "autograd.grad(d.sum(), a)": lambda a, b, c, d, e: torch.autograd.grad(d.sum(), a),
    "(a * 2).sum().backward()": lambda a, b, c, d, e: (a * 2).sum().backward(),
    "e.sum().backward() twice": _twice,
}

# --- Exercise 2.4: backward calls, one after another --------------------------------------


def any_graph():
    """Exercise 2.4's tensors by name: the a, b, c = a * b, d = a + b of ``multi_graph``, and
    f, which needs no grad."""
    a, b, c, d, _ = multi_graph()
    return {"a": a, "b": b, "c": c, "d": d, "f": torch.tensor([5.0, 6.0])}


#: The backward calls of exercise 2.4, by name; each keeps the graph for the next one.
ANY_ACTIONS = {
    "loss.backward": lambda g: (2 * g["c"] + 3 * g["d"]).sum().backward(retain_graph=True),
    "c.backward": lambda g: g["c"].sum().backward(retain_graph=True),
    "grad(d, b)": lambda g: torch.autograd.grad(g["d"].sum(), g["b"], retain_graph=True),
    "b.backward": lambda g: (g["b"] * 5).sum().backward(),
}

# --- Exercise 2.5: a monitor that reports once per backward -------------------------------


def norm_model(frozen=()):
    """Exercise 2.5's model and input: Linear(3, 4), Tanh, Linear(4, 2), its values drawn from
    a generator of its own (seed 0); the parameters named in ``frozen`` need no grad."""
    g = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g))
            p.requires_grad_(name not in frozen)
    x = torch.randn(5, 3, generator=g)  # (batch 5, features 3)
    return model, x


def _loss(model, x):
    return model(x).pow(2).sum()


#: The backward calls of exercise 2.5, by name: each reaches all, some or none of the parameters.
NORM_ACTIONS = {
    "loss.backward": lambda model, x: _loss(model, x).backward(),
    "head only": lambda model, x: model[2](torch.ones(1, 4)).sum().backward(),  # 2.weight, 2.bias
    "grad(loss, 0.weight)": lambda model, x: torch.autograd.grad(_loss(model, x), model[0].weight),
    "no parameter": lambda model, x: torch.ones(2, requires_grad=True).mul(2).sum().backward(),
}
