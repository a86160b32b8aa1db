"""Lesson 3's programs and checks against torch: do the checks judge by what torch does?"""

import contextlib
import gc
import math
import weakref
from pathlib import Path

import pytest
import torch
import torch.autograd.graph as tg
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd_graph as cg
from course.checks import get, grade_answer
from course.checks.lesson03 import ex3_4_compress_hooks as ex3_4
from course.checks.lesson03 import ex3_5_disk_hooks as ex3_5
from course.checks.solutions import lesson03 as solutions
from course.content import lesson03 as C


def test_does_the_retain_program_count_the_same_calls_with_torchs_hooks_and_courses():
    truth = get("3.1").oracle
    assert truth(tg.saved_tensors_hooks) == truth(cg.saved_tensors_hooks) == get("3.1").solution


def test_does_the_nested_program_count_the_same_calls_with_torchs_hooks_and_courses():
    truth = get("3.2").oracle
    assert truth(tg.saved_tensors_hooks) == truth(cg.saved_tensors_hooks) == get("3.2").solution


def test_are_the_oracle_hooks_of_3_3_torchs_exact_gradients():
    for seed in (0, 1, 2):
        with_hooks = C.mlp_grads(C.exact_hooks(), seed)
        assert all(torch.equal(a, b) for a, b in zip(with_hooks, C.exact_grads(seed)))


def test_does_the_cost_of_3_4_count_what_torch_saves_beyond_weights_and_input_once_per_storage():
    saved = []

    def pack(t):
        saved.append(t.detach())
        return t.detach()

    x, Ws = C.make_mlp(0)
    with tg.saved_tensors_hooks(pack, lambda t: t):  # torch's own context manager
        C.mlp_loss(x, Ws)
    held = {t.untyped_storage().data_ptr() for t in (x, *Ws)}
    activations = [t for t in saved if t.untyped_storage().data_ptr() not in held]
    assert (
        C.packed_bytes(C.exact_hooks(), 0)
        == {"saved bytes": solutions.storage_bytes(activations)}
        == {"saved bytes": 4352}
    )
    # the reference: weights by reference (free); every other saved storage (the input
    # batch too) once, as a 2-byte-per-element copy
    weights = {w.untyped_storage().data_ptr() for w in Ws}
    once = {
        t.untyped_storage().data_ptr(): t.numel() * 2
        for t in saved
        if t.untyped_storage().data_ptr() not in weights
    }
    assert (
        C.packed_bytes(solutions.compress_hooks(), 0)
        == {"saved bytes": sum(once.values())}
        == {"saved bytes": 2432}
    )


def test_is_a_weight_kept_by_reference_free_and_a_copy_of_it_charged():
    def copy_weights():
        return (lambda t: t.clone() if ex3_4._is_parameter(t) else t.detach()), (lambda t: t)

    weights_saved = 32 * 32 * 4 + 32 * 4 * 4  # W2 and W3 are saved by the matmuls (W1 is not)
    assert C.packed_bytes(C.exact_hooks(), 0)["saved bytes"] == 4352  # weights by reference: free
    assert C.packed_bytes(copy_weights(), 0)["saved bytes"] == 4352 + weights_saved


def test_does_entering_disable_saved_tensors_hooks_under_active_hooks_raise_at_once():
    for module in (tg, cg):
        with module.saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
            with pytest.raises(RuntimeError, match="not now"):
                with module.disable_saved_tensors_hooks("not now"):
                    pass
        assert torch._C._autograd._saved_tensors_hooks_is_enabled()


def test_does_bfloat16_keep_about_2_4_significant_decimal_digits():
    bits = 1 - math.log2(torch.finfo(torch.bfloat16).eps)
    assert bits == 8 and round(bits * math.log10(2), 1) == 2.4
    assert torch.tensor(1.0 + 2**-8, dtype=torch.bfloat16).item() == 1.0  # the 9th bit is gone


def test_does_run_on_disk_see_activations_kept_in_memory():
    assert ex3_5.run_on_disk(solutions.disk_hooks, 0)["tensors still in memory after forward"] == 0
    assert ex3_5.run_on_disk(ex3_5._file_and_memory, 0)["tensors still in memory after forward"] > 0


def test_do_the_disk_hooks_work_under_torchs_context_manager_too(tmp_path):
    pack, unpack = solutions.disk_hooks(str(tmp_path))
    x, Ws = C.make_mlp(0)
    with tg.saved_tensors_hooks(pack, unpack):
        loss = C.mlp_loss(x, Ws)
    assert len(list(tmp_path.iterdir())) == 9
    grads = torch.autograd.grad(loss, Ws)
    assert all(torch.equal(a, b) for a, b in zip(grads, C.exact_grads(0)))
    assert list(tmp_path.iterdir()) == []


_dtypes = st.sampled_from([torch.float32, torch.float16, torch.float64, torch.int64, torch.bool])


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 12), _dtypes), min_size=1, max_size=4),
    picks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), max_size=8),
)
def test_is_storage_bytes_the_sum_of_the_distinct_bases_whatever_views_we_pick(sizes, picks):
    bases = [torch.zeros(n, dtype=dtype) for n, dtype in sizes]
    tensors, used = [], set()
    for which, start, whole in picks:
        k = which % len(bases)
        used.add(k)
        tensors.append(bases[k] if whole else bases[k][start:])
    expected = sum(bases[k].numel() * bases[k].element_size() for k in used)
    oracle = get("3.3").oracle(tensors)  # byte ranges covered
    assert solutions.storage_bytes(tensors) == expected == oracle


def test_do_the_oracles_of_3_3_and_3_5_tell_wrong_answers_from_right_ones():
    for ex in (get("3.3"), get("3.5")):
        assert ex.oracle is not ex.solution  # not the solution compared with itself
        assert grade_answer(ex, ex.solution).status == "passed"
        for w in ex.wrong:
            assert grade_answer(ex, w.answer).status in ("failed", "error"), (ex.id, w.hint[:60])
    spec = ex3_5.run_on_disk(get("3.5").oracle, 0)  # torch's gradients, torch's count of saves
    assert spec["files after forward (one per pack)"] == 9 and spec["files left"] == 0
    assert all(torch.equal(a, b) for a, b in zip(spec["gradients, first backward"], C.exact_grads(0)))


# --- What torch stops checking under hooks (the lesson's cells a1f0c002, 0acdbb35, a1f0c005) ---

_NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "03_saved_tensors.ipynb"


def _stored_text(cell_id: str) -> str:
    import nbformat

    cell = next(c for c in nbformat.read(_NOTEBOOK, as_version=4).cells if c.get("id") == cell_id)
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def _bump_a_saved_result(hooks):
    x = torch.ones(3, requires_grad=True)
    with hooks:
        y = x.exp()  # ExpBackward0 saves y
    y.add_(1)
    y.sum().backward()
    return x.grad


def test_does_torch_raise_without_hooks_and_give_a_silently_wrong_gradient_under_them():
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _bump_a_saved_result(contextlib.nullcontext())
    for module in (tg, cg):  # torch's hooks and the course's: the same silence
        grad = _bump_a_saved_result(module.saved_tensors_hooks(lambda t: t.detach(), lambda t: t))
        assert torch.allclose(grad, torch.full((3,), math.e + 1))  # the true gradient is e


def test_does_the_lesson_show_the_error_without_hooks_and_the_wrong_gradient_with_them():
    shown = _stored_text("a1f0c002").splitlines()
    assert shown[0].startswith("no hooks") and "modified by an inplace operation" in shown[0]
    wrong = f"tensor([{math.e + 1:.4f}, {math.e + 1:.4f}, {math.e + 1:.4f}])"
    assert shown[1] == f"torch's hooks   {wrong}" and shown[2] == f"course's hooks  {wrong}"


@pytest.mark.parametrize("module", [tg, cg], ids=["torch", "course"])
def test_is_an_output_saved_by_save_on_cpu_on_the_cpu_freed_only_by_a_backward_that_frees_the_graph(module):
    def freed(backward):
        v = torch.ones(3, requires_grad=True)
        with module.save_on_cpu():
            out = v.exp()  # .cpu() of a CPU tensor is the tensor: the output is packed as itself
        if backward is not None:
            out.sum().backward(retain_graph=backward == "retain")
        ref = weakref.ref(out)
        del out
        gc.collect()
        return ref() is None

    assert [freed(None), freed("retain"), freed("free")] == [False, False, True]
    assert "no backward False, retain_graph=True False, backward() True" in _stored_text("a1f0c005")


def test_does_the_solution_of_3_4_raise_where_torch_raises_and_the_unchecked_pair_not():
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        C.mlp_grads(None, 0, step_early=True)  # torch by itself
    with pytest.raises(RuntimeError):
        C.mlp_grads(solutions.compress_hooks(), 0, step_early=True)
    unchecked = ex3_4._no_version_check()
    grads = C.mlp_grads(unchecked, 0, step_early=True)  # silently computed with the changed weight
    assert not torch.allclose(grads[1], C.exact_grads(0)[1], rtol=2e-2, atol=3e-3)


def test_is_the_check_of_3_4_quiet_when_nothing_changed_in_place():
    for seed in (0, 1):
        grads = C.mlp_grads(solutions.compress_hooks(), seed)
        assert all(torch.allclose(g, e, rtol=2e-2, atol=3e-3) for g, e in zip(grads, C.exact_grads(seed)))
