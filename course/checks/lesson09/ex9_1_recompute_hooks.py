"""Exercise 9.1, recompute instead of store, as a pair of hooks: how a call is run and observed, the
oracle, the visible and hidden cases, and the known wrong answers (each with the hint it earns) and
right answers written differently.
"""

from __future__ import annotations

import gc
import itertools

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.checkpoint import (
    checkpoint,
    set_checkpoint_early_stop,
)

from course.checks import case, exercise, wrong
from course.checks.lesson09._shared import once_per_case
from course.checks.solutions.lesson09 import (
    recompute_hooks,
)
from course.content.lesson09 import (
    PROGRAMS,
    OpCounter,
    backward_counts,
)


class _TorchCheckpoint:
    """What the oracle of 9.1 returns instead of hooks: "run torch's checkpoint here"."""


def _oracle_hooks(fn, *args):
    """torch.utils.checkpoint, non-reentrant, early stop off (so it reruns the whole function)."""
    return _TorchCheckpoint()


@once_per_case
def _run_hooks(answer, name):
    """Forward and backward of program ``name`` under the answer's hooks (or torch's
    checkpoint, for the oracle): what runs, what stays alive, what pack returns."""
    fn, args, leaves = PROGRAMS[name]()
    hooks = answer(fn, *args)
    returned = []  # what pack returned, for each saved tensor

    def forward(f, a):
        if isinstance(hooks, _TorchCheckpoint):
            return checkpoint(f, *a, use_reentrant=False)
        pack, unpack = hooks

        def watched(t):
            returned.append(isinstance(pack_result := pack(t), torch.Tensor))
            return pack_result

        with saved_tensors_hooks(watched, unpack):
            return f(*a)

    with set_checkpoint_early_stop(False):
        fwd, bwd, alive, grads = backward_counts(fn, args, leaves, forward)
        outcome = {
            "gradients": grads,
            "ops in forward": dict(fwd),
            "ops in backward": dict(bwd),
            "forward results kept alive": alive,
            "tensors pack returned": sum(returned),
        }
        if name in _LEAK_PROGRAMS:  # three more steps: on the small programs only
            outcome["results alive after 3 steps and gc.collect()"] = _alive_after_backward(answer, name)
    return outcome


#: The programs on which 9.1's check also counts what outlives backward.
_LEAK_PROGRAMS = ("block", "exp", "pointwise")


def _alive_after_backward(answer, name, steps: int = 3) -> int:
    """How many tensors made by ops in backward (the rerun's among them) outlive ``steps``
    forward and backward passes of program ``name`` and a ``gc.collect()``: what a pair of
    hooks leaks per step."""
    made = []
    for _ in range(steps):
        fn, args, leaves = PROGRAMS[name]()
        hooks = answer(fn, *args)
        if isinstance(hooks, _TorchCheckpoint):
            out = checkpoint(fn, *args, use_reentrant=False)
        else:
            with saved_tensors_hooks(*hooks):
                out = fn(*args)
        with OpCounter() as bwd:
            torch.autograd.grad(out, leaves)
        made.extend(bwd.results)
        del fn, args, leaves, hooks, out
    gc.collect()
    return sum(ref() is not None for ref in made)


def _identity_hooks(fn, *args):
    return (lambda t: t), (lambda t: t)


def _index_but_keep(fn, *args):
    kept = []

    def pack(t):
        kept.append(t)
        return len(kept) - 1

    return pack, kept.__getitem__


def _rerun_keeping_its_graph(fn, *args):
    """BAD: the rerun's tensors recorded and handed back as they are, not detached."""
    counter, recomputed = itertools.count(), []

    def unpack(index):
        if not recomputed:

            def record(t):
                recomputed.append(t)  # t still holds the rerun's graph
                return t

            with torch.enable_grad(), saved_tensors_hooks(record, lambda t: t):
                fn(*args)
        return recomputed[index]

    return (lambda t: next(counter)), unpack


def _rerun_without_grad_mode(fn, *args):
    """BAD: the rerun happens where unpack runs, in backward, where grad mode is off."""
    counter, recomputed = itertools.count(), []

    def unpack(index):
        if not recomputed:

            def record(t):
                recomputed.append(t.detach())
                return t.detach()

            with saved_tensors_hooks(record, lambda t: t):
                fn(*args)  # no torch.enable_grad(): nothing is saved, nothing recorded
        return recomputed[index]

    return (lambda t: next(counter)), unpack


def _rerun_on_every_unpack(fn, *args):
    """BAD: the function reruns for every saved tensor backward unpacks."""
    counter, recomputed = itertools.count(), []

    def unpack(index):
        recomputed.clear()  # what the last rerun saved is thrown away

        def record(t):
            recomputed.append(t.detach())
            return t.detach()

        with torch.enable_grad(), saved_tensors_hooks(record, lambda t: t):
            fn(*args)
        return recomputed[index]

    return (lambda t: next(counter)), unpack


def _recompute_hooks_by_dict(fn, *args):
    """A right answer written differently: packs are numbered by a dict's length, and the
    rerun fills a dict once, under torch.autograd.grad-style grad mode switched on."""
    order = {}
    rerun = {}

    def pack(t):
        order[len(order)] = None
        return len(order) - 1

    def unpack(k):
        if not rerun:
            torch.set_grad_enabled(True)
            try:
                with saved_tensors_hooks(lambda t: rerun.setdefault(len(rerun), t.detach()), lambda t: t):
                    fn(*args)
            finally:
                torch.set_grad_enabled(False)
        return rerun[k]

    return pack, unpack


exercise(
    "9.1",
    name="recompute_hooks",
    title="Checkpointing as a pair of saved-tensor hooks: keep nothing, recompute on the first unpack",
    solution=recompute_hooks,
    oracle=_oracle_hooks,
    run=_run_hooks,
    points=3,
    cases=[
        case("block", label="block(x) = down(gelu(up(x))).sum(), x of shape (4, 8)"),
        case("exp", label="x.exp().sin().sum(), x of shape (64, 64): exp saves its own output"),
    ],
    hidden=[
        case("pointwise", label="((x @ w).sin() * x.exp()).sum(), two leaves"),
        case("model", label="the lesson's three-block model, model(x).pow(2).sum()"),
        case("float64, 3-d input", label="the block in float64 on a (2, 3, 8) input"),
    ],
    wrong=[
        wrong(
            _identity_hooks,
            "your pack hook returns the tensor itself, so autograd keeps every activation "
            "(see 'forward results kept alive') and backward never reruns anything. Pack must "
            "return something small that lets unpack find the tensor again later.",
        ),
        wrong(
            _index_but_keep,
            "pack returns an index, but it also puts the tensor in a list: the activation is "
            "still held (by you instead of autograd), so nothing is saved and nothing reruns.",
        ),
        wrong(
            _rerun_keeping_its_graph,
            "the rerun's tensors you keep and hand back still carry the rerun's graph (their "
            "grad_fn), and that graph holds tensors too: exp saves its own output, so the output "
            "and its node hold each other (lesson 3's cycle), and they outlive backward and "
            "gc.collect() (see 'results alive after 3 steps'). Keep and hand back t.detach(), as "
            "torch's _recomputation_hook does.",
        ),
        wrong(
            _rerun_without_grad_mode,
            "unpack runs during backward, where grad mode is off: the rerun records no graph "
            "and saves nothing, so there is nothing to hand back. Rerun the function with "
            "grad mode switched on.",
        ),
        wrong(
            _rerun_on_every_unpack,
            "the function reruns on every unpack (see 'ops in backward'): one rerun yields all "
            "the saved tensors at once; keep them and serve later unpacks from what you kept.",
        ),
    ],
    right=[_recompute_hooks_by_dict],
    hint="autograd calls pack once per saved tensor, in order, during forward, and unpack when "
    "backward needs one. If pack keeps only where a tensor came in the order, the first unpack "
    "can recreate all of them by running the function again, as forward did.",
)
