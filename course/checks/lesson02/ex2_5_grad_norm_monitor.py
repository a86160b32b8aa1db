"""Exercise 2.5, per-parameter norms in hooks, one report in a queued callback: how a call is run and
observed, the oracle, the visible and hidden cases, and the known wrong answers (each with the hint
it earns) and right answers written differently.
"""

from __future__ import annotations

import math

import torch
import torch.autograd.graph as tg
from torch.autograd.variable import Variable

import course.autograd_graph as cg
from course.checks import case, exercise, wrong
from course.checks.lesson02._shared import remove_handles
from course.checks.solutions.lesson02 import grad_norm_monitor
from course.content.lesson02 import (
    NORM_ACTIONS,
    norm_model,
)


def _grads(params):
    return [None if p.grad is None else p.grad.clone() for p in params]


def _same(before, after):
    return (before is None) == (after is None) and (before is None or torch.equal(before, after))


def _monitor_run(answer, frozen, actions, grads_before=False):
    """Hook the model's parameters, run the actions, remove the handles, run once more.

    Observed, for each call of ``report``: the action it ran in, the total it was given, and
    whether every ``.grad`` already held what it holds once backward returned (a report from
    inside backward sees a ``.grad`` not yet filled). Also each parameter's ``.grad`` norm
    after each action (a hook that changed its gradient shows there).
    """
    model, x = norm_model(frozen)
    params = list(model.parameters())
    if grads_before:  # as if an earlier backward had filled them
        for p in params:
            p.grad = torch.ones_like(p) if p.requires_grad else None
    pending, calls, norms = [], [], []
    handles = answer(params, lambda total: pending.append((float(total), _grads(params))))
    for act in actions:
        NORM_ACTIONS[act](model, x)
        for total, seen in pending:
            final = all(_same(g, p.grad) for g, p in zip(seen, params))
            calls.append((act, total, final))
        pending.clear()
        norms.append([None if p.grad is None else p.grad.norm().item() for p in params])
    remove_handles(handles, "grad_norm_monitor")
    NORM_ACTIONS["loss.backward"](model, x)
    return {
        "report calls (action, total, every .grad final)": calls,
        ".grad norms after each action": norms,
        "report calls after remove": len(pending),
    }


def _monitor_oracle(params, report):
    """torch's pieces: grads kept per graph task, the engine's own final-callback queue, and
    torch.nn.utils.get_total_norm (what clip_grad_norm_ computes)."""
    grads = {}  # graph task id -> this backward's gradients

    def hook(grad):
        task = torch._C._current_graph_task_id()
        if task not in grads:
            grads[task] = []
            Variable._execution_engine.queue_callback(
                lambda: report(torch.nn.utils.get_total_norm(grads.pop(task)))
            )
        grads[task].append(grad)

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _reduces_in_the_hook(params, report):
    squares = []

    def hook(grad):
        squares.append(grad.norm() ** 2)
        report(torch.stack(squares).sum().sqrt())  # BAD: runs once per parameter, mid-backward

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _queued_outside_backward(params, report):
    squares = []

    def finish():
        report(torch.stack(squares).sum().sqrt())
        squares.clear()

    cg.queue_callback(finish)  # BAD: no backward is running yet
    return [p.register_hook(lambda grad: squares.append(grad.norm() ** 2)) for p in params if p.requires_grad]


def _one_callback_per_parameter(params, report):
    total = [0.0]

    def finish():
        report(total[0] ** 0.5)
        total[0] = 0.0

    def hook(grad):
        total[0] += grad.norm().item() ** 2
        cg.queue_callback(finish)  # BAD: one callback per gradient, not one per backward

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _never_resets(params, report):
    squares, queued = [], [False]

    def finish():
        queued[0] = False
        report(torch.stack(squares).sum().sqrt())  # BAD: squares still holds earlier backwards'

    def hook(grad):
        if not queued[0]:
            queued[0] = True
            cg.queue_callback(finish)
        squares.append(grad.norm() ** 2)

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _sum_of_norms(params, report):
    norms = []

    def finish():
        report(sum(norms))  # BAD: norms do not add up; their squares do
        norms.clear()

    def hook(grad):
        if not norms:
            cg.queue_callback(finish)
        norms.append(grad.norm())

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _norm_of_accumulated_grad(params, report):
    queued = [False]

    def finish():
        queued[0] = False
        grads = [p.grad for p in params if p.grad is not None]  # BAD: .grad holds earlier sums too
        report(torch.stack([g.norm() for g in grads]).norm())

    def hook(grad):
        if not queued[0]:
            queued[0] = True
            cg.queue_callback(finish)

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _reduces_in_a_multi_grad_hook(params, report):
    def fn(grads):  # BAD: fires at the group's last gradient, before it reaches .grad
        report(torch.stack([g.norm() for g in grads if g is not None]).norm())

    handle = tg.register_multi_grad_hook([p for p in params if p.requires_grad], fn)
    return list(handle.handles)


def _hooks_on_frozen_params(params, report):
    squares = []

    def finish():
        report(torch.stack(squares).sum().sqrt())
        squares.clear()

    def hook(grad):
        if not squares:
            cg.queue_callback(finish)
        squares.append(grad.norm() ** 2)

    return [p.register_hook(hook) for p in params]  # BAD: a frozen parameter cannot take a hook


def _squares_in_place(params, report):
    squares = []

    def finish():
        report(torch.stack(squares).sum().sqrt())
        squares.clear()

    def hook(grad):
        if not squares:
            cg.queue_callback(finish)
        squares.append(grad.pow_(2).sum())  # BAD: squares the gradient itself

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _no_monitor_handles(params, report):
    grad_norm_monitor(params, report)


def _keyed_by_graph_task(params, report):  # right, written differently: a float, per-task state
    totals = {}

    def hook(grad):
        task = torch._C._current_graph_task_id()
        if task not in totals:
            totals[task] = 0.0
            Variable._execution_engine.queue_callback(lambda: report(math.sqrt(totals.pop(task))))
        totals[task] += grad.norm().item() ** 2

    return tuple(p.register_hook(hook) for p in params if p.requires_grad)


def _vector_norm_of_norms(params, report):  # right, written differently: a flag and vector_norm
    norms, queued = [], [False]

    def finish():
        queued[0] = False
        report(torch.linalg.vector_norm(torch.stack(norms)))
        norms.clear()

    def hook(grad):
        if not queued[0]:
            queued[0] = True
            cg.queue_callback(finish)
        norms.append(torch.linalg.vector_norm(grad))

    return [p.register_hook(hook) for p in params if p.requires_grad]


_EVERY_ACTION = ["loss.backward", "head only", "grad(loss, 0.weight)", "no parameter", "loss.backward"]

exercise(
    "2.5",
    name="grad_norm_monitor",
    title="Gradient norms in tensor hooks, one report in a queued callback",
    solution=grad_norm_monitor,
    oracle=_monitor_oracle,
    run=_monitor_run,
    points=2,
    cases=[
        case((), ["loss.backward", "loss.backward"], label="two backwards of the loss, no zero_grad between")
    ],
    hidden=[
        case((), _EVERY_ACTION, label="backwards that reach all, some and none of the parameters"),
        case(("0.bias",), ["loss.backward", "loss.backward"], label="0.bias is frozen (needs no grad)"),
        case((), ["loss.backward"], True, label="every .grad already holds ones from an earlier backward"),
    ],
    wrong=[
        wrong(
            _reduces_in_the_hook,
            "a tensor hook runs once per parameter, in the middle of backward: reporting there "
            "reports several partial totals. Record the norm in the hook, and report once, from "
            "a callback the hook queues with queue_callback on the first gradient of a backward.",
        ),
        wrong(
            _queued_outside_backward,
            "queue_callback appends to the list of the backward running on this thread, and "
            "when grad_norm_monitor is called none is running (RuntimeError). Queue it from "
            "the hook, when the first gradient of each backward arrives.",
        ),
        wrong(
            _one_callback_per_parameter,
            "every hook queues a callback, so the callback runs once per parameter (the first "
            "reports the total, the others what is left). Queue it only on the first gradient "
            "of each backward.",
        ),
        wrong(
            _never_resets,
            "the second backward's report includes the first backward's gradients: empty your "
            "list (or total) in the callback, once it has reported.",
        ),
        wrong(
            _sum_of_norms,
            "norms do not add up: the total norm is the square root of the sum of the "
            "*squared* norms, as if all gradients were one long vector.",
        ),
        wrong(
            _norm_of_accumulated_grad,
            "p.grad holds the sum of every backward since it was last cleared: the second "
            "backward (or a .grad filled before) makes it too big. Use the gradient your "
            "hook is given: it is this backward's alone.",
        ),
        wrong(
            _reduces_in_a_multi_grad_hook,
            "register_multi_grad_hook fires at the group's last gradient, inside backward, "
            "before that gradient reaches .grad (and it cannot run over leaves under "
            "autograd.grad). A callback queued with queue_callback runs once every node "
            "has run, every .grad filled.",
        ),
        wrong(
            _hooks_on_frozen_params,
            "register_hook raises on a parameter that does not require grad (a frozen one): "
            "skip those, they never get a gradient.",
        ),
        wrong(
            _squares_in_place,
            "your hook squared the gradient in place (grad.pow_), so .grad holds squares: "
            "compute the norm from grad without changing it.",
        ),
        wrong(
            _no_monitor_handles,
            "return the handles (the list of what register_hook returned), so the caller "
            "can remove the monitor.",
        ),
    ],
    right=[_keyed_by_graph_task, _vector_norm_of_norms],
    hint="a tensor hook on each parameter that requires grad keeps its gradient's norm; the "
    "first gradient of each backward queues one callback, which reports the total norm "
    "(the square root of the sum of squares) once backward is over, and starts again from zero.",
)
