"""Exercise 8.3, apply the choice: how a call is run and observed, the oracle, the visible and hidden
cases, and the known wrong answers (each with the hint it earns) and right answers written
differently.
"""

from __future__ import annotations

import contextlib
import copy
import functools

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from course.checks import case, exercise, handed, wrong
from course.checks.lesson08._shared import MODELS
from course.checks.solutions.lesson08 import offloaded_step
from course.offload.offloader import Offloader, OffloadStats


def _oracle_step(model, x, chosen):
    """What offloading the chosen blocks means, done by hand with torch's saved-tensor hooks
    (no Offloader): a forward pre-hook and a forward hook say which block is running; a
    tensor the chosen blocks save, unless its base is a parameter, goes to a host copy (its
    storage's bytes counted the first time that storage is seen) and is read back from the
    copy in backward (counted the first time each storage is read). The counts are handed
    back in the ``OffloadStats`` of an ``Offloader`` that never ran, the type the spec
    returns, so one ``run`` reads the answer and the oracle alike."""
    running, alive, out_bytes, back = [None], [], {}, set()

    def pack(t):
        base = t
        while base._base is not None:
            base = base._base
        if running[0] not in chosen or (base.is_leaf and base.requires_grad):
            return t, None
        storage = t.untyped_storage()
        alive.append(t)  # no address is reused while we count by address
        out_bytes.setdefault(storage.data_ptr(), storage.nbytes())
        return t.detach().to("cpu", copy=True), storage.data_ptr()  # the host copy

    def unpack(packed):
        t, key = packed
        if key is not None:
            back.add(key)
        return t

    def enter(name):
        return lambda module, args: running.__setitem__(0, name)

    handles = [
        h
        for name, block in model.named_children()
        for h in (
            block.register_forward_pre_hook(enter(name)),
            block.register_forward_hook(lambda module, args, out: running.__setitem__(0, None)),
        )
    ]
    try:
        with saved_tensors_hooks(pack, unpack):
            h = model(x)
            loss = h.pow(2).sum()  # outside every block: kept
    finally:
        for handle in handles:
            handle.remove()
    loss.backward()
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    off.stats = OffloadStats(d2h_bytes=sum(out_bytes.values()), h2d_bytes=sum(out_bytes[k] for k in back))
    return off


def _reference_grads(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    ref = copy.deepcopy(model)  # same weights, no hooks: torch alone
    return list(torch.autograd.grad(ref(x).pow(2).sum(), list(ref.parameters())))


@functools.cache
def _reference_grads_of(model_name: str) -> tuple[torch.Tensor, ...]:
    """torch's gradients for ``MODELS[model_name]`` (seeded: the same model every time), once
    per process: every case and every known wrong answer compares with them (a backward of
    these models takes about half a second on two cores)."""
    return tuple(_reference_grads(*MODELS[model_name]()))


def _run_step(answer, model_name, chosen):
    model, x = MODELS[model_name]()
    reference = _reference_grads_of(model_name)
    with handed(model=model, x=x):  # the step fills the model's .grad (its job: may_leave), nothing else
        off = answer(model, x, set(chosen))
    if not isinstance(off, Offloader):
        raise TypeError(f"offloaded_step should return the Offloader it used, not {type(off).__name__}")
    same = all(
        p.grad is not None and torch.allclose(p.grad, r, rtol=1e-5, atol=1e-6)
        for p, r in zip(model.parameters(), reference)
    )
    return {
        "gradients as without offload": same,
        "bytes copied to the host": off.stats.d2h_bytes,
        "bytes copied back": off.stats.h2d_bytes,
    }


def _step_offloads_every_block(model, x, chosen):
    """BAD: every block under the Offloader, chosen or not."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for _, block in model.named_children():
            h = block(h)  # no exclude() for the blocks that are not chosen
    h.pow(2).sum().backward()
    return off


def _step_inverted(model, x, chosen):
    """BAD: the chosen blocks excluded, the others offloaded."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with off.exclude() if name in chosen else contextlib.nullcontext():
                h = block(h)
    h.pow(2).sum().backward()
    return off


def _step_loss_inside(model, x, chosen):
    """BAD: the loss computed inside ``with off:``, so its saved input is offloaded too."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with contextlib.nullcontext() if name in chosen else off.exclude():
                h = block(h)
        loss = h.pow(2).sum()
    loss.backward()
    return off


def _step_without_backward(model, x, chosen):
    """BAD: the forward only: nothing comes back, no gradient is made."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with contextlib.nullcontext() if name in chosen else off.exclude():
                h = block(h)
    h.pow(2).sum()  # and no .backward()
    return off


def _left_entered(model, x, chosen):
    """BAD: the Offloader entered by hand and never exited: its hooks stay installed."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    off.__enter__()
    h = x
    for name, block in model.named_children():
        with contextlib.nullcontext() if name in chosen else off.exclude():
            h = block(h)
    with off.exclude():
        loss = h.pow(2).sum()
    loss.backward()
    return off


def _step_default_threshold(model, x, chosen):
    """BAD: Offloader's default min_bytes (1 MiB): every storage of these models stays put."""
    off = Offloader(device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with contextlib.nullcontext() if name in chosen else off.exclude():
                h = block(h)
    h.pow(2).sum().backward()
    return off


def _step_offloader_per_block(model, x, chosen):
    """BAD: a new Offloader for each chosen block; the last one is returned."""
    off, h = Offloader(min_bytes=0, device_type="cpu", mode="copy"), x
    for name, block in model.named_children():
        if name in chosen:
            off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
            with off:
                h = block(h)
        else:
            h = block(h)
    h.pow(2).sum().backward()
    return off


def _step_hooks_pick_the_blocks(model, x, chosen):
    """BAD: forward pre-hooks toggle exclude() block by block, and stay on the model."""
    off, stack = Offloader(min_bytes=0, device_type="cpu", mode="copy"), contextlib.ExitStack()

    def before(name):
        return lambda module, args: None if name in chosen else stack.enter_context(off.exclude())

    for name, block in model.named_children():
        block.register_forward_pre_hook(before(name))
        block.register_forward_hook(lambda module, args, out: stack.close())
    with off:
        h = model(x)
    h.pow(2).sum().backward()
    return off


def _step_loss_excluded(model, x, chosen):
    """A right answer written differently: the loss inside `with off:`, but excluded."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            if name in chosen:
                h = block(h)
            else:
                with off.exclude():
                    h = block(h)
        with off.exclude():
            loss = h.pow(2).sum()
    loss.backward()
    return off


exercise(
    "8.3",
    name="offloaded_step",
    title="Apply the choice: offload only the chosen blocks, same gradients",
    solution=offloaded_step,
    oracle=_oracle_step,
    run=_run_step,
    may_leave={"grad"},  # a training step's job: the model's .grad
    points=2,
    cases=[
        case("lesson", ["block0", "block3"], label="the lesson's model, chosen = {'block0', 'block3'}"),
        case("lesson", [], label="the lesson's model, chosen = set()"),
    ],
    hidden=[
        case("lesson", ["block2"], label="the lesson's model, chosen = {'block2'}"),
        case("six blocks", ["block1", "block4", "block5"], label="six blocks, three chosen"),
        case("3-d input", ["block0", "block1", "block2"], label="three blocks on a 3-d input, all chosen"),
    ],
    wrong=[
        wrong(
            _left_entered,
            "the Offloader was entered and never exited: its hooks stay on torch's "
            "saved-tensor-hooks stack, and every later forward in the notebook goes through "
            "them. Use it as a with block, which pops them on exit, even when the block raises.",
        ),
        wrong(
            _step_offloads_every_block,
            "every block was offloaded: the blocks that are not chosen must keep their "
            "saved tensors on the device (the Offloader can be told to look away).",
        ),
        wrong(
            _step_inverted,
            "inverted: the chosen blocks are the ones to offload; exclude() the others.",
        ),
        wrong(
            _step_loss_inside,
            "the loss was computed inside `with off:` and pow saved its input, the model's "
            "output, which was offloaded too. The hooks see everything saved in the block; "
            "compute the loss after it (or inside off.exclude()).",
        ),
        wrong(
            _step_default_threshold,
            "nothing was copied: the Offloader keeps every storage smaller than min_bytes, "
            "1 MiB unless you say otherwise, and every storage of these models is smaller. "
            "Offload everything the chosen blocks save: min_bytes=0.",
        ),
        wrong(
            _step_offloader_per_block,
            "the Offloader you returned counted only the last chosen block: each block had "
            "an Offloader of its own. One Offloader for the whole step, with exclude() for "
            "the blocks you keep, counts everything that moved.",
        ),
        wrong(
            _step_hooks_pick_the_blocks,
            "the bytes are right, but your forward hooks stay on the learner's model and run "
            "on every later forward. Choose the blocks in the loop that runs them (a with "
            "block per block), or remove the hooks' handles before you return.",
        ),
        wrong(
            _step_without_backward,
            "nothing came back and no gradient was made: the step is forward *and* backward; "
            "call .backward() on the loss before returning the Offloader.",
        ),
    ],
    right=[_step_loss_excluded],
    hint="the Offloader's hooks see every tensor saved while they are on, whoever saves it: "
    "decide block by block what they may take, keep everything else (the loss included) "
    "out of their reach, and remember the step ends with a backward pass.",
)
