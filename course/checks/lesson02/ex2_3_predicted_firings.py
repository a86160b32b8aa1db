"""Exercise 2.3, predict what a mode="all" multi-grad hook receives: the program torch runs for the
truth, the prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch.autograd.graph as tg

from course.checks import predict, wrong
from course.checks.solutions.lesson02 import predicted_firings
from course.content.lesson02 import (
    MULTI_PROGRAMS,
    multi_graph,
)


def _multi_grad_firings(program, register=tg.register_multi_grad_hook):
    """Run ``program`` on a fresh graph with ``register((c, d), fn)`` in mode "all"; return
    one tuple per call of fn: which of (c, d) got a gradient (True) or None (False)."""
    a, b, c, d, e = multi_graph()
    firings = []
    register((c, d), lambda grads: firings.append(tuple(g is not None for g in grads)))
    program(a, b, c, d, e)
    return firings


def _which_fire():
    return {key: _multi_grad_firings(program) for key, program in MULTI_PROGRAMS.items()}


_BOTH_GRADS, _FIRST_GRAD_ONLY, _SECOND_GRAD_ONLY = (True, True), (True, False), (False, True)
_RIGHT_FIRINGS = {
    "e.sum().backward()": [_BOTH_GRADS],
    "c.sum().backward()": [_FIRST_GRAD_ONLY],
    "e.sum().backward(inputs=[a])": [_BOTH_GRADS],
    "autograd.grad(e.sum(), c)": [_FIRST_GRAD_ONLY],
    "autograd.grad(d.sum(), a)": [_SECOND_GRAD_ONLY],
    "(a * 2).sum().backward()": [],
    "e.sum().backward() twice": [_BOTH_GRADS, _BOTH_GRADS],
}

predict(
    "2.3",
    name="predicted_firings",
    title="Predict when a mode='all' multi-grad hook fires, and with which Nones",
    truth=_which_fire,
    solution=predicted_firings,
    points=2,
    wrong=[
        wrong(
            {k: [_BOTH_GRADS] * len(v) if v else [] for k, v in _RIGHT_FIRINGS.items()},
            "fn gets None for a tensor whose gradient this backward does not compute: c.sum() "
            "does not reach d, and autograd.grad computes only what its inputs need.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "c.sum().backward()": []},
            "mode 'all' does not wait for a gradient that will never come: on the first "
            "gradient it asks the engine which of the group's nodes this backward will run "
            "(torch._C._will_engine_execute_node) and fires when those have arrived, with "
            "None for the others.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "autograd.grad(e.sum(), c)": [_BOTH_GRADS]},
            "autograd.grad(e.sum(), c) runs only the nodes on the way from e to c: d's "
            "gradient is never computed (d is in the graph, but not needed), so fn gets None.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "e.sum().backward(inputs=[a])": [(False, False)]},
            "inputs=[a] does not skip c and d: a's gradient flows through them (e = c * d), "
            "so both gradients are computed on the way.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "(a * 2).sum().backward()": [(False, False)]},
            "the hook is made of tensor hooks on c and d: if neither gets a gradient, nothing "
            "fires at all (fn is never called with all Nones).",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "e.sum().backward() twice": [_BOTH_GRADS]},
            "'once' means once per graph task, and every backward() call is a new graph "
            "task: retain_graph=True lets the second call run, and fn fires again.",
        ),
    ],
    right=[{k: [list(f) for f in v] for k, v in _RIGHT_FIRINGS.items()}],  # lists for tuples
    hint="for each call ask: which of c and d does this backward compute a gradient for? "
    "fn fires once per backward call that computes at least one, with None for the others.",
)
