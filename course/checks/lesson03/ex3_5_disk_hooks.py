"""Exercise 3.5, save to disk, clean up after ourselves: how a call is run and observed, the oracle,
the visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import gc
import itertools
import os
import tempfile

import torch
import torch._dynamo  # noqa: F401  torch.save imports it on its first call (3-6 s): paid here, not in a timed case of 3.5

from course.autograd.saved_tensors import saved_tensors_hooks
from course.checks import case, exercise, wrong
from course.checks.solutions.lesson03 import disk_hooks
from course.content.lesson03 import MemoryWatch, exact_grads, make_mlp, mlp_loss


def run_on_disk(answer, seed: int) -> dict:
    """The program of exercise 3.5: two backward passes with ``answer(directory)``'s hooks.

    Besides the files and the gradients it observes memory: after the forward pass, how many
    storages that pack was handed or made are still alive (weights and the input batch
    aside). Hooks that really moved the activations to disk leave none.
    """
    if answer is _torch_and_the_spec:
        return _torch_and_the_spec(seed)
    with tempfile.TemporaryDirectory() as directory:
        pack, unpack = answer(directory)
        x, Ws = make_mlp(seed)
        memory = MemoryWatch((x, *Ws))
        with saved_tensors_hooks(memory.wrap(pack), unpack):
            loss = mlp_loss(x, Ws)
        alive, _ = memory.alive()
        wrote = len(os.listdir(directory))
        first = torch.autograd.grad(loss, Ws, retain_graph=True)
        second = torch.autograd.grad(loss, Ws)  # frees the graph's saved values
        del loss, pack, unpack, memory
        gc.collect(1)  # young objects only: what the step made (a full collection is slow)
        left = len(os.listdir(directory))
    return _on_disk(wrote, alive, first, second, left)


def _on_disk(wrote, alive, first, second, left) -> dict:
    return {
        "files after forward (one per pack)": wrote,
        "tensors still in memory after forward": alive,
        "gradients, first backward": first,
        "gradients, second backward": second,
        "files left": left,
    }


def _torch_and_the_spec(seed: int) -> dict:
    """The oracle of 3.5: the gradients are torch's with no hooks at all, the files one per
    save that torch makes (counted by torch's own saved_tensors_hooks), and the spec's two
    zeros: no activation left in memory after forward, no file left once the graph is gone.
    ``run_on_disk`` hands the seed straight here."""
    x, Ws = make_mlp(seed)
    saves = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saves.append(1) or t.detach(), lambda t: t):
        mlp_loss(x, Ws)
    exact = exact_grads(seed)
    return _on_disk(len(saves), 0, exact, exact, 0)


def _paths_never_deleted(directory):
    counter = itertools.count()

    def pack_hook(t):
        name = os.path.join(directory, f"saved{next(counter)}.pt")
        torch.save(t.detach(), name)
        return name

    return pack_hook, torch.load


def _deleted_in_unpack(directory):
    counter = itertools.count()

    def pack_hook(t):
        name = os.path.join(directory, f"saved{next(counter)}.pt")
        torch.save(t.detach(), name)
        return name

    def unpack_hook(name):
        t = torch.load(name)
        os.remove(name)
        return t

    return pack_hook, unpack_hook


def _kept_in_memory(directory):
    return (lambda t: t.detach()), (lambda t: t)


def _file_and_memory(directory):
    """Writes each file, but keeps the tensor on the handle and unpacks that."""
    counter = itertools.count()

    class Handle:
        def __init__(self, t):
            self.name = os.path.join(directory, f"saved{next(counter)}.pt")
            self.tensor = t

        def __del__(self):
            os.remove(self.name)

    def pack_hook(t):
        handle = Handle(t.detach())
        torch.save(handle.tensor, handle.name)
        return handle

    return pack_hook, lambda handle: handle.tensor


def _disk_hooks_finalize(directory):  # a right answer: weakref.finalize instead of __del__
    import uuid
    import weakref

    class Handle:
        pass

    def pack_hook(t):
        handle = Handle()
        handle.path = os.path.join(directory, f"{uuid.uuid4().hex}.pt")
        torch.save(t.detach(), handle.path)
        weakref.finalize(handle, os.remove, handle.path)
        return handle

    return pack_hook, lambda handle: torch.load(handle.path)


exercise(
    "3.5",
    name="disk_hooks",
    title="Saved tensors on disk, files removed when the graph lets go",
    solution=disk_hooks,
    oracle=_torch_and_the_spec,
    run=run_on_disk,
    points=2,
    cases=[case(0, label="run_on_disk(disk_hooks, seed=0)")],
    hidden=[case(3, label="another seed")],
    wrong=[
        wrong(
            _paths_never_deleted,
            "the gradients are right but the files stay: nothing removes them. Return a "
            "handle object whose __del__ (or a weakref.finalize) removes the file; the graph "
            "drops the handle when it frees its saved values.",
        ),
        wrong(
            _deleted_in_unpack,
            "unpack may run more than once: the second backward (retain_graph=True before it) "
            "reads the same saved tensors again, and the file is gone. Delete when the handle "
            "is garbage-collected, not in unpack.",
        ),
        wrong(
            _kept_in_memory,
            "nothing was written to the directory: pack must write the tensor into a file "
            "there and return something small that names the file, not the tensor.",
        ),
        wrong(
            _file_and_memory,
            "the files are written, but the handle still holds the tensor, so every activation "
            "stays in memory and unpack never reads the disk: nothing was saved. The handle "
            "must hold only the file's name; unpack reads the file.",
        ),
    ],
    right=[_disk_hooks_finalize],
    hint="the packed value is all the graph keeps: it must be small (no tensor in it), name a "
    "file that holds the tensor, and remove that file when the graph lets go of it (and not "
    "before: unpack may run more than once).",
)
