"""Does save_on_cpu on a CPU graph keep a saved output alive through a reference cycle?

On a CPU tensor ``.cpu()`` returns the tensor itself, so torch's ``save_on_cpu`` packs a
saved *output* as itself: output -> grad_fn -> saved value -> output, a cycle through C++
that Python's garbage collector cannot see. The output is never freed if backward does not
run, or runs with ``retain_graph=True``; a plain backward frees the saved values and so
breaks the cycle. course's ``save_on_cpu`` is torch's, cycle included (conformance); the
Offloader, whose packed values hold a detached tensor or a host copy and a weak stamp, and
``checked_hooks`` around a detaching pack, have none.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
import torch.autograd.graph as torch_graph

import course.autograd.saved_tensors as course_saved
from course.autograd.version_check import checked_hooks
from course.offload import Offloader

pytestmark = pytest.mark.lesson04


def survives(hooks, backward):
    """Is ``exp``'s output (saved by exp itself) still alive once the caller lets go of it?

    ``backward`` is None (no backward), "retain" or "plain".
    """
    x = torch.randn(16, requires_grad=True)
    with hooks():
        y = x.exp()  # exp saves its output: pack gets y itself
    loss = y.sum()
    ref = weakref.ref(y)
    del y
    if backward == "retain":
        loss.backward(retain_graph=True)
    elif backward == "plain":
        loss.backward()
    del loss
    gc.collect()
    alive = ref() is not None
    if alive:  # break the cycle so the test leaves nothing behind
        ref().sum().backward()
        gc.collect()
        assert ref() is None
    return alive


SAVE_ON_CPU = pytest.mark.parametrize("G", [torch_graph, course_saved], ids=["torch", "course"])


@SAVE_ON_CPU
@pytest.mark.parametrize("backward", [None, "retain"], ids=["no backward", "retain_graph"])
def test_save_on_cpu_on_cpu_keeps_a_saved_output_alive(G, backward):
    assert survives(G.save_on_cpu, backward)


@SAVE_ON_CPU
def test_a_plain_backward_frees_it(G):
    assert not survives(G.save_on_cpu, "plain")


@SAVE_ON_CPU
def test_it_is_the_pack_itself(G):
    """The cycle is there because pack returns the very tensor it was given."""
    packed = []
    hooks = G.save_on_cpu()
    x = torch.randn(4, requires_grad=True)
    with torch_graph.saved_tensors_hooks(
        lambda t: packed.append((t, hooks.pack_hook(t))) or t.detach(), lambda t: t
    ):
        y = x.exp()
    ((t, (device, stored)),) = packed
    assert t is y and stored is y and device == torch.device("cpu")


@pytest.mark.parametrize("backward", [None, "retain", "plain"], ids=["no backward", "retain_graph", "plain"])
@pytest.mark.parametrize(
    "hooks",
    [
        lambda: Offloader(min_bytes=0, device_type="cpu", mode="copy"),
        lambda: Offloader(min_bytes=1 << 40, device_type="cpu", mode="copy"),  # kept: a detached alias
        lambda: course_saved.saved_tensors_hooks(*checked_hooks(lambda t: t.detach(), lambda t: t)),
    ],
    ids=["offloaded", "kept", "checked_hooks"],
)
def test_the_offloader_and_checked_hooks_hold_no_cycle(hooks, backward):
    assert not survives(hooks, backward)
