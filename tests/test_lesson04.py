"""Lesson 4's checks, asked as questions against torch and course's offloader.

Does the reference ``SaveOnCPU`` of exercise 4.1 behave like torch's ``save_on_cpu`` where
torch copies (``pin_memory=True``), and give torch's gradients? Does the plain-hooks
threshold offloader of exercise 4.2 send the same tensors to the host as course's
``Offloader`` at any threshold (its oracle)? Does the simulated GPU of the checks tell a
host copy from a clone on the device? Does the prediction of exercise 4.3 follow from
the timing model's definitions, in the lesson's one unit, and does each verdict of exercise
4.4 follow the rule the lesson teaches (a copy hides behind the compute beside it, or not)?
"""

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from course.checks import get, grade_answer, outcomes_of
from course.checks.lesson04 import ex4_1_save_on_cpu as ex4_1
from course.checks.lesson04 import ex4_2_threshold_hooks as ex4_2
from course.checks.lesson04 import ex4_3_predicted_forward_bound as ex4_3
from course.checks.lesson04 import ex4_4_predicted_pays as ex4_4
from course.checks.solutions import lesson04 as solutions
from course.content import lesson04 as C
from course.offload.model import MB, predict_step, step_schedule, transfer_times


@pytest.mark.parametrize("program", sorted(C.PROGRAMS))
def test_save_on_cpu_reference_packs_like_torchs_pinned_path(program):
    """On a CPU-only machine torch's save_on_cpu(pin_memory=True) copies; so does ours."""

    def observe(ctx):
        leaves, loss_fn = C.PROGRAMS[program]()
        copies = []

        def pack(t):
            device, packed = ctx.pack_hook(t)
            copies.append(
                (
                    packed.untyped_storage().data_ptr() != t.untyped_storage().data_ptr(),
                    packed.dtype == t.dtype,
                    packed.device.type,
                    torch.equal(packed, t.detach()),
                )
            )
            return device, packed

        with torch.autograd.graph.saved_tensors_hooks(pack, ctx.unpack_hook):
            loss = loss_fn()
        loss.backward()
        return copies, [p.grad for p in leaves]

    ours, ours_grads = observe(solutions.SaveOnCPU())
    theirs, theirs_grads = observe(torch.autograd.graph.save_on_cpu(pin_memory=True))
    assert ours == theirs and all(c[0] for c in ours)
    for a, b in zip(ours_grads, theirs_grads, strict=True):
        torch.testing.assert_close(a, b)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(sorted(C.MODELS)), min_bytes=st.integers(0, 40_000))
def test_threshold_solution_agrees_with_the_offloader_at_any_threshold(model, min_bytes):
    ours = ex4_2._run_threshold(solutions.threshold_hooks, model, min_bytes)
    oracle = ex4_2._run_threshold(ex4_2._oracle_threshold, model, min_bytes)
    assert ours == oracle
    assert ours["gradients as without hooks"]


def test_is_the_oracle_of_4_1_torchs_copying_save_on_cpu_and_does_it_fail_torchs_plain_one():
    ex = get("4.1")
    assert ex.oracle is not ex.solution
    assert isinstance(ex.oracle(), torch.autograd.graph.save_on_cpu)
    assert grade_answer(ex, ex.solution).status == "passed"
    plain = grade_answer(ex, torch.autograd.graph.save_on_cpu)  # pack is tensor.cpu(): no copy on a CPU
    assert plain.status == "failed" and "tensor itself" in plain.hint


def test_threshold_cases_tell_every_wrong_answer_apart():
    ex = get("4.2")
    seen = {}
    for w in ex.wrong:
        key = repr(outcomes_of(ex, w.answer))
        assert key not in seen, f"{w.hint[:40]!r} behaves like {seen[key][:40]!r}"
        seen[key] = w.hint


def test_predictions_follow_the_models_definitions():
    n = C.PREDICT_NUMBERS
    k, bw = n["layers"], n["bandwidth_GBs"] * 1e9
    copy = transfer_times([n["saved_MB"] * MB] * k, bw)
    fwd, bwd = [n["forward_ms"] * 1e-3] * k, [n["backward_ms"] * 1e-3] * k
    # transfer-bound forward: three copies (the last layer stays) outweigh four layers of compute,
    # and it stays so in the decimal unit too (the conclusion does not hang on the unit)
    assert sum(copy[:-1]) > sum(fwd) and ex4_3._forward_bound() == "transfer-bound"
    assert sum(transfer_times([n["saved_MB"] * 1e6] * (k - 1), bw)) > sum(fwd)
    p = predict_step(fwd, bwd, [n["saved_MB"] * MB] * k, bw)
    assert p.lower <= p.pipelined <= p.overlapped <= p.synchronous


def _rule_of_the_lesson(s):
    """Exercise 4.4's verdict by the lesson's rule, not by the schedule. With one copy in flight
    and the last layer kept, each copy hides when it takes no longer than one layer's forward
    (the next layer computes beside it) and one layer's backward (each fetch runs beside a later
    layer's backward). With two layers only one copy moves, and it may run on into the last
    layer's backward: it hides when its trip out and back fits in one forward and one backward.
    Synchronous copies and an offloaded last layer never hide (one layer kept: nothing moves)."""
    copy = s["saved_MB"] * MB / (s["bandwidth_GBs"] * 1e9) * 1e3  # ms
    f, b = s["forward_ms"], s["backward_ms"]
    if s["layers"] == 1 and s["keep_last"]:
        return "free"
    if s["copies"] == "synchronous" or not s["keep_last"]:
        return "slower"
    if s["layers"] == 2:
        return "free" if copy <= b and 2 * copy <= f + b else "slower"
    return "free" if copy <= min(f, b) else "slower"


def test_each_verdict_of_4_4_follows_the_rule_the_lesson_teaches():
    assert ex4_4._which_pay() == get("4.4").solution
    assert {name: _rule_of_the_lesson(s) for name, s in C.PAY_SETTINGS.items()} == get("4.4").solution
    assert sorted(set(get("4.4").solution.values())) == ["free", "slower"]  # both verdicts occur


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(1, 8),
    forward_ms=st.floats(0.5, 8),
    ratio=st.floats(0.5, 3.0),
    saved_MB=st.floats(1, 256),
    bandwidth_GBs=st.floats(1, 64),
    copies=st.sampled_from(["one in flight", "synchronous"]),
    keep_last=st.booleans(),
)
@example(  # two layers: the one copy (2.1 ms) outlasts a forward (2 ms) yet hides
    layers=2,
    forward_ms=2.0,
    ratio=2.0,
    saved_MB=6.0,
    bandwidth_GBs=3.0,
    copies="one in flight",
    keep_last=True,
)
def test_the_timing_model_agrees_with_that_rule_on_any_uniform_setting(
    layers, forward_ms, ratio, saved_MB, bandwidth_GBs, copies, keep_last
):
    s = {
        "layers": layers,
        "forward_ms": forward_ms,
        "backward_ms": ratio * forward_ms,
        "saved_MB": saved_MB,
        "bandwidth_GBs": bandwidth_GBs,
        "copies": copies,
        "keep_last": keep_last,
    }
    copy = saved_MB * MB / (bandwidth_GBs * 1e9) * 1e3
    edges = (forward_ms, s["backward_ms"], (forward_ms + s["backward_ms"]) / 2)  # where a verdict flips
    if any(abs(copy - edge) < 1e-6 * edge for edge in edges):
        return  # a tie to the last bit: either verdict is a rounding
    without, with_offload = ex4_4._step_with_and_without(s)
    verdict = "free" if with_offload <= without * (1 + 1e-9) else "slower"
    assert verdict == _rule_of_the_lesson(s)


def test_a_verdict_written_otherwise_is_read_and_a_bool_is_refused():
    ex = get("4.4")
    assert grade_answer(ex, {k: v.title() for k, v in ex.solution.items()}).status == "passed"
    result = grade_answer(ex, {k: v == "free" for k, v in ex.solution.items()})
    assert result.status == "failed" and 'write "free" or "slower"' in result.message


def test_the_one_in_flight_schedule_lies_between_the_bounds_the_lesson_states():
    fwd, bwd, saved, bw = ex4_3._predict_inputs()
    ends = [step_schedule(fwd, bwd, saved, bw, in_flight=k).end for k in (0, 1, None)]
    assert ends[0] >= ends[1] >= ends[2] >= sum(fwd) + sum(bwd)


@pytest.mark.parametrize("exercise_id", ["4.1", "4.2"])
def test_a_clone_on_the_device_is_caught_only_by_the_simulated_gpu(exercise_id):
    """On the CPU a clone and a host copy look alike; the simulated-GPU case tells them apart."""
    ex = get(exercise_id)
    clone = {"4.1": ex4_1._ClonesOnTheDevice, "4.2": ex4_2._clones_on_device}[exercise_id]
    ours, ref = outcomes_of(ex, clone), outcomes_of(ex, ex.solution)
    labels = [c.label for c in ex.all_cases]
    differing = [label for label, a, b in zip(labels, ours, ref) if repr(a) != repr(b)]
    assert differing and all("simulated GPU" in label for label in differing)


class _EmptyLikeOnTheDevice(torch.autograd.graph.saved_tensors_hooks):
    """The mistake of the catalogued ``_ClonesOnTheDevice``, spelled with empty_like."""

    def __init__(self):
        def pack_to_cpu(tensor):
            packed = torch.empty_like(tensor)  # on the tensor's own device
            packed.copy_(tensor)
            return (tensor.device, packed)

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


def test_does_a_copy_on_the_device_get_the_same_verdict_whatever_the_build_of_torch():
    """empty_like(t).copy_(t) and t.clone() both leave the copy on the device. On a CPU-only
    build the simulation cannot run the first (it raises inside FakeTensorMode); on a CUDA
    build it can. The verdict, and so the hint, must be the same on both builds: the clone's."""
    ex = get("4.1")
    assert outcomes_of(ex, _EmptyLikeOnTheDevice) == outcomes_of(ex, ex4_1._ClonesOnTheDevice)
    verdict = grade_answer(ex, _EmptyLikeOnTheDevice)
    assert verdict.status == "failed" and "empty_like(tensor)" in verdict.hint
