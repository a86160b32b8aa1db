"""Lesson 3's programs and checks against torch: do the checks judge by what torch does?"""

import math

import pytest
import torch
import torch.autograd.graph as tg
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd_graph as cg
from course.checks import lesson03 as L


def test_does_the_retain_program_count_the_same_calls_with_torchs_hooks_and_courses():
    assert L.retain_program(tg.saved_tensors_hooks) == L.retain_program(cg.saved_tensors_hooks)


def test_are_the_oracle_hooks_of_3_3_torchs_exact_gradients():
    for seed in (0, 1, 2):
        with_hooks = L.mlp_grads(L.exact_hooks(), seed)
        assert all(torch.equal(a, b) for a, b in zip(with_hooks, L.exact_grads(seed)))


def test_does_the_cost_of_3_4_count_what_torch_saves_beyond_weights_and_input_once_per_storage():
    saved = []

    def pack(t):
        saved.append(t.detach())
        return t.detach()

    x, Ws = L.make_mlp(0)
    with tg.saved_tensors_hooks(pack, lambda t: t):  # torch's own context manager
        L.mlp_loss(x, Ws)
    held = {t.untyped_storage().data_ptr() for t in (x, *Ws)}
    activations = [t for t in saved if t.untyped_storage().data_ptr() not in held]
    assert L.packed_bytes(L.exact_hooks(), 0) == {"saved bytes": L.storage_bytes(activations)} == {"saved bytes": 4352}
    # the reference: weights by reference (free); every other saved storage (the input
    # batch too) once, as a 2-byte-per-element copy
    weights = {w.untyped_storage().data_ptr() for w in Ws}
    once = {t.untyped_storage().data_ptr(): t.numel() * 2 for t in saved if t.untyped_storage().data_ptr() not in weights}
    assert L.packed_bytes(L.compress_hooks(), 0) == {"saved bytes": sum(once.values())} == {"saved bytes": 2432}


def test_is_a_weight_kept_by_reference_free_and_a_copy_of_it_charged():
    def copy_weights():
        return (lambda t: t.clone() if L._is_parameter(t) else t.detach()), (lambda t: t)

    weights_saved = 32 * 32 * 4 + 32 * 4 * 4  # W2 and W3 are saved by the matmuls (W1 is not)
    assert L.packed_bytes(L.exact_hooks(), 0)["saved bytes"] == 4352  # weights by reference: free
    assert L.packed_bytes(copy_weights(), 0)["saved bytes"] == 4352 + weights_saved


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
    assert L.run_on_disk(L.disk_hooks, 0)["tensors still in memory after forward"] == 0
    assert L.run_on_disk(L._file_and_memory, 0)["tensors still in memory after forward"] > 0


def test_do_the_disk_hooks_work_under_torchs_context_manager_too(tmp_path):
    pack, unpack = L.disk_hooks(str(tmp_path))
    x, Ws = L.make_mlp(0)
    with tg.saved_tensors_hooks(pack, unpack):
        loss = L.mlp_loss(x, Ws)
    assert len(list(tmp_path.iterdir())) == 9
    grads = torch.autograd.grad(loss, Ws)
    assert all(torch.equal(a, b) for a, b in zip(grads, L.exact_grads(0)))
    assert list(tmp_path.iterdir()) == []


_dtypes = st.sampled_from([torch.float32, torch.float16, torch.float64, torch.int64, torch.bool])


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 12), _dtypes), min_size=1, max_size=4),
       picks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), max_size=8))
def test_is_storage_bytes_the_sum_of_the_distinct_bases_whatever_views_we_pick(sizes, picks):
    bases = [torch.zeros(n, dtype=dtype) for n, dtype in sizes]
    tensors, used = [], set()
    for which, start, whole in picks:
        k = which % len(bases)
        used.add(k)
        tensors.append(bases[k] if whole else bases[k][start:])
    expected = sum(bases[k].numel() * bases[k].element_size() for k in used)
    assert L.storage_bytes(tensors) == expected
