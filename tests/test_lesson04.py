"""Lesson 4's checks, asked as questions against torch and course's offloader.

Does the reference ``SaveOnCPU`` of exercise 4.1 behave like torch's ``save_on_cpu`` where
torch copies (``pin_memory=True``), and give torch's gradients? Does the plain-hooks
threshold offloader of exercise 4.2 send the same tensors to the host as course's
``Offloader`` at any threshold (its oracle)? Do the predictions of exercises 4.3 and 4.4
follow from the timing model's definitions?
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course.checks import get, outcomes_of
from course.checks import lesson04 as L
from course.offload.model import overlapped_time, synchronous_time, transfer_times


@pytest.mark.parametrize("program", sorted(L.PROGRAMS))
def test_save_on_cpu_reference_packs_like_torchs_pinned_path(program):
    """On a CPU-only machine torch's save_on_cpu(pin_memory=True) copies; so does ours."""

    def observe(ctx):
        leaves, loss_fn = L.PROGRAMS[program]()
        copies = []

        def pack(t):
            device, packed = ctx.pack_hook(t)
            copies.append((packed.untyped_storage().data_ptr() != t.untyped_storage().data_ptr(),
                           packed.dtype == t.dtype, packed.device.type, torch.equal(packed, t.detach())))
            return device, packed

        with torch.autograd.graph.saved_tensors_hooks(pack, ctx.unpack_hook):
            loss = loss_fn()
        loss.backward()
        return copies, [p.grad for p in leaves]

    ours, ours_grads = observe(L.SaveOnCPU())
    theirs, theirs_grads = observe(torch.autograd.graph.save_on_cpu(pin_memory=True))
    assert ours == theirs and all(c[0] for c in ours)
    for a, b in zip(ours_grads, theirs_grads, strict=True):
        torch.testing.assert_close(a, b)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(sorted(L.MODELS)), min_bytes=st.integers(0, 40_000))
def test_threshold_solution_agrees_with_the_offloader_at_any_threshold(model, min_bytes):
    ours = L._run_threshold(L.threshold_hooks, model, min_bytes)
    oracle = L._run_threshold(L._oracle_threshold, model, min_bytes)
    assert ours == oracle
    assert ours["gradients as without hooks"]


def test_threshold_cases_tell_every_wrong_answer_apart():
    ex = get("4.2")
    seen = {}
    for w in ex.wrong:
        key = repr(outcomes_of(ex, w.answer))
        assert key not in seen, f"{w.hint[:40]!r} behaves like {seen[key][:40]!r}"
        seen[key] = w.hint


def test_predictions_follow_the_models_definitions():
    n = L.PREDICT_NUMBERS
    k, bw = n["layers"], n["bandwidth_GBs"] * 1e9
    copy = transfer_times([n["saved_MB"] * 1e6] * k, bw)
    fwd, bwd = [n["forward_ms"] * 1e-3] * k, [n["backward_ms"] * 1e-3] * k
    # transfer-bound: each copy is longer than its layer's forward compute
    assert all(x > c for x, c in zip(copy, fwd)) and L._forward_bound() == "transfer-bound"
    by_hand = sum(max(c, x) for c, x in zip(fwd, copy)) + sum(max(c, x) for c, x in zip(bwd, copy))
    assert L._overlapped_step_ms() == pytest.approx(by_hand * 1e3)
    assert overlapped_time(fwd, copy) < synchronous_time(fwd, copy)
    wrong_values = {w.answer for w in get("4.4").wrong}
    assert L._overlapped_step_ms() not in wrong_values
