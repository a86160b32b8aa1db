"""Exercise 2.2, clip a gradient by its norm, with a tensor hook: how a call is run and observed, the
oracle, the visible and hidden cases, and the known wrong answers (each with the hint it earns) and
right answers written differently.
"""

from __future__ import annotations

import torch

from course.checks import case, exercise, wrong
from course.checks.solutions.lesson02 import clip_grad_hook
from course.content.lesson02 import (
    clip_forward,
    clip_leaves,
)


def _clip_run(answer, target, max_norm, scale):
    """Register the answer's hook on h or W, run backward, remove it, run backward again.

    W starts with a gradient from an earlier backward (ones), so clipping the accumulated
    .grad differs from clipping this backward's gradient. Two hooks of ours sit around the
    answer's (hooks on one tensor run in registration order): the first keeps a copy of the
    gradient the answer's hook is given, the second tells whether that hook changed it.
    """
    x, W, b = clip_leaves()
    W.grad = torch.ones_like(W)
    h, loss = clip_forward(x, W, b, scale)
    t, given = {"h": h, "W": W}[target], {}
    t.register_hook(lambda grad: given.update(grad=grad, copy=grad.clone()) and None)
    handle = answer(t, max_norm)
    t.register_hook(lambda grad: given.update(untouched=torch.equal(given["grad"], given["copy"])) and None)
    loss.backward()
    seen = {
        "W.grad": W.grad.clone(),
        "b.grad": b.grad.clone(),
        "hook left its argument unchanged": given.get("untouched"),
    }
    handle.remove()  # from now on, no clipping
    W.grad, b.grad = None, None
    clip_forward(x, W, b, scale)[1].backward()
    return {**seen, "W.grad after remove": W.grad, "b.grad after remove": b.grad}


def _clip_oracle(t, max_norm):
    """The same clipping, computed by torch.nn.utils.clip_grad_norm_ on a holder."""

    def hook(grad):
        holder = torch.zeros_like(grad, requires_grad=True)
        holder.grad = grad.clone()
        torch.nn.utils.clip_grad_norm_([holder], max_norm)
        return holder.grad

    return t.register_hook(hook)


def _clip_by_value(t, max_norm):
    return t.register_hook(lambda grad: grad.clamp(-max_norm, max_norm))


def _always_rescale(t, max_norm):
    return t.register_hook(lambda grad: grad * (max_norm / grad.norm()))


def _forgot_return(t, max_norm):
    def hook(grad):
        norm = grad.norm()
        if norm > max_norm:
            grad = grad * (max_norm / norm)  # a new tensor, but nobody returns it

    return t.register_hook(hook)


def _clip(grad, max_norm):
    norm = grad.norm()
    return grad * (max_norm / norm) if norm > max_norm else grad


def _after_accumulation(t, max_norm):
    def hook(p):
        p.grad.copy_(_clip(p.grad, max_norm))  # clips the sum with earlier gradients

    return t.register_post_accumulate_grad_hook(hook)


def _node_post_hook(t, max_norm):
    def hook(grad_inputs, grad_outputs):
        return tuple(None if g is None else _clip(g, max_norm) for g in grad_inputs)

    return t.grad_fn.register_hook(hook)


def _no_handle(t, max_norm):
    clip_grad_hook(t, max_norm)


def _clips_in_place(t, max_norm):
    def hook(grad):
        norm = grad.norm()
        if norm > max_norm:
            grad.mul_(max_norm / norm)  # changes the tensor the engine handed over

    return t.register_hook(hook)


def _scale_at_most_one(t, max_norm):  # right, written differently: one expression, no branch
    return t.register_hook(lambda grad: grad * torch.clamp(max_norm / grad.norm(), max=1.0))


exercise(
    "2.2",
    name="clip_grad_hook",
    title="Clip the gradient flowing into a tensor to a maximum norm",
    solution=clip_grad_hook,
    oracle=_clip_oracle,
    run=_clip_run,
    points=2,
    cases=[case("h", 1.0, 1.0, label="h = x @ W + b, max_norm=1.0 (h's gradient has norm about 5.1)")],
    hidden=[
        case("h", 20.0, 0.25, label="h, max_norm=20.0, small gradients (norm under max_norm)"),
        case("h", 4.0, 1.0, label="h, max_norm=4.0: every entry is under 4, the norm is not"),
        case("W", 2.0, 1.0, label="the leaf W, max_norm=2.0, W.grad already holds ones"),
    ],
    wrong=[
        wrong(
            _clip_by_value,
            "grad.clamp(-max_norm, max_norm) clips each entry (clip by value): it changes the "
            "gradient's direction and leaves a big gradient made of small entries unclipped. "
            "Clip by norm: multiply the whole gradient by max_norm / grad.norm().",
        ),
        wrong(
            _always_rescale,
            "only rescale when the norm is over max_norm: a small gradient stays as it is "
            "(your hook scales it *up* to max_norm).",
        ),
        wrong(
            _forgot_return,
            "a tensor hook changes the gradient only through what it returns: return the "
            "clipped tensor (returning None keeps the gradient unchanged).",
        ),
        wrong(
            _after_accumulation,
            "a post-accumulate-grad hook runs after the gradient was added into .grad, so it "
            "clips the sum with earlier backwards' gradients (and it exists only for leaves). "
            "Use t.register_hook: it sees this backward's gradient before it goes anywhere.",
        ),
        wrong(
            _node_post_hook,
            "a post-hook on t.grad_fn sees what t's node sends on to *its* inputs, one "
            "gradient per input, after the node ran: that is the wrong tensor (and a leaf "
            "has no grad_fn). t.register_hook sees the gradient with respect to t itself.",
        ),
        wrong(
            _no_handle,
            "return the handle that t.register_hook gives you, so the caller can remove the hook.",
        ),
        wrong(
            _clips_in_place,
            "your hook changed its argument in place (grad.mul_): the engine may hand the same "
            "tensor to other consumers (both inputs of an add get one tensor), so an in-place "
            "change leaks into gradients you never meant to clip. Return a new tensor instead.",
        ),
    ],
    right=[_scale_at_most_one],
    hint="a tensor hook replaces the gradient by what it returns (None keeps it); clipping by "
    "norm rescales the whole gradient, and only when its norm is over max_norm.",
)
