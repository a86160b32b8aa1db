"""What lesson 3 (saved tensors) runs: a small MLP, its gradients under hooks, and what they keep.

solutions/03_saved_tensors.ipynb and the checks of ``course/checks/lesson03/`` (exercises
3.4 and 3.5) run the same MLP, so a notebook cell shows exactly what a check judges:

    >>> x, Ws = make_mlp(seed=0)                  # x (16, 8) needs no grad; three weights do
    >>> [tuple(W.shape) for W in Ws]
    [(8, 32), (32, 32), (32, 4)]
    >>> grads = mlp_grads(exact_hooks(), seed=0)  # the gradients under a pair of hooks
    >>> all(torch.equal(g, e) for g, e in zip(grads, exact_grads(seed=0)))
    True
    >>> packed_bytes(exact_hooks(), seed=0)       # what keeping every activation as it is costs
    {'saved bytes': 4352}

- ``make_mlp`` / ``mlp_loss``: the model (relu, relu, tanh, a squared mean), and its inputs;
- ``mlp_grads`` / ``exact_grads``: the weights' gradients with a ``(pack, unpack)`` pair
  around the forward pass, and with no hooks at all;
- ``packed_bytes``: the memory a pair of hooks keeps alive once the forward pass is over,
  beyond the weights and the input batch (the cost of exercise 3.4), measured by
  ``MemoryWatch``, which exercise 3.5's check uses too.

Memory is judged by what stays alive, not by what a packed value looks like: ``MemoryWatch``
follows (by weak reference) every storage pack is handed or creates, so a copy hidden in a
closure or on a handle counts; the weights and the input batch, which the step holds anyway,
cost nothing kept by reference.

Nothing here judges an answer: truths, oracles, cases and known wrong answers live in
``course/checks/lesson03/``.
"""

from __future__ import annotations

import contextlib
import gc

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course.autograd.saved_tensors import saved_tensors_hooks

__all__ = ["MemoryWatch", "exact_grads", "exact_hooks", "make_mlp", "mlp_grads", "mlp_loss", "packed_bytes"]

# --- The MLP of exercises 3.4 and 3.5 -------------------------------------------------------


def make_mlp(
    seed: int,
    batch: int = 16,
    width: int = 32,
    scale: float = 1.0,
    dtype=torch.float32,
    transposed: bool = False,
):
    """The inputs of exercises 3.4 and 3.5: x (no grad) and three weight matrices (leaves);
    ``transposed`` stores each as (out, in), as nn.Linear does, for ``mlp_loss(..., transposed=True)``."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(batch, 8, generator=g) * scale).to(dtype)
    shapes = [(8, width), (width, width), (width, 4)]
    shapes = [s[::-1] for s in shapes] if transposed else shapes
    Ws = [(torch.randn(*s, generator=g) / s[0] ** 0.5).to(dtype).requires_grad_() for s in shapes]
    return x, Ws


def mlp_loss(x, Ws, transposed: bool = False):
    """relu(x @ W1) -> relu(. @ W2) -> tanh(. @ W3) -> squared mean. With ``transposed``,
    each matmul uses ``W.t()`` (as nn.Linear does), so what it saves is a *view* of a weight."""
    Ws = [W.t() for W in Ws] if transposed else Ws
    h = x
    for W in Ws[:-1]:
        h = torch.relu(h @ W)  # (batch, width): saved twice, by relu and by the next matmul
    return (h @ Ws[-1]).tanh().pow(2).mean()


def mlp_grads(
    hooks,
    seed: int,
    scale: float = 1.0,
    dtype=torch.float32,
    step_early: bool = False,
    transposed: bool = False,
):
    """Gradients of the MLP's weights with ``hooks = (pack, unpack)`` around the forward
    (``hooks=None``: no hooks at all, torch's own saving and checking).

    ``step_early=True`` updates the last weight in place between forward and backward, as an
    optimizer step taken too early would: without hooks torch raises, since the last matmul
    saved that weight; hooks must raise too (torch skips its version check under hooks).
    ``transposed`` stores the weights (out, in) and uses ``W.t()``: what is saved is a view.
    """
    x, Ws = make_mlp(seed, scale=scale, dtype=dtype, transposed=transposed)
    with saved_tensors_hooks(*hooks) if hooks is not None else contextlib.nullcontext():
        loss = mlp_loss(x, Ws, transposed)
    if step_early:
        with torch.no_grad():
            Ws[-1].mul_(0.5)  # bumps the version of a tensor the last matmul saved
    return torch.autograd.grad(loss, Ws)


def exact_grads(seed: int, scale: float = 1.0, dtype=torch.float32, transposed: bool = False):
    """The MLP's gradients with no hooks at all."""
    x, Ws = make_mlp(seed, scale=scale, dtype=dtype, transposed=transposed)
    return torch.autograd.grad(mlp_loss(x, Ws, transposed), Ws)  # no hooks: what torch saves by itself


def exact_hooks():
    """Hooks that keep each saved tensor as it is: torch's exact gradients, and its memory."""
    return (lambda t: t.detach()), (lambda t: t)


# --- What the hooks keep alive ----------------------------------------------------------------


def _tensors_in(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors_in(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors_in(item)


class MemoryWatch:
    """Which memory the pack hooks keep alive once the forward pass is over.

    It watches every storage handed to pack and every storage an op *inside* pack creates
    (a dispatch mode sees them), skipping the ones the step holds anyway (``held_anyway``: the
    weights and the input batch). Weak references only: watching keeps nothing alive. So
    memory hidden in a closure, a handle or a cache counts as surely as memory in the packed
    value.

    Example (a pack that keeps every saved tensor as it is):

        >>> x, Ws = make_mlp(seed=0)
        >>> memory = MemoryWatch((x, *Ws))
        >>> with saved_tensors_hooks(memory.wrap(lambda t: t.detach()), lambda t: t):
        ...     loss = mlp_loss(x, Ws)
        >>> memory.alive()   # (storages, bytes): two relu outputs and tanh's, the weights and x aside
        (3, 4352)
    """

    def __init__(self, held_anyway) -> None:
        self.held_anyway = {t.untyped_storage().data_ptr() for t in held_anyway}
        self.watched: dict[int, tuple[int, int]] = {}  # storage start -> (weak ref, nbytes)

    def watch(self, t) -> None:
        """Follow ``t``'s storage (unless the step holds it anyway, or it is empty)."""
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self.held_anyway or storage.nbytes() == 0:
            return
        old = self.watched.get(ptr)
        if old is not None:
            if not torch.UntypedStorage._expired(old[0]):
                return  # the same storage, seen before
            torch.UntypedStorage._free_weak_ref(old[0])  # a dead one's address, reused
        self.watched[ptr] = (storage._weak_ref(), storage.nbytes())

    def wrap(self, pack):
        """``pack``, watched: what it is handed and every tensor an op inside it creates."""
        watch = self.watch

        class _Created(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in _tensors_in(out):
                    watch(t)
                return out

        def watching_pack(t):
            watch(t)
            with _Created():
                return pack(t)

        return watching_pack

    def alive(self) -> tuple[int, int]:
        """(storages, bytes) still alive, after collecting the young garbage; frees the refs."""
        gc.collect(1)  # young objects only: what the step made (a full collection is slow)
        live = [n for ref, n in self.watched.values() if not torch.UntypedStorage._expired(ref)]
        for ref, _ in self.watched.values():
            torch.UntypedStorage._free_weak_ref(ref)
        self.watched.clear()
        return len(live), sum(live)


def packed_bytes(hooks, seed: int, scale: float = 1.0, dtype=torch.float32, transposed: bool = False) -> dict:
    """The cost of 3.4: the memory the pack hooks keep alive *beyond* what the step holds anyway.

    After the forward pass, every storage still alive that pack was handed or that an op in
    pack created is counted once, at its full size, except the storages of the weights and of
    the input batch: the model and the caller keep those for the whole step, so keeping them
    by reference costs nothing. A 16-bit copy of a weight is new memory, and so is each copy
    of an activation, wherever it is kept (in the packed value, a handle or a cache).
    """
    pack, unpack = hooks
    x, Ws = make_mlp(seed, scale=scale, dtype=dtype, transposed=transposed)
    memory = MemoryWatch((x, *Ws))
    with saved_tensors_hooks(memory.wrap(pack), unpack):
        loss = mlp_loss(x, Ws, transposed)
    _, extra = memory.alive()
    torch.autograd.grad(loss, Ws)  # the same step as the check's: forward and backward
    return {"saved bytes": extra}
