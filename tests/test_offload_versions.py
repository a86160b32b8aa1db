"""Does the Offloader refuse a saved tensor written in place, exactly where eager does?

The oracle is torch without hooks. Every program of tests/test_version_check.py (activation,
input, parameter, leaf, views, saved output, detached alias, custom Function) runs under an
Offloader in each mode the CPU can run (passthrough, copy, and stream with a recording fake
device doing real CPU copies), with ``min_bytes`` 0 (everything offloaded that may be) and
huge (everything kept by reference): the outcome must be eager's, error message included.
"""

from __future__ import annotations

import gc

import pytest
import torch
import torch.autograd.graph as torch_graph
from hypothesis import given, settings
from hypothesis import strategies as st
from test_offload import faked_stream_mode  # pytest puts tests/ on sys.path
from test_version_check import (
    OPS,
    RAISING,
    WRITES,
    activation_modified,
    no_hooks,
    op_sequence,
    outcome,
    plain_hooks,
    same_outcome_as_eager,
)
from torch.multiprocessing.reductions import StorageWeakRef

import course.autograd.mutation as course_mutation
from course.offload import Offloader

pytestmark = pytest.mark.lesson04

HUGE = 1 << 40


def offloader(mode, min_bytes, **kw):
    if mode == "stream":
        off = faked_stream_mode(prefetch=2)
        off.min_bytes, off.check_versions = min_bytes, kw.get("check_versions", True)
        return off
    return Offloader(min_bytes=min_bytes, device_type="cpu", mode=mode, **kw)


def under(mode, min_bytes, **kw):
    """A fresh Offloader per run (the programs enter their hooks once)."""
    return lambda: offloader(mode, min_bytes, **kw)


modes = pytest.mark.parametrize("mode", ["passthrough", "copy", "stream"])
sizes = pytest.mark.parametrize("min_bytes", [0, HUGE], ids=["min_bytes=0", "min_bytes=huge"])
raising = pytest.mark.parametrize("program", RAISING, ids=lambda p: p.__name__)


@raising
@modes
@sizes
def test_offloader_raises_eagers_error(program, mode, min_bytes):
    assert outcome(program, under(mode, min_bytes)) == outcome(program, no_hooks)


@raising
@modes
@sizes
def test_without_the_write_gradients_are_eagers(program, mode, min_bytes):
    kind, ours = outcome(program, under(mode, min_bytes), mutate=False)
    _, eager = outcome(program, no_hooks, mutate=False)
    assert kind == "ok" and all(torch.equal(a, b) for a, b in zip(ours, eager))


@raising
@pytest.mark.parametrize("mode,min_bytes", [("passthrough", 0), ("copy", HUGE)])
def test_opting_out_gives_torchs_behaviour(program, mode, min_bytes):
    """check_versions=False: no error; kept by reference, the gradient of torch's own hooks."""
    kind, ours = outcome(program, under(mode, min_bytes, check_versions=False))
    _, torchs = outcome(program, plain_hooks)
    assert kind == "ok" and all(torch.equal(a, b) for a, b in zip(ours, torchs))


@given(
    ops=OPS,
    write=WRITES,
    mode=st.sampled_from(["passthrough", "copy", "stream"]),
    min_bytes=st.sampled_from([0, 30, HUGE]),
)
@settings(max_examples=60, deadline=None)
def test_op_sequences_raise_exactly_where_eager_does(ops, write, mode, min_bytes):
    """Any chain of ops, any intermediate written (or none), any rule (30 bytes: the 8-float
    storages offloaded, those a slice shrank kept): eager's outcome?"""
    assert same_outcome_as_eager(op_sequence(ops, write), under(mode, min_bytes))


def test_without_the_check_the_outcome_depends_on_min_bytes():
    """The finding: unchecked, an offloaded activation gives the old gradient, a kept one the
    written one; checked, both raise eager's error."""
    _, copied = outcome(activation_modified, under("copy", 0, check_versions=False))
    _, kept = outcome(activation_modified, under("copy", HUGE, check_versions=False))
    _, before = outcome(activation_modified, no_hooks, mutate=False)
    assert torch.equal(copied[0], before[0]) and not torch.allclose(kept[0], before[0])
    eager = outcome(activation_modified, no_hooks)
    assert (
        outcome(activation_modified, under("copy", 0))
        == eager
        == outcome(activation_modified, under("copy", HUGE))
    )


def test_repr_shows_the_check_only_when_off():
    assert repr(Offloader(min_bytes=0, device_type="cpu", mode="copy")) == (
        "Offloader(device='cpu', mode='copy', min_bytes=0)"
    )
    assert repr(Offloader(min_bytes=0, device_type="cpu", mode="copy", check_versions=False)) == (
        "Offloader(device='cpu', mode='copy', min_bytes=0, check_versions=False)"
    )


# ---------------------------------------------------------------- no false alarm

no_alarm = pytest.mark.parametrize(
    "mode,min_bytes", [(m, b) for m in ("passthrough", "copy", "stream") for b in (0, HUGE)]
)


def same_as_eager(program, hooks):
    kind, ours = outcome(program, hooks)
    _, eager = outcome(program, no_hooks)
    # bit for bit, NaN where eager has NaN (a long chain of exp overflows)
    return kind == "ok" and all(
        torch.allclose(a, b, rtol=0, atol=0, equal_nan=True) for a, b in zip(ours, eager)
    )


@no_alarm
def test_retain_graph_twice(mode, min_bytes):
    def program(hooks, mutate):
        x = torch.randn(8, requires_grad=True)
        with hooks():
            y = (x * 2).exp().sin() * x
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        return (x.grad,)

    assert same_as_eager(program, under(mode, min_bytes))


@no_alarm
def test_parameters_updated_after_backward(mode, min_bytes):
    def program(hooks, mutate):
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        off, grads = hooks(), []  # one Offloader for the whole loop, as in training
        for step in range(3):
            with off:
                loss = model(torch.full((4, 6), float(step)) + torch.arange(6.0)).square().sum()
            opt.zero_grad()
            loss.backward()
            grads += [p.grad.clone() for p in model.parameters()]
            opt.step()  # in place, after backward: nothing saved is stale
        return tuple(grads)

    assert same_as_eager(program, under(mode, min_bytes))


@no_alarm
@pytest.mark.parametrize("G", [torch_graph, course_mutation], ids=["torch", "course"])
def test_allow_mutation_on_saved_tensors_inside(G, mode, min_bytes):
    def program(hooks, mutate):
        x = torch.randn(5, requires_grad=True)
        with hooks(), G.allow_mutation_on_saved_tensors():
            a = x * 2
            y = a.exp()
            a.mul_(3)
            y.mul_(2)
            y.sum().backward()
        return (x.grad,)

    assert same_as_eager(program, under(mode, min_bytes))


@no_alarm
def test_views_saved_and_read_unmodified(mode, min_bytes):
    def program(hooks, mutate):
        x = torch.randn(4, 6, requires_grad=True)
        with hooks():
            a = x.tanh()
            y = (a[1:] * a[:, 2:].sum()).sum() + a.t().sin().sum() + a.view(24).square().sum()
        y.backward()
        return (x.grad,)

    assert same_as_eager(program, under(mode, min_bytes))


def test_the_check_keeps_no_offloaded_storage_alive():
    """In copy mode the saved activation's memory is free after forward, stamp or not."""
    x = torch.randn(256, requires_grad=True)
    off = offloader("copy", 0)
    with off:
        a = x.exp()  # saved by exp (its output) and by sin (its input): offloaded once
        storage = StorageWeakRef(a.untyped_storage())
        y = a.sin().sum()
    del a
    gc.collect()
    assert storage.expired() and off.stats.offloaded_bytes == 256 * 4
    y.backward()
    torch.testing.assert_close(x.grad, x.exp().cos() * x.exp(), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", ["stream", "copy"])
def test_stream_and_copy_modes_raise_eagers_error_on_gpu(mode):
    """On a real device (side stream, pinned pool), the same error as eager on that device."""

    def program(hooks, mutate):
        x = torch.randn(1 << 16, device="cuda", requires_grad=True)
        w = torch.nn.Parameter(torch.randn(1 << 16, device="cuda"))
        with hooks():
            y = (x * w).exp()  # w kept (a parameter), y offloaded
        if mutate:
            y.add_(1)
        y.sum().backward()
        torch.cuda.synchronize()
        return x.grad, w.grad

    off = lambda: Offloader(min_bytes=0, mode=mode)  # noqa: E731
    eager = outcome(program, no_hooks)
    assert "torch.cuda.FloatTensor" in eager[1] and outcome(program, off) == eager
    kind, ours = outcome(program, off, mutate=False)
    _, right = outcome(program, no_hooks, mutate=False)
    assert kind == "ok" and all(torch.equal(a, b) for a, b in zip(ours, right))
